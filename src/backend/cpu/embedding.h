// zinc/backend/cpu/embedding.h — token embedding lookup (ggml's get_rows): each id selects a row
// of the (n_vocab, n_embd) table, dequantized to f32.
#pragma once

#include <cstdint>

#include "backend/cpu/matmul.h"

namespace zinc::cpu {

/// out[t * table.n_cols + i] = dequant(table row ids[t])[i] * scale. ids must be in
/// [0, table.n_rows) (ZINC_CHECK: the caller validates user ids first).
void get_rows(const MatView& table, const int32_t* ids, int n, float* out, float scale = 1.0f);

}  // namespace zinc::cpu
