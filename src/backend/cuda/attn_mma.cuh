// zinc/backend/cuda/attn_mma.cuh — the f16 tensor-core instructions of attention_fast.cu, as
// inline PTX: ldmatrix (.x4 and .x4.trans, 8x8 b16 tiles from shared memory) and
// mma.sync.m16n8k16.row.col.f32.f16.f16.f32, plus the f32 -> f16x2 packing and cp.async helpers.
// Under the SIMT shim of tests/unit/cuda_emul (ZINC_SIMT_EMULATION) they call the shim's host
// models of the same fragment semantics (zinc_simt::ldmatrix_x4 / ldmatrix_x4_trans / mma_f16).
//
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16" with .f16 inputs), g = lane / 4,
// t = lane % 4; each register holds two f16 (lower address / lower column in the low half):
//   A (16 x 16, row-major): a0 = (row g, cols 2t, 2t+1), a1 = (g + 8, 2t..), a2 = (g, 8 + 2t..),
//     a3 = (g + 8, 8 + 2t..).
//   B (16 x 8, k x n): b0 = (k 2t, 2t+1; col g), b1 = (k 8 + 2t, 9 + 2t; col g).
//   C, D (16 x 8, f32): c0 = (g, 2t), c1 = (g, 2t + 1), c2 = (g + 8, 2t), c3 = (g + 8, 2t + 1).
// ldmatrix .x4: lane l supplies the address of row l % 8 of matrix l / 8 (16 bytes, 8 f16); lane l
// receives, of matrix j, in register j: row l / 4, cols 2 (l % 4), 2 (l % 4) + 1. With .trans it
// receives rows 2 (l % 4), 2 (l % 4) + 1 of column l / 4 instead (the matrix transposed).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

namespace zinc::cuda::fa {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
#if defined(ZINC_SIMT_EMULATION)
    (void)p;
    return 0;
#else
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
#endif
}

/// Four 8x8 f16 matrices, row-major fragments (see above).
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* row_addr) {
#if defined(ZINC_SIMT_EMULATION)
    int v[4];
    zinc_simt::ldmatrix_x4(v, row_addr);
    for (int i = 0; i < 4; ++i) r[i] = static_cast<uint32_t>(v[i]);
#else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row_addr)));
#endif
}

/// Four 8x8 f16 matrices, transposed: register j of lane l = rows 2 (l % 4), +1 of column l / 4.
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const void* row_addr) {
#if defined(ZINC_SIMT_EMULATION)
    zinc_simt::ldmatrix_x4_trans(r, row_addr);
#else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row_addr)));
#endif
}

/// d += a (16 x 16 f16) * b (16 x 8 f16), f32 accumulation.
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
#if defined(ZINC_SIMT_EMULATION)
    zinc_simt::mma_f16(d, a, b0, b1);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

/// Two floats as f16x2 (round to nearest even), lo in the low half.
__device__ __forceinline__ uint32_t pack_h2(float lo, float hi) {
#if defined(ZINC_SIMT_EMULATION)
    return static_cast<uint32_t>(zinc_simt::f32_to_f16(lo)) |
           (static_cast<uint32_t>(zinc_simt::f32_to_f16(hi)) << 16);
#else
    const __half2 h = __floats2half2_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
#endif
}

/// Eight f16 (one 16-byte load) as floats.
__device__ __forceinline__ void unpack8(const uint4& v, float (&f)[8]) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        f[2 * i] = __half2float(__ushort_as_half(static_cast<uint16_t>(w[i] & 0xffffu)));
        f[2 * i + 1] = __half2float(__ushort_as_half(static_cast<uint16_t>(w[i] >> 16)));
    }
}

/// 16-byte global -> shared copy (both 16-byte aligned), cp.async.cg (L2 only).
__device__ __forceinline__ void cp16(void* smem_dst, const void* gmem_src) {
#if defined(ZINC_SIMT_EMULATION)
    std::memcpy(smem_dst, gmem_src, 16);
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(smem_dst)),
                 "l"(gmem_src)
                 : "memory");
#endif
}
/// Close the copies issued so far into one group (an empty group is allowed).
__device__ __forceinline__ void cp_commit() {
#if !defined(ZINC_SIMT_EMULATION)
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
/// Wait until at most one committed group of this thread is still pending.
__device__ __forceinline__ void cp_wait1() {
#if !defined(ZINC_SIMT_EMULATION)
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
#endif
}

}  // namespace zinc::cuda::fa
