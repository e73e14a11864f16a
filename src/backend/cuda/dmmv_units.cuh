// zinc/backend/cuda/dmmv_units.cuh — the 32-weight unit decoding of the fast matrix-vector
// kernels (dmmv_fast.cu, v3). Per weight type: Raw (the loaded bytes of one unit), load() (issue
// the streamed global loads) and decode() (registers only); then the unit's dot product with one
// packed activation row (pack.cu's int8 codes and float4 scales). (Commit 0e76841 also decoded
// these units from shared memory, for the bulk-copy kernels of docs/perf-notes.md "dmmv v4".)
//
// Unit u of a row covers elements of block u >> 3 (256-element types) or u (32-element types),
// seen as two groups of 16 elements with their own scale and offset. The math follows the GGUF
// block layouts (ggml-quants.c's dequantize_row_* for the bit positions) and repack.h.
#pragma once

#include "backend/cuda/common.cuh"

namespace zinc::cuda {
namespace units {

using namespace dev;

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
// and decode() (registers only).
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


}  // namespace units
}  // namespace zinc::cuda
