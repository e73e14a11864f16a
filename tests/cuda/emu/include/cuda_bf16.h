// tests/cuda/emu/include/cuda_bf16.h — host emulation (see cuda_runtime.h): nothing needed.
#pragma once
