// zinc/tests/unit/cuda_emul/shim/cuda_runtime.h — a SIMT shim that lets the host compiler build
// CUDA kernel sources (src/backend/cuda/*.cu) and run them on the CPU, for bit-exactness tests
// without a GPU. It stands in for <cuda_runtime.h>, <cuda_fp16.h> and <cuda_bf16.h> (this folder
// is first on the include path of test_cuda_emul only).
//
// Model: a launch runs its blocks one after another; a block's threads are host threads that
// share the kernel's `__shared__` (here: function-local static) arrays. __syncthreads is a
// barrier of the block; a warp shuffle is a barrier-separated exchange through a per-block slot
// array, so every thread of the block must reach each shuffle (true for kernels whose shuffles are
// in uniform control flow; a kernel with divergent shuffles would deadlock here, not pass).
// The integer intrinsics (__dp4a, __vsubss4) and bit casts have their PTX-documented semantics;
// float arithmetic goes through zinc::canon, whose host path is plain IEEE (the build uses
// -ffp-contract=off), so the float operation sequence is the kernel's own.
#pragma once

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#define ZINC_SIMT_EMULATION 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

struct float4 {
    float x, y, z, w;
};
struct float2 {
    float x, y;
};
struct uint2 {
    unsigned x, y;
};
struct uint4 {
    unsigned x, y, z, w;
};
struct dim3 {
    unsigned x = 1, y = 1, z = 1;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
inline float4 make_float4(float x, float y, float z, float w) {
    return float4{x, y, z, w};
}
typedef struct CUstream_st* cudaStream_t;
enum cudaError_t { cudaSuccess = 0 };

inline thread_local dim3 threadIdx, blockIdx, gridDim, blockDim;

namespace zinc_simt {

constexpr int kMaxThreads = 1024, kWide = 8;
struct Block {
    std::barrier<>* bar = nullptr;
    uint32_t slot[2][kMaxThreads] = {};  // alternate exchanges use alternate slot arrays
    uint32_t wide[2][kMaxThreads][kWide] = {};  // the same for gather()
};
inline thread_local Block* cur = nullptr;
inline thread_local unsigned n_exchange = 0;

// One barrier per exchange: a thread writes exchange e's slot array only after the barrier of
// exchange e - 1, which every thread passes only after its reads of exchange e - 2 (same array).
inline uint32_t exchange(uint32_t v, int src_lane) {
    Block* b = cur;
    const int t = static_cast<int>(threadIdx.x);
    uint32_t* slot = b->slot[n_exchange++ & 1];
    slot[t] = v;
    b->bar->arrive_and_wait();
    return slot[(t & ~31) + (src_lane & 31)];
}

/// Every lane's N words v, for the warp of the calling thread, in one barrier (the same slot
/// alternation as exchange(), so exchanges and gathers may interleave).
template <int N>
inline void gather(const uint32_t (&v)[N], uint32_t (&all)[32][N]) {
    static_assert(N <= kWide);
    Block* b = cur;
    const int t = static_cast<int>(threadIdx.x);
    uint32_t(*slot)[kWide] = b->wide[n_exchange++ & 1];
    for (int i = 0; i < N; ++i) slot[t][i] = v[i];
    b->bar->arrive_and_wait();
    for (int l = 0; l < 32; ++l)
        for (int i = 0; i < N; ++i) all[l][i] = slot[(t & ~31) + l][i];
}

/// ldmatrix.sync.aligned.m8n8.x4.shared.b16: lane l gives the row address of row l % 8 of
/// matrix l / 8; register j of lane l receives bytes 4 (l % 4) .. + 3 of row l / 4 of matrix j.
inline void ldmatrix_x4(int (&r)[4], const void* row_addr) {
    const uint64_t a = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(row_addr));
    const uint32_t mine[2] = {static_cast<uint32_t>(a), static_cast<uint32_t>(a >> 32)};
    uint32_t all[32][2];
    gather(mine, all);
    const int l = static_cast<int>(threadIdx.x) & 31;
    for (int j = 0; j < 4; ++j) {
        const int src = 8 * j + l / 4;
        const uintptr_t row = static_cast<uintptr_t>((static_cast<uint64_t>(all[src][1]) << 32) | all[src][0]);
        std::memcpy(&r[j], reinterpret_cast<const uint8_t*>(row) + 4 * (l % 4), 4);
    }
}

/// mma.sync.aligned.m16n8k{K}.row.col.s32.s8.s8.s32 (K = 32 or 16; for 16 only a[0], a[1], b[0]
/// are read), every accumulator input c: the PTX fragment layouts (g = lane / 4, t = lane % 4):
/// A a0 = (row g, k 4t..), a1 = (g + 8, 4t..), a2 = (g, 16 + 4t..), a3 = (g + 8, 16 + 4t..);
/// B b0 = (k 4t.., col g), b1 = (k 16 + 4t.., col g); D d0 = (g, 2t), d1 = (g, 2t + 1),
/// d2 = (g + 8, 2t), d3 = (g + 8, 2t + 1). int32 sums wrap as the hardware's.
template <int K>
inline void mma_s8(int (&d)[4], const int (&a)[4], const int (&b)[2], int c) {
    const uint32_t mine[6] = {static_cast<uint32_t>(a[0]), static_cast<uint32_t>(a[1]),
                              static_cast<uint32_t>(a[2]), static_cast<uint32_t>(a[3]),
                              static_cast<uint32_t>(b[0]), static_cast<uint32_t>(b[1])};
    uint32_t all[32][6];
    gather(mine, all);
    auto byte = [](uint32_t w, int i) { return static_cast<int>(static_cast<int8_t>((w >> (8 * i)) & 0xffu)); };
    auto a_at = [&](int row, int k) {
        return byte(all[(row % 8) * 4 + (k % 16) / 4][(row >= 8 ? 1 : 0) + (k >= 16 ? 2 : 0)], k % 4);
    };
    auto b_at = [&](int k, int n) { return byte(all[n * 4 + (k % 16) / 4][4 + (k >= 16 ? 1 : 0)], k % 4); };
    const int l = static_cast<int>(threadIdx.x) & 31, g = l / 4, t = l % 4;
    for (int i = 0; i < 4; ++i) {
        const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
        uint32_t s = static_cast<uint32_t>(c);
        for (int k = 0; k < K; ++k) s += static_cast<uint32_t>(a_at(row, k) * b_at(k, col));
        d[i] = static_cast<int>(s);
    }
}

/// ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16: lane l gives the row address of row l % 8 of
/// matrix l / 8; register j of lane l receives elements (rows 2 (l % 4), 2 (l % 4) + 1; column
/// l / 4) of matrix j, the lower row in the low half.
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row_addr) {
    const uint64_t a = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(row_addr));
    const uint32_t mine[2] = {static_cast<uint32_t>(a), static_cast<uint32_t>(a >> 32)};
    uint32_t all[32][2];
    gather(mine, all);
    const int l = static_cast<int>(threadIdx.x) & 31;
    auto at = [&](int m, int row, int col) {
        const int src = 8 * m + row;
        const uintptr_t p = static_cast<uintptr_t>((static_cast<uint64_t>(all[src][1]) << 32) | all[src][0]);
        uint16_t v;
        std::memcpy(&v, reinterpret_cast<const uint8_t*>(p) + 2 * col, 2);
        return static_cast<uint32_t>(v);
    };
    for (int j = 0; j < 4; ++j)
        r[j] = at(j, 2 * (l % 4), l / 4) | (at(j, 2 * (l % 4) + 1, l / 4) << 16);
}

/// binary32 -> binary16 bits, round to nearest even (as __float2half_rn).
inline uint16_t f32_to_f16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return sign | 0x7E00u;  // NaN
    if (ax >= 0x477FF000u) return sign | 0x7C00u;  // rounds to >= 65520: inf
    if (ax < 0x38800000u) {                        // below 2^-14: subnormal or zero
        if (ax < 0x33000000u) return sign;         // < 2^-25: rounds to 0 (2^-25 ties to 0)
        const uint32_t mant = (ax & 0x7FFFFFu) | 0x800000u;
        // value = mant * 2^(E - 150) (E the biased exponent); in units of 2^-24 (the f16
        // subnormal step) that is mant * 2^(E - 126), E in [102, 112]
        const int shift = 126 - static_cast<int>(ax >> 23);
        const uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        uint32_t r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
        return static_cast<uint16_t>(sign | r);
    }
    const uint32_t e = (ax >> 23) - 112;  // rebias 127 -> 15
    const uint32_t mant = ax & 0x7FFFFFu;
    uint32_t h = (e << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent
    return static_cast<uint16_t>(sign | h);
}
inline float f16_to_f32(uint16_t h);

/// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32, d += a b, the PTX fragment layouts
/// (g = lane / 4, t = lane % 4; two f16 per register, lower column / k in the low half):
/// A a0 = (g, 2t..), a1 = (g + 8, 2t..), a2 = (g, 8 + 2t..), a3 = (g + 8, 8 + 2t..);
/// B b0 = (k 2t.., n g), b1 = (k 8 + 2t.., n g); D d0 = (g, 2t), d1 = (g, 2t + 1),
/// d2 = (g + 8, 2t), d3 = (g + 8, 2t + 1). Products summed in double, added to d in float.
inline void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    const uint32_t mine[6] = {a[0], a[1], a[2], a[3], b0, b1};
    uint32_t all[32][6];
    gather(mine, all);
    auto h = [](uint32_t w, int k) { return f16_to_f32(static_cast<uint16_t>(k % 2 ? w >> 16 : w & 0xffffu)); };
    auto a_at = [&](int row, int k) {
        return h(all[(row % 8) * 4 + (k % 8) / 2][(row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k);
    };
    auto b_at = [&](int k, int n) { return h(all[n * 4 + (k % 8) / 2][4 + (k >= 8 ? 1 : 0)], k); };
    const int l = static_cast<int>(threadIdx.x) & 31, g = l / 4, t = l % 4;
    for (int i = 0; i < 4; ++i) {
        const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
        double s = 0.0;
        for (int k = 0; k < 16; ++k) s += static_cast<double>(a_at(row, k)) * b_at(k, col);
        d[i] = static_cast<float>(d[i] + s);
    }
}

/// Runs kernel k over grid (x, y, z) with `threads` threads per block, one block at a time: z from
/// the last to the first (so that a kernel whose blocks cooperate through a counter, as mmq's
/// split-K does, sees its blocks arrive out of index order), then y and x in order.
template <class... P, class... A>
void launch(void (*k)(P...), dim3 grid, int threads, const A&... args) {
    for (unsigned bz = grid.z; bz-- > 0;)
    for (unsigned by = 0; by < grid.y; ++by) {
        for (unsigned bx = 0; bx < grid.x; ++bx) {
            std::barrier<> bar(threads);
            Block blk;
            blk.bar = &bar;
            std::vector<std::thread> ts;
            ts.reserve(threads);
            for (int t = 0; t < threads; ++t) {
                ts.emplace_back([&, t] {
                    threadIdx = dim3(static_cast<unsigned>(t));
                    blockIdx = dim3(bx, by, bz);
                    gridDim = grid;
                    blockDim = dim3(static_cast<unsigned>(threads));
                    cur = &blk;
                    n_exchange = 0;
                    k(args...);
                });
            }
            for (auto& th : ts) th.join();
        }
    }
}

}  // namespace zinc_simt

inline void __syncthreads() {
    zinc_simt::cur->bar->arrive_and_wait();
}
/// Correctly rounded f32 add / multiply: the host's IEEE operations (-ffp-contract=off).
inline float __fadd_rn(float a, float b) {
    return a + b;
}
inline float __fmul_rn(float a, float b) {
    return a * b;
}
/// A warp barrier: the block's barrier here (so every thread of the block must reach it).
inline void __syncwarp(unsigned = 0xffffffffu) {
    __syncthreads();
}
/// Blocks run one at a time here, so a fence orders nothing more than program order does.
inline void __threadfence() {}
/// atomicAdd (a block's threads run concurrently here): returns the old value.
inline unsigned atomicAdd(unsigned* p, unsigned v) {
    return std::atomic_ref<unsigned>(*p).fetch_add(v);
}
/// ld.global.cg (cached in L2 only): a plain load here.
inline float __ldcg(const float* p) {
    return *p;
}

inline int __float_as_int(float f) {
    int v;
    std::memcpy(&v, &f, 4);
    return v;
}
inline float __int_as_float(int v) {
    float f;
    std::memcpy(&f, &v, 4);
    return f;
}
inline float __uint_as_float(unsigned v) {
    float f;
    std::memcpy(&f, &v, 4);
    return f;
}
inline unsigned __float_as_uint(float f) {
    unsigned v;
    std::memcpy(&v, &f, 4);
    return v;
}

inline float __shfl_xor_sync(unsigned, float v, int o) {
    return __uint_as_float(zinc_simt::exchange(__float_as_uint(v), (static_cast<int>(threadIdx.x) & 31) ^ o));
}
inline int __shfl_xor_sync(unsigned, int v, int o) {
    return static_cast<int>(zinc_simt::exchange(static_cast<uint32_t>(v), (static_cast<int>(threadIdx.x) & 31) ^ o));
}
inline float __shfl_sync(unsigned, float v, int src) {
    return __uint_as_float(zinc_simt::exchange(__float_as_uint(v), src));
}
inline int __shfl_sync(unsigned, int v, int src) {
    return static_cast<int>(zinc_simt::exchange(static_cast<uint32_t>(v), src));
}
/// Doubles travel as two 32-bit exchanges (low word, then high word), as the hardware splits them.
inline double __shfl_sync(unsigned, double v, int src) {
    uint64_t b;
    std::memcpy(&b, &v, 8);
    const uint64_t lo = zinc_simt::exchange(static_cast<uint32_t>(b), src);
    const uint64_t hi = zinc_simt::exchange(static_cast<uint32_t>(b >> 32), src);
    const uint64_t r = (hi << 32) | lo;
    double out;
    std::memcpy(&out, &r, 8);
    return out;
}
inline double __shfl_xor_sync(unsigned m, double v, int o) {
    return __shfl_sync(m, v, (static_cast<int>(threadIdx.x) & 31) ^ o);
}
inline double __shfl_up_sync(unsigned m, double v, int o) {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    return __shfl_sync(m, v, lane >= o ? lane - o : lane);  // CUDA: lanes below o keep theirs
}

/// dp4a.s32.s32: c + sum of the 4 signed byte products.
inline int __dp4a(int a, int b, int c) {
    int s = c;
    for (int i = 0; i < 4; ++i)
        s += static_cast<int8_t>((static_cast<uint32_t>(a) >> (8 * i)) & 0xff) *
             static_cast<int8_t>((static_cast<uint32_t>(b) >> (8 * i)) & 0xff);
    return s;
}
/// Per-byte signed saturating a - b.
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
        int d = static_cast<int8_t>((a >> (8 * i)) & 0xff) - static_cast<int8_t>((b >> (8 * i)) & 0xff);
        d = d < -128 ? -128 : (d > 127 ? 127 : d);
        r |= (static_cast<unsigned>(d) & 0xffu) << (8 * i);
    }
    return r;
}

inline int min(int a, int b) {
    return a < b ? a : b;
}
inline int max(int a, int b) {
    return a > b ? a : b;
}

struct __half {
    uint16_t x;
};
inline __half __ushort_as_half(uint16_t h) {
    return __half{h};
}
/// binary16 -> binary32, exact (as __half2float).
inline float __half2float(__half hv) {
    return zinc_simt::f16_to_f32(hv.x);
}
inline float zinc_simt::f16_to_f32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;
    if (exp == 0x1Fu) return __uint_as_float(sign | 0x7F800000u | (mant << 13));
    if (exp != 0) return __uint_as_float(sign | ((exp + 112u) << 23) | (mant << 13));
    if (mant == 0) return __uint_as_float(sign);
    uint32_t e = 113;
    while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --e;
    }
    return __uint_as_float(sign | (e << 23) | ((mant & 0x3FFu) << 13));
}
