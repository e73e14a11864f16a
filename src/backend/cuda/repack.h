// zinc/backend/cuda/repack.h — weight row layouts for the device, made at upload (host side).
//
// GGUF blocks of Q4_0 (18 bytes), Q8_0 (34) and Q6_K (210) are only 2-byte aligned, so a kernel
// reading them in place needs many 2-byte loads. Repacked, each row holds the same bytes as
// arrays of like fields (all quants, then all scales), so every chunk's quants load 16 bytes at
// a time:
//   Q4_0 -> [qs: nb x 16][d: nb x 2]            (device type id 102, nb = k / 32)
//   Q8_0 -> [qs: nb x 32][d: nb x 2]            (108)
//   Q6_K -> [ql: nb x 128][qh: nb x 64][scales: nb x 16][d: nb x 2]   (114, nb = k / 256)
// Only when a row's size is a multiple of 16 bytes (nb % 8 == 0). On by default in fast mode
// (ZINC_REPACK=0 keeps the GGUF layout; exact mode never repacks): dmmv_fast.cu loads each
// 16-byte piece with one aligned load instead of two (docs/perf-notes.md "dmmv").
// The decoders are decode_chunk<kQ4_0R/kQ8_0R/kQ6_KR> in common.cuh.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zinc::cuda {

/// The device type id for a (type, row length k) weight: a repacked id, or `type` itself.
int repacked_type(int type, int64_t k, bool enabled = true);

/// Repack n_rows rows of `type` (GGUF layout, row length k) into dst (same size) for
/// repacked_type(type, k). dst must not alias src.
void repack_rows(int type, const uint8_t* src, uint8_t* dst, int64_t n_rows, int64_t k);

}  // namespace zinc::cuda
