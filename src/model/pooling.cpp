// zinc/model/pooling.cpp — mean / CLS / last-token pooling and L2 normalisation.
#include "model/pooling.h"

#include <cmath>

#include "util/check.h"

namespace zinc::model {

const char* pooling_name(Pooling p) {
    switch (p) {
        case Pooling::Mean:
            return "mean";
        case Pooling::Cls:
            return "cls";
        case Pooling::Last:
            return "last";
    }
    return "?";
}

std::optional<Pooling> parse_pooling(std::string_view name) {
    for (Pooling p : {Pooling::Mean, Pooling::Cls, Pooling::Last})
        if (name == pooling_name(p)) return p;
    return std::nullopt;
}

std::optional<Pooling> pooling_from_gguf(int32_t pooling_type) {
    if (pooling_type >= 1 && pooling_type <= 3) return static_cast<Pooling>(pooling_type);
    return std::nullopt;
}

std::vector<float> pool_normalized(const float* rows, int64_t n_rows, int64_t dim, Pooling p) {
    ZINC_CHECK(n_rows >= 1 && dim >= 1);
    std::vector<double> acc(static_cast<size_t>(dim), 0.0);
    if (p == Pooling::Mean) {
        for (int64_t r = 0; r < n_rows; ++r)
            for (int64_t i = 0; i < dim; ++i) acc[i] += rows[r * dim + i];
        for (double& v : acc) v /= static_cast<double>(n_rows);
    } else {
        const float* row = rows + (p == Pooling::Cls ? 0 : (n_rows - 1) * dim);
        for (int64_t i = 0; i < dim; ++i) acc[i] = row[i];
    }
    double sq = 0.0;
    for (double v : acc) sq += v * v;
    const double inv = sq > 0.0 ? 1.0 / std::sqrt(sq) : 0.0;
    std::vector<float> out(static_cast<size_t>(dim));
    for (int64_t i = 0; i < dim; ++i) out[i] = static_cast<float>(acc[i] * inv);
    return out;
}

}  // namespace zinc::model
