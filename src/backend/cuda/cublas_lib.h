// zinc/backend/cuda/cublas_lib.h — cuBLAS, loaded at run time (dlopen of libcublas.so.13), so
// that zinc starts and runs on the CPU tier, or on the CUDA tier without the prefill GEMM, where
// the library is missing. Only the four entry points the prefill path uses.
#pragma once

#include <cublas_v2.h>

#include <string>

namespace zinc::cuda {

class CublasLib {
  public:
    CublasLib();
    ~CublasLib();
    CublasLib(const CublasLib&) = delete;
    CublasLib& operator=(const CublasLib&) = delete;

    bool ok() const { return handle_ != nullptr; }
    /// Why it is unavailable (one line), when !ok().
    const std::string& reason() const { return reason_; }

    /// Y (n, m) row-major f32 (ldy) (+)= X (n, k) f16 row-major times W (m, k) f16 row-major,
    /// transposed: Y[j][r] = sum_i W[r][i] X[j][i]. beta 0 or 1.
    bool gemm_f16(cudaStream_t s, int m, int n, int k, const void* w, const void* x, float* y,
                  int ldy, float beta);

  private:
    void* lib_ = nullptr;
    cublasHandle_t handle_ = nullptr;
    std::string reason_;
    using CreateFn = cublasStatus_t (*)(cublasHandle_t*);
    using DestroyFn = cublasStatus_t (*)(cublasHandle_t);
    using SetStreamFn = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
    using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                        int, int, const void*, const void*, cudaDataType, int,
                                        const void*, cudaDataType, int, const void*, void*,
                                        cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
    DestroyFn destroy_ = nullptr;
    SetStreamFn set_stream_ = nullptr;
    GemmExFn gemm_ex_ = nullptr;
};

}  // namespace zinc::cuda
