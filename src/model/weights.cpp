// zinc/model/weights.cpp — weight lookup and shape/type validation.
#include "model/weights.h"

#include "gguf/gguf.h"

namespace zinc::model {

bool is_matmul_type(quant::GgmlType t) {
    return t != quant::GgmlType::Q8_1 && t != quant::GgmlType::Q8_K;
}

std::string shape_string(const int64_t* ne, int n_dims) {
    std::string s = "[";
    for (int i = 0; i < n_dims; ++i) {
        if (i) s += ", ";
        s += std::to_string(ne[i]);
    }
    return s + "]";
}

WeightBinder::WeightBinder(const gguf::File& file, std::string arch, std::deque<Weight>& store)
    : file_(file), arch_(std::move(arch)), store_(store) {}

const Weight* WeightBinder::require(const std::string& name, std::initializer_list<int64_t> shape,
                                    TypeClass types) {
    return bind(name, shape, types, true);
}

const Weight* WeightBinder::optional(const std::string& name, std::initializer_list<int64_t> shape,
                                     TypeClass types) {
    return bind(name, shape, types, false);
}

Result<void> WeightBinder::status() const {
    if (errors_.empty()) return {};
    return errors_.front();
}

const Weight* WeightBinder::bind(const std::string& name, std::initializer_list<int64_t> shape,
                                 TypeClass types, bool required) {
    const gguf::TensorInfo* ti = file_.find_tensor(name);
    if (!ti) {
        if (required) {
            errors_.push_back(make_error(file_.path() + ": missing tensor " + name +
                                         " (required by architecture " + arch_ + ")"));
        }
        return nullptr;
    }
    // Shape: trailing dimensions of size 1 are equivalent ([576] == [576, 1]).
    int64_t want[4] = {1, 1, 1, 1};
    int want_dims = 0;
    for (int64_t d : shape) want[want_dims++] = d;
    bool same = true;
    for (int i = 0; i < 4; ++i) same = same && ti->ne[i] == want[i];
    if (!same) {
        errors_.push_back(make_error(name + ": shape " +
                                     shape_string(ti->ne, static_cast<int>(ti->n_dims)) +
                                     ", expected " + shape_string(want, want_dims)));
        return nullptr;
    }
    const bool type_ok =
        types == TypeClass::F32 ? ti->type == quant::GgmlType::F32 : is_matmul_type(ti->type);
    if (!type_ok) {
        errors_.push_back(make_error(
            name + ": type " + std::string(quant::type_name(ti->type)) +
            " is not supported for this tensor (expected " +
            (types == TypeClass::F32 ? std::string("f32")
                                     : std::string("f32, f16, bf16 or a q4_0..q6_K block type")) +
            ")"));
        return nullptr;
    }
    const quant::TypeTraits& tt = quant::type_traits(ti->type);
    if (ti->ne[0] % tt.block_size != 0) {
        errors_.push_back(make_error(name + ": row length " + std::to_string(ti->ne[0]) +
                                     " is not a multiple of the " + std::string(tt.name) +
                                     " block size " + std::to_string(tt.block_size)));
        return nullptr;
    }
    Weight w;
    w.name = name;
    w.type = ti->type;
    w.n_dims = static_cast<int>(ti->n_dims);
    for (int i = 0; i < 4; ++i) w.ne[i] = ti->ne[i];
    w.data = ti->data;
    w.n_rows = ti->ne[1] * ti->ne[2] * ti->ne[3];
    w.row_bytes = quant::row_size(ti->type, ti->ne[0]);
    store_.push_back(std::move(w));
    return &store_.back();
}

}  // namespace zinc::model
