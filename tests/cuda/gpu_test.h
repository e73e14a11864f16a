// zinc/tests/cuda/gpu_test.h — helpers shared by the GPU test programs (tests/cuda/*.cpp): a
// CUDA-error check that ends the program with a FAIL line, device buffers copied from or
// poisoned for host vectors, and printf-style formatting. Also compiled by the host emulation of
// the kernels (tests/cuda/emu), whose stubs provide the runtime calls used here.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

/// Evaluate a CUDA runtime call; on error print "FAIL cuda <call>: <reason> (file:line)", exit 1.
#define CK(x)                                                                              \
    do {                                                                                   \
        cudaError_t e_ = (x);                                                              \
        if (e_ != cudaSuccess) {                                                           \
            std::printf("FAIL cuda %s: %s (%s:%d)\n", #x, cudaGetErrorString(e_), __FILE__, \
                        __LINE__);                                                         \
            std::exit(1);                                                                  \
        }                                                                                  \
    } while (0)

namespace zinc::gpu_test {

/// A device copy of v (at least 1 byte allocated). Never freed: test programs are short-lived.
template <class T>
T* dev_copy(const std::vector<T>& v) {
    T* p = nullptr;
    CK(cudaMalloc(&p, std::max<size_t>(1, v.size() * sizeof(T))));
    CK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}
/// n elements filled with 0xff bytes (NaN for floats), so an unwritten output never passes.
template <class T>
T* dev_poisoned(size_t n) {
    T* p = nullptr;
    CK(cudaMalloc(&p, std::max<size_t>(1, n * sizeof(T))));
    CK(cudaMemset(p, 0xff, n * sizeof(T)));
    return p;
}
/// Waits for the device, checks for a pending launch error, and copies n elements back.
template <class T>
std::vector<T> host_copy(const T* d, size_t n) {
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    std::vector<T> v(n);
    CK(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
}
/// snprintf into a std::string (up to 1023 characters).
template <class... A>
std::string fmt(const char* f, A... a) {
    char buf[1024];
    std::snprintf(buf, sizeof buf, f, a...);
    return buf;
}

}  // namespace zinc::gpu_test
