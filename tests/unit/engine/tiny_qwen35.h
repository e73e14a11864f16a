// tests/unit/engine/tiny_qwen35.h — a tiny qwen35 (Gated DeltaNet hybrid) GGUF built in memory,
// optionally with NextN/MTP blocks, for the engine tests (hybrid_engine_test, nextn_test).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zinc_test::tiny_qwen35 {

// 4 layers (3 DeltaNet + 1 attention), n_embd 64, 2 QK / 4 V DeltaNet heads of 16, attention 2
// heads of 32 (1 KV head), RoPE on 8 dims with sections [2, 1, 1, 0], vocab 96.
constexpr int kEmbd = 64, kVocab = 96, kLayers = 4, kFf = 96, kHead = 2, kHeadKv = 1, kHd = 32;
constexpr int kConv = 4, kDk = 16, kNk = 2, kNv = 4;

// Overrides for the load-error tests.
struct Bad {
    std::string omit_key;  // e.g. "ssm.conv_kernel"
    std::vector<int> sections = {2, 1, 1, 0};
    int inner_size = kNv * kDk;
    int n_v = kNv;
    /// NextN/MTP blocks after the 4 trunk layers (nextn_predict_layers, counted in block_count)
    int n_nextn = 0;
    bool nextn_head = false;  // with the optional shared_head_norm / shared_head_head
};

/// The GGUF bytes (random weights, fixed seed).
std::vector<uint8_t> build_qwen35(const Bad& bad = {});

}  // namespace zinc_test::tiny_qwen35
