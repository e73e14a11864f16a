// zinc/backend/cpu/elementwise.cpp — add, scale, softcap.
#include "backend/cpu/elementwise.h"

#include "backend/canon.h"

#include <cmath>

namespace zinc::cpu {

void add(const float* a, const float* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void scale(float* x, float s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void softcap(float* x, float cap, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] = canon::softcap(x[i], cap);
}

}  // namespace zinc::cpu
