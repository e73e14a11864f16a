// zinc/tests/unit/cuda_emul/repack_unit.cpp — the host repacking of weight rows (repack.cpp) for
// the emulated kernels' tests (test_cuda_emul links no CUDA library). Its own translation unit:
// repack.cpp's type constants would clash with common.cuh's inside a kernel source.
#include "backend/cuda/repack.cpp"
