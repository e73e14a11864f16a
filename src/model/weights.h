// zinc/model/weights.h — declarative weight binding.
//
// An architecture asks for each weight by name, expected shape (ggml order: ne[0] is the row
// length) and a set of allowed element types. The binder looks the tensor up in the GGUF, checks
// it, and records a Weight that points into the file mapping (no copy, still quantized). The
// first mismatch becomes the Error of the whole load, naming the tensor, e.g.
//   "blk.3.attn_q.weight: shape [576, 577], expected [576, 576]".
#pragma once

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <string>
#include <vector>

#include "quant/types.h"
#include "util/check.h"
#include "util/result.h"

namespace zinc::gguf {
class File;
}

namespace zinc::model {

struct Weight {
    std::string name;
    quant::GgmlType type = quant::GgmlType::F32;
    int n_dims = 0;
    int64_t ne[4] = {1, 1, 1, 1};
    const uint8_t* data = nullptr;  // into the GGUF mapping
    int64_t n_rows = 0;             // ne[1] * ne[2] * ne[3]: rows of ne[0] elements
    size_t row_bytes = 0;           // bytes of one row in its block format
    uint64_t bytes() const { return static_cast<uint64_t>(row_bytes) * n_rows; }
    /// The data as f32 (only for F32 weights: norms, biases).
    const float* f32() const {
        ZINC_CHECK(type == quant::GgmlType::F32);
        return reinterpret_cast<const float*>(data);
    }
};

enum class TypeClass {
    F32,     // norm weights, biases: f32 only
    Matmul,  // any block type with a vec_dot (F32, F16, BF16, Q4_0 .. Q6_K)
};

class WeightBinder {
  public:
    /// Weights are appended to `store` (a deque, so pointers stay valid); `arch` names the
    /// architecture in "missing tensor" errors.
    WeightBinder(const gguf::File& file, std::string arch, std::deque<Weight>& store);

    /// Bind a tensor that must exist. Returns nullptr after recording an error.
    const Weight* require(const std::string& name, std::initializer_list<int64_t> shape,
                          TypeClass types);
    /// Bind a tensor that may be absent (nullptr then, no error); if present it must match.
    const Weight* optional(const std::string& name, std::initializer_list<int64_t> shape,
                           TypeClass types);
    /// The first error recorded, if any.
    Result<void> status() const;

  private:
    const Weight* bind(const std::string& name, std::initializer_list<int64_t> shape,
                       TypeClass types, bool required);
    const gguf::File& file_;
    std::string arch_;
    std::deque<Weight>& store_;
    std::vector<Error> errors_;
};

/// Whether a weight type can be used by the CPU matmul (has a vec_dot) — i.e. every storage type
/// except the activation-only packings Q8_1 and Q8_K.
bool is_matmul_type(quant::GgmlType t);

/// "[576, 576]"
std::string shape_string(const int64_t* ne, int n_dims);

}  // namespace zinc::model
