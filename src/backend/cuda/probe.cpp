// zinc/backend/cuda/probe.cpp — find CUDA devices and say in one line why none is usable.
#include <cuda_runtime.h>

#include <string>

#include "backend/cuda/cuda_tier.h"

namespace zinc::cuda {

namespace {
// Kernels are built for sm_90 only (CMAKE_CUDA_ARCHITECTURES=90): sm_90 machine code runs on
// compute capability 9.x.
constexpr int kCcMajor = 9;
}  // namespace

std::string version_string(int v) {
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string build_info() {
    return "CUDA tier built with the CUDA " + version_string(CUDART_VERSION) +
           " runtime, kernels for compute capability " + std::to_string(kCcMajor) + ".x";
}

Probe probe() {
    Probe p;
    p.built = true;
    cudaRuntimeGetVersion(&p.runtime_version);
    if (cudaDriverGetVersion(&p.driver_version) != cudaSuccess || p.driver_version == 0) {
        p.reason = "no NVIDIA driver (libcuda.so.1 not found or not loadable)";
        return p;
    }
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        p.reason = std::string("no usable CUDA device (") + cudaGetErrorName(e) + ": " +
                   cudaGetErrorString(e) + ")";
        cudaGetLastError();
        return p;
    }
    if (n == 0) {
        p.reason = "no CUDA device found";
        return p;
    }
    if (p.driver_version < p.runtime_version) {
        p.reason = "the NVIDIA driver supports CUDA " + version_string(p.driver_version) +
                   " but zinc was built with CUDA " + version_string(p.runtime_version) +
                   "; update the driver";
        return p;
    }
    std::string skipped;
    for (int i = 0; i < n; ++i) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
        DeviceInfo d;
        d.index = i;
        d.name = prop.name;
        d.cc_major = prop.major;
        d.cc_minor = prop.minor;
        d.mem_total = prop.totalGlobalMem;
        d.n_sm = prop.multiProcessorCount;
        if (prop.major != kCcMajor) {
            skipped += (skipped.empty() ? "" : "; ") + std::string("device ") + std::to_string(i) +
                       " (" + d.name + ") has compute capability " + std::to_string(prop.major) +
                       "." + std::to_string(prop.minor) + ", zinc's kernels are built for " +
                       std::to_string(kCcMajor) + ".0";
            continue;
        }
        if (cudaSetDevice(i) == cudaSuccess) {
            size_t free_b = 0, total_b = 0;
            if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) d.mem_free = free_b;
        }
        p.devices.push_back(d);
    }
    if (p.devices.empty()) p.reason = skipped.empty() ? "no usable CUDA device" : skipped;
    return p;
}

}  // namespace zinc::cuda
