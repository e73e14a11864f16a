// zinc/cli/synth_random.h — the seeded random weights of `zinc synth` (cli/synth.cpp): every
// row depends only on (seed, tensor name, row), so a file is identical for any thread count.
//
// fill_row: n values ~ N(mean, sigma) as Irwin-Hall sums of four 16-bit uniforms (|z| <= 3.46).
// direct_row: for Q8_0, Q4_0, Q4_K and Q6_K the row's blocks written directly from random codes
// and scales, drawn so a block's values have mean ~0 and standard deviation sigma (no float
// weights, no quantizer; the recipe per type is in synth_random.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "quant/types.h"

namespace zinc::cli {

/// SplitMix64 step (Steele et al. 2014): advances s, returns the next 64 random bits.
uint64_t splitmix(uint64_t& s);
/// FNV-1a hash of s (a tensor's name into its seed).
uint64_t hash_str(const std::string& s);
/// Row r of a tensor: out[0..n) ~ N(mean, sigma), from (tensor_seed, r) only.
void fill_row(uint64_t tensor_seed, int64_t r, float mean, float sigma, float* out, int64_t n);
/// Whether direct_row writes type t (Q8_0, Q4_0, Q4_K, Q6_K).
bool direct_type(quant::GgmlType t);

struct Rng {
    uint64_t s;
    uint64_t next() { return splitmix(s); }
    // uniform in [0, 1)
    float unit() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
};
/// n elements (a multiple of t's block size) of random blocks of type t with sd sigma into dst.
void direct_row(quant::GgmlType t, Rng& g, float sigma, uint8_t* dst, int64_t n);

}  // namespace zinc::cli
