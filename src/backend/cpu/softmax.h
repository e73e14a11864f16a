// zinc/backend/cpu/softmax.h — numerically stable softmax (max subtracted, sum in double).
#pragma once

#include <cstdint>

namespace zinc::cpu {

/// In place over n floats. Entries equal to -INFINITY get probability 0. n >= 1 and at least one
/// finite entry.
void softmax(float* x, int64_t n);

}  // namespace zinc::cpu
