// zinc/backend/cuda/dmmv_fast.cu — the bandwidth-oriented matrix x few-vectors kernels (v3) of
// the fast path (ZINC_EXACT=0), for 1..16 activation rows; dmmv() (dmmv.cu) calls them first.
//
// Work unit: 32 consecutive-in-memory weight codes of one row (one 16-byte load of 4-bit codes,
// two of 8-bit codes), seen as two groups of 16 elements with their own scale and offset. A warp
// owns 32 / LPR rows; the LPR lanes of a row take consecutive units (lane i: units i, i + LPR,
// ...), so a warp's loads of one step are contiguous 16-byte pieces (coalesced), and each lane
// issues U units' weight loads before the first use. A row's partial sums meet in a shuffle
// butterfly over its LPR lanes: no shared memory, no block barrier. Each decoded unit is used for
// all NB activation rows (the weights are read once for a batch).
//
// 16-byte weight loads for Q4_K and Q5_K in the GGUF layout (144- and 176-byte blocks are 16-byte
// multiples), for Q6_K, Q4_0 and Q8_0 in the GGUF layout (2-byte aligned blocks: two aligned
// 16-byte loads per piece, shifted into place, ld_un16) and in the repacked layouts of repack.h
// (102, 108, 114: one aligned load per piece). Q4_1, Q5_0, Q5_1, Q2_K, Q3_K and MXFP4 take the same
// thread mapping over decode_chunk (common.cuh), whose loads are narrower. Not bit-identical to the
// CPU tier (float sums in another order); tests/cuda/bench_dmmv.cpp and test_parity check the
// relative error against quant::vec_dot.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

using namespace dev;

constexpr int kWarps = 4;  // warps per block

struct Jobs {
    MatJob m[3];
    int n_jobs;
    int row_end[3];  // cumulative row counts
};

// A decoded unit: codes of two 16-element groups (4 int32 of 4 int8 each), each group's weight
// w_i = d * q_i + m, and the groups' first element within the row (multiples of 16).
struct Unit {
    int q0[4], q1[4];
    float d0, d1, m0, m1;
    int e0, e1;
};

// Weight loads: streamed (no L1 allocation: each byte is read once; lanes reading the same
// block head are served by one request of their warp instruction).
__device__ __forceinline__ uint4 ldw128(const uint8_t* p) {
#if defined(ZINC_SIMT_EMULATION)
    return *reinterpret_cast<const uint4*>(p);
#else
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
#endif
}
__device__ __forceinline__ uint32_t ldw16(const uint8_t* p) {  // 2-byte aligned
#if defined(ZINC_SIMT_EMULATION)
    return *reinterpret_cast<const uint16_t*>(p);
#else
    unsigned short v;
    asm("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
#endif
}

// Programmatic dependent launch: wait until the previous kernel in the stream has finished and
// its writes are visible (returns at once when this grid was launched without the attribute).
__device__ __forceinline__ void grid_dependency_wait() {
#if !defined(ZINC_SIMT_EMULATION)
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ uint32_t byte_at(uint32_t w, int i) {
    return (w >> (8 * i)) & 0xffu;
}

// Per type: Raw (the loaded bytes of one unit), load() (issue the loads; nbk = blocks per row)
// and decode() (registers only). Unit u of a row covers elements of block u >> 3 (256-element
// types) or u (32-element types).
template <int T>
struct Fast {  // any type: decode_chunk<T> at decode time (its own loads)
    struct Raw {
        const uint8_t* row;
    };
    static __device__ __forceinline__ void load(const uint8_t* row, int, int, Raw& r) {
        r.row = row;
    }
    static __device__ __forceinline__ void decode(const Raw& r, int u, int nbk, Unit& o) {
        Chunk c;
        decode_chunk<T>(r.row, u, c, nbk);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            o.q0[i] = c.q[i];
            o.q1[i] = c.q[4 + i];
        }
        o.d0 = c.d_lo, o.d1 = c.d_hi, o.m0 = c.m_lo, o.m1 = c.m_hi;
        o.e0 = 32 * u, o.e1 = 32 * u + 16;
    }
};

// Q4_K / Q5_K 6-bit scale and min of sub-blocks s = 2j and 2j + 1 (ggml get_scale_min_k4) from
// the 12 scale bytes held in words y, z, w of the block head.
__device__ __forceinline__ void k4_scales(const uint4& h, int j, float& d0, float& d1, float& m0,
                                          float& m1) {
    const float d = h2f(static_cast<uint16_t>(h.x & 0xffffu));
    const float dmin = h2f(static_cast<uint16_t>(h.x >> 16));
    const int i0 = (2 * j) & 3;
    int sc[2], mn[2];
#pragma unroll
    for (int t = 0; t < 2; ++t) {
        const int i = i0 + t;
        const uint32_t a = byte_at(h.y, i), b = byte_at(h.z, i), c = byte_at(h.w, i);
        sc[t] = static_cast<int>(j < 2 ? (a & 63u) : ((c & 0xFu) | ((a >> 6) << 4)));
        mn[t] = static_cast<int>(j < 2 ? (b & 63u) : ((c >> 4) | ((b >> 6) << 4)));
    }
    d0 = d * static_cast<float>(sc[0]);
    d1 = d * static_cast<float>(sc[1]);
    m0 = -dmin * static_cast<float>(mn[0]);
    m1 = -dmin * static_cast<float>(mn[1]);
}

// Q4_K (GGUF, 144-byte blocks: head d, dmin, scales[12]; qs[128]). Unit t of a block (t = 2j + h)
// is qs[16 t, 16 t + 16): low nibbles = sub-block 2j elements [16h, 16h + 16), high nibbles =
// sub-block 2j + 1, same positions.
template <>
struct Fast<kQ4_K> {
    struct Raw {
        uint4 qs, head;
    };
    static __device__ __forceinline__ void load(const uint8_t* row, int, int u, Raw& r) {
        const uint8_t* b = row + (u >> 3) * 144;
        r.head = ldw128(b);
        r.qs = ldw128(b + 16 + 16 * (u & 7));
    }
    static __device__ __forceinline__ void decode(const Raw& r, int u, int, Unit& o) {
        const int t = u & 7, j = t >> 1, h = t & 1;
        k4_scales(r.head, j, o.d0, o.d1, o.m0, o.m1);
        const uint32_t v[4] = {r.qs.x, r.qs.y, r.qs.z, r.qs.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            o.q0[i] = static_cast<int>(v[i] & 0x0f0f0f0fu);
            o.q1[i] = static_cast<int>((v[i] >> 4) & 0x0f0f0f0fu);
        }
        o.e0 = 256 * (u >> 3) + 64 * j + 16 * h;
        o.e1 = o.e0 + 32;
    }
};

// Q5_K (GGUF, 176-byte blocks: head; qh[32]; qs[128]): as Q4_K, with the fifth bit of element
// l of sub-block s in bit s of qh[l].
template <>
struct Fast<kQ5_K> {
    struct Raw {
        uint4 qs, qh, head;
    };
    static __device__ __forceinline__ void load(const uint8_t* row, int, int u, Raw& r) {
        const uint8_t* b = row + (u >> 3) * 176;
        const int t = u & 7;
        r.head = ldw128(b);
        r.qh = ldw128(b + 16 + 16 * (t & 1));
        r.qs = ldw128(b + 48 + 16 * t);
    }
    static __device__ __forceinline__ void decode(const Raw& r, int u, int, Unit& o) {
        const int t = u & 7, j = t >> 1, h = t & 1;
        k4_scales(r.head, j, o.d0, o.d1, o.m0, o.m1);
        const uint32_t v[4] = {r.qs.x, r.qs.y, r.qs.z, r.qs.w};
        const uint32_t hb[4] = {r.qh.x, r.qh.y, r.qh.z, r.qh.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            o.q0[i] =
                static_cast<int>((v[i] & 0x0f0f0f0fu) | (((hb[i] >> (2 * j)) & 0x01010101u) << 4));
            o.q1[i] = static_cast<int>(((v[i] >> 4) & 0x0f0f0f0fu) |
                                       (((hb[i] >> (2 * j + 1)) & 0x01010101u) << 4));
        }
        o.e0 = 256 * (u >> 3) + 64 * j + 16 * h;
        o.e1 = o.e0 + 32;
    }
};

// Q6_K repacked (repack.h: [ql nb x 128][qh nb x 64][scales nb x 16][d nb x 2]). Unit t of a
// block (t = 4n + 2lq + hh) is ql[16 t, 16 t + 16) of the block: low nibbles = elements
// 128n + 32lq + 16hh + [0, 16) (scale 8n + hh + 2lq, high bits qh[32n + 16hh + i] >> 2lq), high
// nibbles the same + 64 (scale + 4, high bits >> 2lq + 4). Codes stay unsigned (0..63); the
// -32 offset is the group's m = -32 d.
template <>
struct Fast<kQ6_KR> {
    struct Raw {
        uint4 ql, qh, sc;
        uint32_t d;
    };
    static __device__ __forceinline__ void load(const uint8_t* row, int nbk, int u, Raw& r) {
        const int b = u >> 3, t = u & 7;
        r.ql = ldw128(row + 128 * b + 16 * t);
        r.qh = ldw128(row + 128 * nbk + 64 * b + 32 * (t >> 2) + 16 * (t & 1));
        r.sc = ldw128(row + 192 * nbk + 16 * b);
        r.d = ldw16(row + 208 * nbk + 2 * b);
    }
    static __device__ __forceinline__ void decode(const Raw& r, int u, int, Unit& o) {
        const int t = u & 7, n = t >> 2, lq = (t >> 1) & 1, hh = t & 1;
        const float d = h2f(static_cast<uint16_t>(r.d));
        // scale bytes 8n + hh + 2lq and that + 4: word 2n (+1), byte hh + 2lq
        const uint32_t w0 = n ? r.sc.z : r.sc.x, w1 = n ? r.sc.w : r.sc.y;
        const int bi = hh + 2 * lq;
        const float s0 = static_cast<float>(static_cast<int8_t>(byte_at(w0, bi)));
        const float s1 = static_cast<float>(static_cast<int8_t>(byte_at(w1, bi)));
        o.d0 = d * s0;
        o.d1 = d * s1;
        o.m0 = -32.f * o.d0;
        o.m1 = -32.f * o.d1;
        const uint32_t l[4] = {r.ql.x, r.ql.y, r.ql.z, r.ql.w};
        const uint32_t hb[4] = {r.qh.x, r.qh.y, r.qh.z, r.qh.w};
        const int sh = 2 * lq;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            o.q0[i] = static_cast<int>((l[i] & 0x0f0f0f0fu) | (((hb[i] >> sh) & 0x03030303u) << 4));
            o.q1[i] = static_cast<int>(((l[i] >> 4) & 0x0f0f0f0fu) |
                                       (((hb[i] >> (sh + 4)) & 0x03030303u) << 4));
        }
        o.e0 = 256 * (u >> 3) + 128 * n + 32 * lq + 16 * hh;
        o.e1 = o.e0 + 64;
    }
};

// 16 bytes at a 2-byte-aligned address of a GGUF layout (Q6_K's 210-byte, Q4_0's 18-byte and
// Q8_0's 34-byte blocks): the two aligned 16-byte chunks covering them (the second is the first
// again when the address is aligned), shifted into place at decode time. The second chunk may
// extend up to 14 bytes past the last byte used; an aligned 16-byte chunk never crosses a page,
// so this reads no unmapped memory (compute-sanitizer's memcheck would flag those bytes).
struct Un16 {
    uint4 lo, hi;
    uint32_t o;  // address % 16
};
__device__ __forceinline__ void ld_un16(const uint8_t* p, Un16& r) {
    r.o = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(p) & 15u);
    const uint8_t* base = p - r.o;
    r.lo = ldw128(base);
    r.hi = ldw128(base + (r.o ? 16 : 0));
}
__device__ __forceinline__ uint32_t funnel(uint32_t a, uint32_t b, uint32_t sh) {  // sh < 32
    return static_cast<uint32_t>(((static_cast<uint64_t>(b) << 32) | a) >> sh);
}
__device__ __forceinline__ void un16_words(const Un16& r, uint32_t (&v)[4]) {
    uint32_t w[8] = {r.lo.x, r.lo.y, r.lo.z, r.lo.w, r.hi.x, r.hi.y, r.hi.z, r.hi.w};
    const bool s2 = (r.o & 8u) != 0, s1 = (r.o & 4u) != 0;
#pragma unroll
    for (int j = 0; j < 6; ++j) w[j] = s2 ? w[j + 2] : w[j];
#pragma unroll
    for (int j = 0; j < 5; ++j) w[j] = s1 ? w[j + 1] : w[j];
    const uint32_t sh = (r.o & 3u) * 8u;
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = funnel(w[i], w[i + 1], sh);
}

// Q6_K, GGUF layout (210-byte blocks: ql[128], qh[64], scales[16], d): as the repacked layout's
// units, the 16-byte pieces loaded through ld_un16 and the two scale bytes directly.
template <>
struct Fast<kQ6_K> {
    struct Raw {
        Un16 ql, qh;
        uint32_t s0, s1, d;
    };
    static __device__ __forceinline__ void load(const uint8_t* row, int, int u, Raw& r) {
        const uint8_t* b = row + (u >> 3) * 210;
        const int t = u & 7, n = t >> 2, lq = (t >> 1) & 1, hh = t & 1;
        ld_un16(b + 16 * t, r.ql);
        ld_un16(b + 128 + 32 * n + 16 * hh, r.qh);
        r.s0 = b[192 + 8 * n + hh + 2 * lq];
        r.s1 = b[192 + 8 * n + hh + 2 * lq + 4];
        r.d = ldw16(b + 208);
    }
    static __device__ __forceinline__ void decode(const Raw& r, int u, int, Unit& o) {
        const int t = u & 7, n = t >> 2, lq = (t >> 1) & 1, hh = t & 1;
        const float d = h2f(static_cast<uint16_t>(r.d));
        o.d0 = d * static_cast<float>(static_cast<int8_t>(r.s0));
        o.d1 = d * static_cast<float>(static_cast<int8_t>(r.s1));
        o.m0 = -32.f * o.d0;
        o.m1 = -32.f * o.d1;
        uint32_t l[4], hb[4];
        un16_words(r.ql, l);
        un16_words(r.qh, hb);
        const int sh = 2 * lq;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            o.q0[i] = static_cast<int>((l[i] & 0x0f0f0f0fu) | (((hb[i] >> sh) & 0x03030303u) << 4));
            o.q1[i] = static_cast<int>(((l[i] >> 4) & 0x0f0f0f0fu) |
                                       (((hb[i] >> (sh + 4)) & 0x03030303u) << 4));
        }
        o.e0 = 256 * (u >> 3) + 128 * n + 32 * lq + 16 * hh;
        o.e1 = o.e0 + 64;
    }
};

// Q4_0, GGUF layout (18-byte blocks: d, qs[16]): unit = block u.
template <>
struct Fast<kQ4_0> {
    struct Raw {
        Un16 qs;
        uint32_t d;
    };
    static __device__ __forceinline__ void load(const uint8_t* row, int, int u, Raw& r) {
        const uint8_t* b = row + 18 * u;
        ld_un16(b + 2, r.qs);
        r.d = ldw16(b);
    }
    static __device__ __forceinline__ void decode(const Raw& r, int u, int, Unit& o) {
        uint32_t v[4];
        un16_words(r.qs, v);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            o.q0[i] = static_cast<int>(v[i] & 0x0f0f0f0fu);
            o.q1[i] = static_cast<int>((v[i] >> 4) & 0x0f0f0f0fu);
        }
        o.d0 = o.d1 = h2f(static_cast<uint16_t>(r.d));
        o.m0 = o.m1 = -8.f * o.d0;
        o.e0 = 32 * u;
        o.e1 = 32 * u + 16;
    }
};

// Q8_0, GGUF layout (34-byte blocks: d, qs[32]): unit = block u.
template <>
struct Fast<kQ8_0> {
    struct Raw {
        Un16 a, b;
        uint32_t d;
    };
    static __device__ __forceinline__ void load(const uint8_t* row, int, int u, Raw& r) {
        const uint8_t* b = row + 34 * u;
        ld_un16(b + 2, r.a);
        ld_un16(b + 18, r.b);
        r.d = ldw16(b);
    }
    static __device__ __forceinline__ void decode(const Raw& r, int u, int, Unit& o) {
        uint32_t v0[4], v1[4];
        un16_words(r.a, v0);
        un16_words(r.b, v1);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            o.q0[i] = static_cast<int>(v0[i]);
            o.q1[i] = static_cast<int>(v1[i]);
        }
        o.d0 = o.d1 = h2f(static_cast<uint16_t>(r.d));
        o.m0 = o.m1 = 0.f;
        o.e0 = 32 * u;
        o.e1 = 32 * u + 16;
    }
};

// Q4_0 repacked ([qs nb x 16][d nb x 2]): unit = block u; low nibbles elements 0..15, high
// 16..31; codes unsigned, offset m = -8 d.
template <>
struct Fast<kQ4_0R> {
    struct Raw {
        uint4 qs;
        uint32_t d;
    };
    static __device__ __forceinline__ void load(const uint8_t* row, int nbk, int u, Raw& r) {
        r.qs = ldw128(row + 16 * u);
        r.d = ldw16(row + 16 * nbk + 2 * u);
    }
    static __device__ __forceinline__ void decode(const Raw& r, int u, int, Unit& o) {
        const uint32_t v[4] = {r.qs.x, r.qs.y, r.qs.z, r.qs.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            o.q0[i] = static_cast<int>(v[i] & 0x0f0f0f0fu);
            o.q1[i] = static_cast<int>((v[i] >> 4) & 0x0f0f0f0fu);
        }
        o.d0 = o.d1 = h2f(static_cast<uint16_t>(r.d));
        o.m0 = o.m1 = -8.f * o.d0;
        o.e0 = 32 * u;
        o.e1 = 32 * u + 16;
    }
};

// Q8_0 repacked ([qs nb x 32][d nb x 2]): unit = block u.
template <>
struct Fast<kQ8_0R> {
    struct Raw {
        uint4 a, b;
        uint32_t d;
    };
    static __device__ __forceinline__ void load(const uint8_t* row, int nbk, int u, Raw& r) {
        r.a = ldw128(row + 32 * u);
        r.b = ldw128(row + 32 * u + 16);
        r.d = ldw16(row + 32 * nbk + 2 * u);
    }
    static __device__ __forceinline__ void decode(const Raw& r, int u, int, Unit& o) {
        o.q0[0] = static_cast<int>(r.a.x), o.q0[1] = static_cast<int>(r.a.y);
        o.q0[2] = static_cast<int>(r.a.z), o.q0[3] = static_cast<int>(r.a.w);
        o.q1[0] = static_cast<int>(r.b.x), o.q1[1] = static_cast<int>(r.b.y);
        o.q1[2] = static_cast<int>(r.b.z), o.q1[3] = static_cast<int>(r.b.w);
        o.d0 = o.d1 = h2f(static_cast<uint16_t>(r.d));
        o.m0 = o.m1 = 0.f;
        o.e0 = 32 * u;
        o.e1 = 32 * u + 16;
    }
};

__device__ __forceinline__ int dot16(const int (&q)[4], const uint4& a) {
    int s = __dp4a(q[0], static_cast<int>(a.x), 0);
    s = __dp4a(q[1], static_cast<int>(a.y), s);
    s = __dp4a(q[2], static_cast<int>(a.z), s);
    return __dp4a(q[3], static_cast<int>(a.w), s);
}

// One unit against one activation row (codes aq, scales ad of that row). The activations' float4
// per 32 elements holds (d, s_lo, s_hi, -): s = the scaled code sums of its two halves (Q8_1: s_lo
// the whole block's, s_hi = 0, and both groups of a unit are one block's halves with m0 == m1).
// The activation bytes one unit needs from one activation row: 16 codes per group and the
// group's float4 (d, s_lo, s_hi, -), of which s is the scaled code sum of the group's half (Q8_1:
// s_lo is the whole block's and s_hi = 0, and both groups of a unit are one block's halves with
// m0 == m1).
struct ActUnit {
    uint4 x0, x1;
    float4 s0, s1;
};
__device__ __forceinline__ void load_act(const Unit& w, const int8_t* __restrict__ aq,
                                         const float4* __restrict__ ad, ActUnit& a) {
    a.x0 = *reinterpret_cast<const uint4*>(aq + w.e0);
    a.x1 = *reinterpret_cast<const uint4*>(aq + w.e1);
    a.s0 = ad[w.e0 >> 5];
    a.s1 = ad[w.e1 >> 5];
}
__device__ __forceinline__ float unit_dot(const Unit& w, const ActUnit& a) {
    const float sum0 = (w.e0 & 16) ? a.s0.z : a.s0.y, sum1 = (w.e1 & 16) ? a.s1.z : a.s1.y;
    const int i0 = dot16(w.q0, a.x0), i1 = dot16(w.q1, a.x1);
    float t = a.s0.x * (w.d0 * static_cast<float>(i0));
    t += a.s1.x * (w.d1 * static_cast<float>(i1));
    t += w.m0 * sum0;
    t += w.m1 * sum1;
    return t;
}

template <int T, int NB, int LPR, int U>
__global__ void __launch_bounds__(kWarps * 32)
    dmmv_fast_kernel(Jobs J, int k, const int8_t* __restrict__ aq, const float4* __restrict__ ad,
                     int n_act, bool accumulate) {
    launch_dependents();  // a fused projection launched after this one (V after Q+K) may start
    constexpr int RPW = 32 / LPR;  // rows per warp
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int li = lane & (LPR - 1);
    const int total = J.row_end[J.n_jobs - 1];
    int row = (static_cast<int>(blockIdx.x) * kWarps + (static_cast<int>(threadIdx.x) >> 5)) * RPW +
              lane / LPR;
    const bool valid = row < total;  // rows past the end compute row total - 1, write nothing
    if (!valid) row = total - 1;
    int j = 0;
    if (J.n_jobs > 1 && row >= J.row_end[0]) j = 1;
    if (J.n_jobs > 2 && row >= J.row_end[1]) j = 2;
    const int jrow = j == 0 ? row : row - J.row_end[j - 1];
    const uint8_t* wbase = j == 0 ? J.m[0].w : (j == 1 ? J.m[1].w : J.m[2].w);
    const size_t rb = j == 0 ? J.m[0].row_bytes : (j == 1 ? J.m[1].row_bytes : J.m[2].row_bytes);
    const uint8_t* w = wbase + static_cast<size_t>(jrow) * rb;
    const int nu = k >> 5;  // units per row
    const int nbk = k / Traits<T>::qk;
    const int a0 = static_cast<int>(blockIdx.y) * NB;
    const int na = min(NB, n_act - a0);
    const int8_t* aq0 = aq + static_cast<size_t>(a0) * k;
    const float4* ad0 = ad + static_cast<size_t>(a0) * nu;

    float acc[NB];
#pragma unroll
    for (int b = 0; b < NB; ++b) acc[b] = 0.f;
    // Every weight load of a step first; the guards make the arithmetic separate basic blocks,
    // which keeps ptxas from sinking later units' loads below earlier units' arithmetic (it did
    // when the step had no branches: one DRAM latency per unit instead of per step).
    for (int u0 = li; u0 < nu; u0 += LPR * U) {
        typename Fast<T>::Raw raw[U];
#pragma unroll
        for (int i = 0; i < U; ++i)
            if (u0 + LPR * i < nu) Fast<T>::load(w, nbk, u0 + LPR * i, raw[i]);
        // The weights do not depend on the previous kernel; its outputs (the activations, y
        // when accumulating) are read only after this (a no-op unless launched with PDL).
        if (u0 == li) grid_dependency_wait();
#pragma unroll
        for (int i = 0; i < U; ++i) {
            const int u = u0 + LPR * i;
            if (u < nu) {
                Unit un;
                Fast<T>::decode(raw[i], u, nbk, un);
#pragma unroll
                for (int b = 0; b < NB; ++b) {
                    // rows past na re-read row na - 1 (never written): no branch per row
                    const int bb = NB == 1 ? 0 : min(b, na - 1);
                    ActUnit a;
                    load_act(un, aq0 + static_cast<size_t>(bb) * k,
                             ad0 + static_cast<size_t>(bb) * nu, a);
                    acc[b] += unit_dot(un, a);
                }
            }
        }
    }
#pragma unroll
    for (int b = 0; b < NB; ++b) {
#pragma unroll
        for (int off = LPR / 2; off > 0; off >>= 1)
            acc[b] += __shfl_xor_sync(0xffffffffu, acc[b], off);
    }
    grid_dependency_wait();
    if (valid && li == 0) {
        float* y = j == 0 ? J.m[0].y : (j == 1 ? J.m[1].y : J.m[2].y);
        const int ldy = j == 0 ? J.m[0].ldy : (j == 1 ? J.m[1].ldy : J.m[2].ldy);
        const float* bias = j == 0 ? J.m[0].bias : (j == 1 ? J.m[1].bias : J.m[2].bias);
        const float bv = bias ? bias[jrow] : 0.f;
#pragma unroll
        for (int b = 0; b < NB; ++b) {
            if (b < na) {
                float* p = y + static_cast<size_t>(a0 + b) * ldy + jrow;
                const float r = acc[b] + bv;
                *p = accumulate ? *p + r : r;
            }
        }
    }
}

template <int T, int NB, int LPR, int U>
void launch(const Jobs& J, int k, const int8_t* aq, const float4* ad, int n_act, bool acc, bool pdl,
            cudaStream_t s) {
    const int rows = J.row_end[J.n_jobs - 1];
    constexpr int rows_per_block = kWarps * (32 / LPR);
    const dim3 grid(static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block),
                    static_cast<unsigned>((n_act + NB - 1) / NB));
    constexpr auto kernel = dmmv_fast_kernel<T, NB, LPR, U>;
#if defined(ZINC_SIMT_EMULATION)
    (void)pdl;
    (void)s;
    zinc_simt::launch(kernel, grid, kWarps * 32, J, k, aq, ad, n_act, acc);
#else
    // PDL (pdl): this grid may start while the previous kernel drains, and stream its weights then.
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(kWarps * 32);
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    cudaLaunchKernelEx(&cfg, kernel, J, k, aq, ad, n_act, acc);
#endif
}

// Lanes per row: one row per warp (32 lanes) for matrices of few rows, so that there are enough
// warps to fill the GPU (132 SMs x ~24 warps); 8 lanes per row (4 rows per warp, which share
// their activation loads) for tall matrices and for batches of 4+ rows. The decode_chunk types
// always take 32 (H200 run 1: 8 lanes were 1.1-2x slower for them on every shape).
bool narrow_loads(int type) {
    return type == kQ4_1 || type == kQ5_0 || type == kQ5_1 || type == kQ2_K || type == kQ3_K ||
           type == kMXFP4;
}
int auto_lpr(int type, int rows, int n_act) {
    constexpr int kWarpsWanted = 132 * 24;
    if (narrow_loads(type)) return 32;
    return n_act >= 4 || rows / 4 >= kWarpsWanted ? 8 : 32;
}

// Units per lane and step for one activation row: Q4_K's 18-byte units at 4 per step left too
// few bytes in flight on tall matrices (H200 run 1: gate+up at 2.2 TB/s while repacked Q6_K,
// 26-byte units, reached 3.7 TB/s at the same occupancy): 8 there (145 registers). Not at 32
// lanes per row: a 4096-weight row is 128 units, 4 per lane (8 would leave half of them idle and
// take 236 registers).
template <int T, int LPR>
constexpr int units_one_row() {
    return T == kQ4_K && LPR == 8 ? 8 : 4;
}

template <int T, int LPR>
void by_batch(const Jobs& J, int k, const int8_t* aq, const float4* ad, int n_act, bool acc,
              bool pdl, cudaStream_t s) {
    if (n_act == 1)
        launch<T, 1, LPR, units_one_row<T, LPR>()>(J, k, aq, ad, n_act, acc, pdl, s);
    else if (n_act == 2)
        launch<T, 2, LPR, 2>(J, k, aq, ad, n_act, acc, pdl, s);
    else if (n_act <= 4)
        launch<T, 4, LPR, 2>(J, k, aq, ad, n_act, acc, pdl, s);
    else if (n_act <= 8)
        launch<T, 8, LPR, 1>(J, k, aq, ad, n_act, acc, pdl, s);
    else
        launch<T, 16, LPR, 1>(J, k, aq, ad, n_act, acc, pdl, s);
}

template <int T>
void by_lpr(int lpr, const Jobs& J, int k, const int8_t* aq, const float4* ad, int n_act, bool acc,
            bool pdl, cudaStream_t s) {
    if (lpr == 32)
        by_batch<T, 32>(J, k, aq, ad, n_act, acc, pdl, s);
    else
        by_batch<T, 8>(J, k, aq, ad, n_act, acc, pdl, s);
}

bool aligned16(const void* p) {
    return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

}  // namespace

bool dmmv_fast_covers(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq,
                      int n_act) {
    if (n_act < 1 || n_act > kDmmvFastMaxRows || n_jobs < 1 || n_jobs > 3 || k % 32 != 0 ||
        !aligned16(aq) || k % 16 != 0)
        return false;
    switch (type) {
        case kQ4_1:
        case kQ5_0:
        case kQ5_1:
        case kQ2_K:
        case kQ3_K:
        case kMXFP4:  // decode_chunk's byte loads: any alignment
            break;
        case kQ4_0:
        case kQ8_0:
        case kQ6_K:  // ld_un16: 2-byte aligned rows
            for (int i = 0; i < n_jobs; ++i)
                if ((reinterpret_cast<uintptr_t>(jobs[i].w) & 1u) != 0 ||
                    jobs[i].row_bytes % 2 != 0)
                    return false;
            break;
        case kQ4_K:
        case kQ5_K:
        case kQ4_0R:
        case kQ8_0R:
        case kQ6_KR:
            // 16-byte loads: 16-byte aligned rows
            for (int i = 0; i < n_jobs; ++i)
                if (!aligned16(jobs[i].w) || jobs[i].row_bytes % 16 != 0) return false;
            break;
        default:
            return false;
    }
    const int qk = (type == kQ2_K || type == kQ3_K || type == kQ4_K || type == kQ5_K ||
                    type == kQ6_K || type == kQ6_KR)
                       ? 256
                       : 32;
    return k % qk == 0;
}

bool dmmv_fast_preferred(int type, int rows, int n_act) {
    // From the H200 run of bench_dmmv (docs/perf-notes.md "dmmv", run 1): v3 ties or wins at one
    // activation row except for Q8_0 (v2's 34-byte-block path was 10-20 % faster) and Q2_K/Q3_K
    // (5 % slower); at two rows it wins for the 16-byte-load types; from 3 rows on v2's blocks
    // (4 warps splitting a row's chunks, activation loads shared by 2-4 rows) win except on tall
    // matrices (gate+up, lm_head) at 8-16 rows, where v3 is 1.3-1.7x faster for Q4_K, Q5_K and
    // repacked Q4_0/Q6_K.
    if (type == kQ8_0 || type == kQ8_0R || type == kQ2_K || type == kQ3_K) return false;
    if (narrow_loads(type)) return n_act == 1;
    if (n_act <= 2) return true;
    const bool tall = rows >= 4 * 132 * 24;
    return tall && n_act >= 8 &&
           (type == kQ4_K || type == kQ5_K || type == kQ4_0R || type == kQ6_KR);
}

bool dmmv_fast(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq, const float4* ad,
               int n_act, bool accumulate, cudaStream_t s, int lanes_per_row, bool pdl) {
    if (!dmmv_fast_covers(type, jobs, n_jobs, k, aq, n_act)) return false;
    if (lanes_per_row != 0 && lanes_per_row != 8 && lanes_per_row != 32) return false;
    Jobs J{};
    J.n_jobs = n_jobs;
    int total = 0;
    for (int i = 0; i < n_jobs; ++i) {
        J.m[i] = jobs[i];
        total += jobs[i].n_out;
        J.row_end[i] = total;
    }
    if (total == 0) return true;
    const int lpr = lanes_per_row ? lanes_per_row : auto_lpr(type, total, n_act);
    switch (type) {
        case kQ4_0:
            by_lpr<kQ4_0>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ4_1:
            by_lpr<kQ4_1>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ5_0:
            by_lpr<kQ5_0>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ5_1:
            by_lpr<kQ5_1>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ8_0:
            by_lpr<kQ8_0>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ2_K:
            by_lpr<kQ2_K>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ3_K:
            by_lpr<kQ3_K>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ4_K:
            by_lpr<kQ4_K>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ5_K:
            by_lpr<kQ5_K>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ6_K:
            by_lpr<kQ6_K>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ4_0R:
            by_lpr<kQ4_0R>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ8_0R:
            by_lpr<kQ8_0R>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ6_KR:
            by_lpr<kQ6_KR>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kMXFP4:
            by_lpr<kMXFP4>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        default:
            return false;
    }
    return true;
}

}  // namespace zinc::cuda
