// zinc/tests/cuda/gpu_model.h — a model file opened the way the end-to-end GPU test programs
// (test_exact, test_parity, test_agreement) need it: the GGUF mapping, the Model bound to it and
// its tokenizer, kept alive together.
#pragma once

#include <memory>
#include <string>

#include "gguf/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace zinc::gpu_test {

struct LoadedModel {
    std::unique_ptr<gguf::File> file;
    std::unique_ptr<model::Model> model;
    std::unique_ptr<tokenizer::Tokenizer> tok;
};

/// Open `path`, bind its model and read its tokenizer into L. Returns "" on success, else one line
/// naming the step that failed ("open|load|tokenizer PATH: reason").
inline std::string load_model(const std::string& path, LoadedModel& L) {
    auto f = gguf::File::open(path);
    if (!f) return "open " + path + ": " + f.error().message;
    L.file = std::move(f.value());
    auto m = model::Model::load(*L.file, {});
    if (!m) return "load " + path + ": " + m.error().message;
    L.model = std::move(m.value());
    auto t = tokenizer::Tokenizer::from_gguf(*L.file);
    if (!t) return "tokenizer " + path + ": " + t.error().message;
    L.tok = std::move(t.value());
    return "";
}

/// The file name of a path (for report lines).
inline std::string base_name(const std::string& p) {
    return p.substr(p.find_last_of('/') + 1);
}

}  // namespace zinc::gpu_test
