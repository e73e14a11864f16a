// zinc/tests/unit/cuda_emul/shim/cuda_fp16.h — stands in for the CUDA header of that name in
// test_cuda_emul; everything lives in the SIMT shim (cuda_runtime.h here).
#pragma once
#include "cuda_runtime.h"
