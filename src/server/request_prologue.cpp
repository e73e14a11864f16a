// zinc/server/request_prologue.cpp — see request_prologue.h.
#include "server/request_prologue.h"

#include "server/completion_request.h"

namespace zinc::server {

std::optional<nlohmann::json> request_body(const ServingContext& ctx, const httplib::Request& req,
                                           httplib::Response& res) {
    if (ctx.draining.load()) {
        send_error(res, shutting_down());
        res.set_header("Connection", "close");
        return std::nullopt;
    }
    auto body = parse_json_body(req.body);
    if (!body.ok()) {
        send_error(res, body.error());
        return std::nullopt;
    }
    return std::move(body.value());
}

std::optional<ApiError> refuse_model(const ServingContext& ctx, bool has_model,
                                     const std::string& model) {
    if (has_model && model != ctx.opts.model_id && (ctx.opts.strict_model || model.empty()))
        return model_not_found(model);
    return std::nullopt;
}

}  // namespace zinc::server
