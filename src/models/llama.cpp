// zinc/models/llama.cpp — Llama (Touvron et al. 2023) as stored by llama.cpp's converter:
// pre-norm decoder, RMS norm, SwiGLU FFN, RoPE in NORM (adjacent-pair) mode because the
// converter permutes the Q/K rows, GQA, optional tied embeddings (SmolLM2 has no output.weight)
// and optional llama-3 rope_freqs.
#include "models/factories.h"
#include "models/prenorm_decoder.h"

namespace zinc::models {

Result<std::unique_ptr<Model>> make_llama(const gguf::File& file, ModelConfig cfg) {
    return PrenormDecoder::create(file, std::move(cfg), DecoderVariant{});
}

}  // namespace zinc::models
