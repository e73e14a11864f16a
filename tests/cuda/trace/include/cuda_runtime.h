// tests/cuda/trace/include/cuda_runtime.h — the part of the CUDA runtime API that the CUDA
// Runner's host code (src/backend/cuda/runner*.cpp) calls, for the launch-trace harness
// (tests/cuda/trace/compare.py): device memory is host memory, streams and graphs are tokens,
// and every call that moves data is recorded in the trace (trace_stubs.cpp). No kernels run.
#pragma once
#include <cstddef>
#include <cstdint>

struct float4 {
    float x, y, z, w;
};
typedef void* cudaStream_t;
typedef int cudaError_t;
typedef void* cudaGraph_t;
typedef void* cudaGraphExec_t;
enum { cudaSuccess = 0, cudaErrorInvalidValue = 1 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
enum cudaStreamCaptureMode { cudaStreamCaptureModeThreadLocal };
enum { cudaStreamNonBlocking = 1 };
enum cudaDataType { CUDA_R_16F, CUDA_R_32F };

cudaError_t cudaMalloc(void** p, size_t n);
cudaError_t cudaFree(void* p);
cudaError_t cudaMallocHost(void** p, size_t n);
template <class T>
cudaError_t cudaMallocHost(T** p, size_t n) {
    return cudaMallocHost(reinterpret_cast<void**>(p), n);
}
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind k);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind k, cudaStream_t s);
cudaError_t cudaMemset(void* p, int v, size_t n);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaGetLastError();
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode m);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* g);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* e, cudaGraph_t g, unsigned long long flags);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e);
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s);
const char* cudaGetErrorName(cudaError_t e);
const char* cudaGetErrorString(cudaError_t e);
