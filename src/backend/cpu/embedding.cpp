// zinc/backend/cpu/embedding.cpp — get_rows with dequantization.
#include "backend/cpu/embedding.h"

#include "quant/quant.h"
#include "util/check.h"

namespace zinc::cpu {

void get_rows(const MatView& table, const int32_t* ids, int n, float* out, float scale) {
    for (int t = 0; t < n; ++t) {
        ZINC_CHECK(ids[t] >= 0 && ids[t] < table.n_rows);
        float* y = out + static_cast<int64_t>(t) * table.n_cols;
        quant::dequantize_row(table.type, table.data + ids[t] * table.row_bytes, y, table.n_cols);
        if (scale != 1.0f) {
            for (int64_t i = 0; i < table.n_cols; ++i) y[i] *= scale;
        }
    }
}

}  // namespace zinc::cpu
