// zinc/model/pooling.h — one embedding vector from a sequence's hidden states
// (Runner::forward_embed's rows), as llama.cpp's llama_pooling_type and sentence-transformers'
// Pooling + Normalize modules define it:
//   Mean: the average of every row (sentence-transformers' pooling_mode_mean_tokens; with one
//         unpadded sequence its attention mask is all ones)
//   Cls:  the first row (BERT's [CLS] token)
//   Last: the last row (decoder embedding models: the only row that has seen the whole input)
// then divided by its L2 norm (sentence-transformers' Normalize; llama.cpp's embd_normalize=2).
// Sums are in double; a zero vector stays zero.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace zinc::model {

/// Values are llama.cpp's enum llama_pooling_type (the GGUF key <arch>.pooling_type).
enum class Pooling : int32_t { Mean = 1, Cls = 2, Last = 3 };

/// "mean", "cls", "last".
const char* pooling_name(Pooling p);
/// The pooling of a name, or nullopt.
std::optional<Pooling> parse_pooling(std::string_view name);
/// The pooling of a GGUF pooling_type value (1, 2, 3), or nullopt (0 none, -1 absent, other).
std::optional<Pooling> pooling_from_gguf(int32_t pooling_type);

/// Pool rows (n_rows, dim) f32 row-major (n_rows >= 1) and L2-normalise: (dim) f32.
std::vector<float> pool_normalized(const float* rows, int64_t n_rows, int64_t dim, Pooling p);

}  // namespace zinc::model
