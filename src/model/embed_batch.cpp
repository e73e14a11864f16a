// zinc/model/embed_batch.cpp — see embed_batch.h.
#include "model/embed_batch.h"

#include <string>

namespace zinc::model {

Result<void> check_embed_batch(const Program& prog, std::string_view arch, const Batch& batch,
                               const float* hidden) {
    const std::string name(arch);
    if (prog.embd_op < 0) return make_error("embeddings: " + name + " marks no embeddings value");
    if (prog.bidirectional) {
        for (size_t si = 0; si < batch.seqs.size(); ++si) {
            if (batch.seqs[si].pos0 != 0)
                return make_error("embeddings: sequence " + std::to_string(si) +
                                  " starts at position " + std::to_string(batch.seqs[si].pos0) +
                                  ", but " + name +
                                  " attends in both directions: a sequence must be computed "
                                  "whole, from position 0, in one forward");
        }
    }
    if (hidden == nullptr) return make_error("embeddings: hidden-state buffer is null");
    return {};
}

}  // namespace zinc::model
