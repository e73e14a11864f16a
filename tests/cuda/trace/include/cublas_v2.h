// tests/cuda/trace/include/cublas_v2.h — the cuBLAS types backend/cuda/cublas_lib.h names, for
// the launch-trace harness (CublasLib itself is replaced by trace_stubs.cpp's recorder).
#pragma once
#include <cuda_runtime.h>
typedef void* cublasHandle_t;
typedef int cublasStatus_t;
typedef int cublasOperation_t;
typedef int cublasComputeType_t;
typedef int cublasGemmAlgo_t;
