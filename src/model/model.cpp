// zinc/model/model.cpp — Model::load: pick the architecture, read the config, bind weights.
#include "model/model.h"

#include "gguf/gguf.h"
#include "model/arch.h"
#include "model/config.h"

namespace zinc::model {

Result<std::unique_ptr<Model>> Model::load(const gguf::File& file, const LoadOptions& opts) {
    (void)opts;  // threads belong to the Context; nothing to do at load time
    auto arch = file.get_string("general.architecture");
    if (!arch.ok()) return arch.error();
    if (!arch.value()) {
        return make_error(file.path() +
                          ": missing metadata key general.architecture (string, one of " +
                          supported_arch_list() + ")");
    }
    const ArchInfo* info = find_arch(*arch.value());
    if (!info) {
        return make_error(file.path() + ": unsupported architecture '" +
                          std::string(*arch.value()) + "' (supported: " + supported_arch_list() +
                          ")");
    }
    auto cfg = read_config(file, *info);
    if (!cfg.ok()) return cfg.error();
    return info->factory(file, std::move(cfg.value()));
}

}  // namespace zinc::model
