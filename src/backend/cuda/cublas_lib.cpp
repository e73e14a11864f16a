// zinc/backend/cuda/cublas_lib.cpp — dlopen'ed cuBLAS (see cublas_lib.h).
#include "backend/cuda/cublas_lib.h"

#include <dlfcn.h>

#include <cstdlib>

namespace zinc::cuda {

CublasLib::CublasLib() {
    if (const char* e = std::getenv("ZINC_CUBLAS"); e && std::string(e) == "0") {
        reason_ = "ZINC_CUBLAS=0";
        return;
    }
    for (const char* name : {"libcublas.so.13", "libcublas.so"}) {
        lib_ = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (lib_) break;
    }
    if (!lib_) {
        reason_ = "libcublas.so.13 not found (install the CUDA 13 cuBLAS library or add its "
                  "folder to LD_LIBRARY_PATH)";
        return;
    }
    auto create = reinterpret_cast<CreateFn>(dlsym(lib_, "cublasCreate_v2"));
    destroy_ = reinterpret_cast<DestroyFn>(dlsym(lib_, "cublasDestroy_v2"));
    set_stream_ = reinterpret_cast<SetStreamFn>(dlsym(lib_, "cublasSetStream_v2"));
    gemm_ex_ = reinterpret_cast<GemmExFn>(dlsym(lib_, "cublasGemmEx"));
    if (!create || !destroy_ || !set_stream_ || !gemm_ex_) {
        reason_ = "libcublas lacks cublasCreate_v2/cublasGemmEx";
        return;
    }
    cublasHandle_t h = nullptr;
    if (create(&h) != CUBLAS_STATUS_SUCCESS) {
        reason_ = "cublasCreate failed";
        return;
    }
    handle_ = h;
}

CublasLib::~CublasLib() {
    if (handle_) destroy_(handle_);
    // The library stays loaded: unloading cuBLAS at exit races its own static destructors.
}

bool CublasLib::gemm_f16(cudaStream_t s, int m, int n, int k, const void* w, const void* x,
                         float* y, int ldy, float beta) {
    if (!handle_) return false;
    if (set_stream_(handle_, s) != CUBLAS_STATUS_SUCCESS) return false;
    const float alpha = 1.0f;
    return gemm_ex_(handle_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, w, CUDA_R_16F, k, x,
                    CUDA_R_16F, k, &beta, y, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F,
                    CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
}

}  // namespace zinc::cuda
