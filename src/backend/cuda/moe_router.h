// zinc/backend/cuda/moe_router.h — the MoE router's product fused with the fast routing
// (moe.cu; the fused op MoeP::router, model/ir.h FusionOptions::router_moe).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace zinc::cuda {

/// logits (n_rows, n_expert) = x (n_rows, dim, f32) times the F32 router (n_expert rows of dim
/// floats), in dmmv's F32 order, then each row's routing as moe_route's fast path (exact =
/// false): ids, w, src_row and load as moe_route. One launch: the last block of a row (tickets:
/// n_rows zeroed counters, left zeroed) routes it. Returns false, launching nothing, where the
/// fused kernel does not apply (more than 1024 experts, odd dim, x not 8-byte aligned): the
/// caller runs dmmv + moe_route.
bool moe_route_router(const float* x, int dim, const float* router, int n_rows, int n_expert,
                      float* logits, unsigned* tickets, int k, bool softmax_first, bool norm_w,
                      float w_scale, int32_t* ids, float* w, int32_t* src_row, cudaStream_t s,
                      uint32_t* load = nullptr);

}  // namespace zinc::cuda
