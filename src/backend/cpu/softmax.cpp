// zinc/backend/cpu/softmax.cpp — softmax.
#include "backend/cpu/softmax.h"

#include <cmath>

namespace zinc::cpu {

void softmax(float* x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float e = std::exp(x[i] - mx);
        x[i] = e;
        sum += e;
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace zinc::cpu
