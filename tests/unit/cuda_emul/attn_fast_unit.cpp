// zinc/tests/unit/cuda_emul/attn_fast_unit.cpp — src/backend/cuda/attention_fast.cu (prefill)
// compiled for the host over the SIMT shim, as its own translation unit (its internal names
// would clash with attention_fast_decode.cu's); attn_fast_emul_test.cpp runs it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#include "backend/cuda/attention_fast.cu"
#pragma GCC diagnostic pop
