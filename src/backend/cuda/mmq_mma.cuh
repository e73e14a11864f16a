// zinc/backend/cuda/mmq_mma.cuh — the integer tensor-core instructions mmq.cu uses, as inline
// PTX: ldmatrix (8x8 b16 tiles from shared memory into the per-thread fragment layout) and
// mma.sync m16n8k32 / m16n8k16 s8 x s8 -> s32. Under the SIMT shim of tests/unit/cuda_emul
// (ZINC_SIMT_EMULATION) they call the shim's host models of the same fragment semantics
// (zinc_simt::ldmatrix_x4 / mma_s8), so the kernel's fragment addressing is checked on the host.
//
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k32 / m16n8k16", integer types), with
// g = lane / 4 and t = lane % 4:
//   A (16 x 32, row-major, s8): a0 = row g, k 4t..4t+3; a1 = row g + 8, k 4t..; a2 = row g,
//     k 16 + 4t..; a3 = row g + 8, k 16 + 4t.. (4 bytes each, element order).
//     m16n8k16's A is {a0, a1} of the same picture (k 0..15), so {a2, a3} is the upper half.
//   B (32 x 8, "col": stored as 8 rows n of 32 k bytes): b0 = n g, k 4t..4t+3; b1 = n g, k 16+4t..
//   C, D (16 x 8, s32): c0 = (g, 2t), c1 = (g, 2t + 1), c2 = (g + 8, 2t), c3 = (g + 8, 2t + 1).
// ldmatrix .x4: lane l supplies the row address of matrix l / 8 (row l % 8); each thread receives,
// of matrix j, the 4 bytes 4 (l % 4).. of row l / 4, in register j.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace zinc::cuda::dev {

/// Shared-memory address of p as the 32-bit value ldmatrix takes.
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
#if defined(ZINC_SIMT_EMULATION)
    (void)p;
    return 0;
#else
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
#endif
}

/// Four 8x8 b16 matrices: lane l gives the address of row l % 8 of matrix l / 8 (16 bytes).
__device__ __forceinline__ void ldmatrix_x4(int (&r)[4], const void* row_addr) {
#if defined(ZINC_SIMT_EMULATION)
    zinc_simt::ldmatrix_x4(r, row_addr);
#else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(row_addr)));
#endif
}

/// d = a (16 x 32 s8) * b (32 x 8 s8) + c, int32 (wrapping), per the fragment layouts above.
__device__ __forceinline__ void mma_k32(int (&d)[4], const int (&a)[4], const int (&b)[2], int c) {
#if defined(ZINC_SIMT_EMULATION)
    zinc_simt::mma_s8<32>(d, a, b, c);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%10, %10, %10, %10};\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c));
#endif
}

/// d = a (16 x 16 s8: {a0, a1}) * b (16 x 8 s8: b0) + c.
__device__ __forceinline__ void mma_k16(int (&d)[4], int a0, int a1, int b0, int c) {
#if defined(ZINC_SIMT_EMULATION)
    const int a[4] = {a0, a1, 0, 0};
    const int b[2] = {b0, 0};
    zinc_simt::mma_s8<16>(d, a, b, c);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
        "{%7, %7, %7, %7};\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a0), "r"(a1), "r"(b0), "r"(c));
#endif
}

}  // namespace zinc::cuda::dev
