// zinc/server/usage_handler.cpp — GET /v1/usage: the calling tenant's usage (tokens in and out,
// requests, rejections by quota, queue time, ledger day/month, scheduler counters); GET
// /v1/usage/{tenant}: any tenant's, for a key of a tenant with admin = true (else 403).
// Without a tenants config there is one default tenant and no usage to report: 404.
#include "server/serving_context.h"
#include "server/tenancy.h"

namespace zinc::server {

void handle_usage(ServingContext& ctx, const httplib::Request& req, httplib::Response& res) {
    if (!ctx.opts.tenancy)
        return send_error(res, ApiError{404, "not_found_error",
                                        "usage is kept per tenant: start the server with "
                                        "--tenants FILE (docs/server.md, \"Tenants\")",
                                        std::nullopt, std::string("not_found"), 0});
    auto me = ctx.opts.tenancy->authenticate(req.get_header_value("Authorization"),
                                             req.get_header_value("X-Api-Key"));
    if (!me) return send_error(res, unauthorized());
    std::string id = me->id;
    if (req.matches.size() > 1) {
        id = req.matches[1];
        if (id != me->id && !me->admin)
            return send_error(res, ApiError{403, "permission_error",
                                            "tenant '" + me->id +
                                                "' may read only its own usage (GET /v1/usage); "
                                                "another tenant's needs an admin key",
                                            std::nullopt, std::string("forbidden"), 0});
        if (!ctx.opts.tenancy->known(id))
            return send_error(res, ApiError{404, "not_found_error", "no tenant '" + id + "'",
                                            std::nullopt, std::string("not_found"), 0});
    }
    send_json(res, ctx.opts.tenancy->usage(id));
}

}  // namespace zinc::server
