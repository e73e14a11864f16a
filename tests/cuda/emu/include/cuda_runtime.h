// tests/cuda/emu/include/cuda_runtime.h — a host emulation of the small part of CUDA that zinc's
// exact kernels use, so that their device code runs on a CPU (tests/cuda/emu/run_emu.py; CI has
// no GPU). Each CUDA thread of a launch is a std::thread; a warp's shuffles exchange values
// through a per-warp buffer between two barriers, __syncthreads is a block barrier, blocks run one
// after another (so `__shared__` can be a function-local static). Float arithmetic is the host's
// IEEE arithmetic (canon.h's host branch, -ffp-contract=off), which is what the device intrinsics
// compute too; __dp4a, __vsubss4 and the conversions are written out. Device memory is host memory.
// Not a general CUDA emulator: no atomics, no cooperative groups, no async copies.
#pragma once
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(x)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct float4 { float x, y, z, w; };
struct float2 { float x, y; };
struct int4 { int x, y, z, w; };
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
struct int2 { int x, y; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
typedef void* cudaStream_t;
typedef int cudaError_t;
enum { cudaSuccess = 0 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
using std::max;
using std::min;

inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

struct EmuWarp {
    std::barrier<>* bar = nullptr;
    uint64_t slot[32] = {};
};
inline thread_local EmuWarp* emu_warp = nullptr;
inline std::barrier<>* emu_block_bar = nullptr;

template <class T>
T emu_shfl(T v, int arg, bool is_xor) {
    static_assert(sizeof(T) <= 8);
    const int lane = static_cast<int>(threadIdx.x & 31);
    uint64_t u = 0;
    std::memcpy(&u, &v, sizeof(T));
    emu_warp->slot[lane] = u;
    emu_warp->bar->arrive_and_wait();
    const uint64_t r = emu_warp->slot[is_xor ? (lane ^ arg) : arg];
    emu_warp->bar->arrive_and_wait();
    T out;
    std::memcpy(&out, &r, sizeof(T));
    return out;
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int o) { return emu_shfl(v, o, true); }
template <class T>
T __shfl_sync(unsigned, T v, int src) { return emu_shfl(v, src, false); }
inline void __syncthreads() { emu_block_bar->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu_warp->bar->arrive_and_wait(); }

inline int __dp4a(int a, int b, int c) {
    for (int i = 0; i < 4; ++i)
        c += static_cast<int8_t>(a >> (8 * i)) * static_cast<int8_t>(b >> (8 * i));
    return c;
}
/// prmt.b32 with selectors 0..7 (CUDA's __byte_perm uses the low 3 bits of each nibble): byte n
/// of the result is byte ((s >> 4n) & 7) of the 8-byte value y:x.
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    const uint64_t v = (static_cast<uint64_t>(y) << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) {
        const unsigned sel = (s >> (4 * i)) & 7u;
        r |= static_cast<unsigned>((v >> (8 * sel)) & 0xffu) << (8 * i);
    }
    return r;
}
/// Per-byte subtraction modulo 256.
inline unsigned __vsub4(unsigned a, unsigned b) {
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) r |= (((a >> (8 * i)) - (b >> (8 * i))) & 0xffu) << (8 * i);
    return r;
}
inline unsigned __vsubss4(unsigned a, unsigned b) {
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) {
        const int v = std::clamp(static_cast<int8_t>(a >> (8 * i)) - static_cast<int8_t>(b >> (8 * i)), -128, 127);
        r |= (static_cast<unsigned>(v) & 0xffu) << (8 * i);
    }
    return r;
}
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __int_as_float(int u) { float f; std::memcpy(&f, &u, 4); return f; }
inline int __float_as_int(float f) { int u; std::memcpy(&u, &f, 4); return u; }
inline int __float2int_rn(float f) { return static_cast<int>(std::nearbyint(f)); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }

// A launch: block.x std::threads, each running the kernel for every block of the grid in turn.
template <class K, class... A>
void emu_launch(dim3 grid, dim3 block, K kernel, A... args) {
    gridDim = grid;
    blockDim = block;
    const int nt = static_cast<int>(block.x);
    std::barrier<> bb(nt);
    emu_block_bar = &bb;
    std::vector<EmuWarp> warps((nt + 31) / 32);
    std::vector<std::barrier<>*> bars;
    for (size_t w = 0; w < warps.size(); ++w) {
        const int n = std::min(32, nt - static_cast<int>(32 * w));
        warps[w].bar = new std::barrier<>(n);
    }
    std::vector<std::thread> th;
    th.reserve(nt);
    for (int t = 0; t < nt; ++t) {
        th.emplace_back([&, t] {
            emu_warp = &warps[t / 32];
            for (unsigned by = 0; by < grid.y; ++by)
                for (unsigned bx = 0; bx < grid.x; ++bx) {
                    threadIdx = dim3(t, 0, 0);
                    blockIdx = dim3(bx, by, 0);
                    kernel(args...);
                    bb.arrive_and_wait();  // the next block starts when this one is done
                }
        });
    }
    for (auto& x : th) x.join();
    for (auto& w : warps) delete w.bar;
}
template <class K>
struct EmuLauncher {
    K k;
    dim3 g, b;
    template <class... A>
    void operator()(A... a) { emu_launch(g, b, k, a...); }
};
// `kernel<<<grid, block, smem, stream>>>(args)` is rewritten to emu_launcher(kernel, grid, block,
// smem, stream)(args) by run_emu.py.
template <class K>
EmuLauncher<K> emu_launcher(K k, dim3 g, dim3 b, size_t = 0, void* = nullptr) { return {k, g, b}; }

template <class T>
inline int cudaMalloc(T** p, size_t n) { *p = static_cast<T*>(std::malloc(n)); return 0; }
inline int cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) { std::memcpy(d, s, n); return 0; }
inline int cudaMemset(void* d, int v, size_t n) { std::memset(d, v, n); return 0; }
inline int cudaFree(void* p) { std::free(p); return 0; }
inline int cudaDeviceSynchronize() { return 0; }
inline int cudaGetLastError() { return 0; }
inline const char* cudaGetErrorString(int) { return "(emulated)"; }
