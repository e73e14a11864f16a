// zinc/backend/cuda/scratch_sizes.h — fixed sizes of the CUDA runner's scratch buffers, shared by
// the kernels' launchers (kernels.h) and the device-memory estimate (memory_estimate.cpp). No
// CUDA types: the estimate is plain C++, built and unit-tested without a device.
#pragma once

#include <cstddef>

namespace zinc::cuda {

/// The runner's split-K partial buffer, in floats (16 MiB; kernels.h MmqScratch).
constexpr size_t kMmqSplitFloats = size_t{4} << 20;

}  // namespace zinc::cuda
