// zinc/server/embeddings.cpp — POST /v1/embeddings (OpenAI's embeddings API): validate the
// request, tokenize each input, run them on the engine as embedding requests
// (engine/embedding_step.h: prefills with no decode, between generation steps), and answer with
// the pooled, L2-normalised vectors as float arrays or base64 of little-endian float32.
//
// `input`: a string, an array of strings, an array of token ids, or an array of token-id arrays
// (LangChain's OpenAIEmbeddings sends token ids unless check_embedding_ctx_length=False). Strings
// are tokenized as llama.cpp's embedding path does (add_special, special-token text as plain
// text: for BERT "[CLS] ... [SEP]"); token arrays are used as they are. Errors: docs/server.md.
#include <condition_variable>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "model/pooling.h"
#include "server/completion_request.h"
#include "server/json_fields.h"
#include "server/request_prologue.h"
#include "server/serving_context.h"
#include "server/tenancy.h"

namespace zinc::server {

using nlohmann::json;

namespace {

constexpr size_t kMaxInputs = 2048;  // OpenAI's limit on inputs per request

struct EmbeddingRequest {
    std::vector<std::vector<int32_t>> inputs;
    std::vector<std::string> paths;  // JSON path of each input ("input", "input[2]")
    bool base64 = false;
    bool has_model = false;
    std::string model;
};

ApiResult<std::vector<int32_t>> token_array(const json& a, const std::string& path) {
    std::vector<int32_t> ids;
    for (size_t k = 0; k < a.size(); ++k) {
        const auto v = a[k].is_number() ? as_integer(a[k]) : std::nullopt;
        if (!v) return wrong_type(path_index(path, k), "a token id (integer)", a[k]);
        if (*v < 0 || *v > std::numeric_limits<int32_t>::max())
            return invalid_value(path_index(path, k),
                                 "token id " + std::to_string(*v) + " is out of range");
        ids.push_back(static_cast<int32_t>(*v));
    }
    return ids;
}

ApiResult<EmbeddingRequest> parse_request(const json& body, const tokenizer::Tokenizer& tok,
                                          int64_t n_embd) {
    EmbeddingRequest out;
    auto text = [&](const std::string& s) {
        return tok.encode(s, /*add_special=*/true, /*parse_special=*/false);
    };
    const auto in = body.find("input");
    if (in == body.end()) return invalid_value("input", "is required");
    const std::string what =
        "a string, an array of strings, an array of token ids or an array "
        "of token-id arrays";
    if (in->is_string()) {
        if (in->get_ref<const std::string&>().empty())
            return invalid_value("input", "must not be an empty string");
        out.inputs.push_back(text(in->get<std::string>()));
        out.paths.push_back("input");
    } else if (in->is_array()) {
        if (in->empty()) return invalid_value("input", "must not be an empty array");
        if (in->size() > kMaxInputs)
            return invalid_value("input", "has " + std::to_string(in->size()) +
                                              " inputs; at most " + std::to_string(kMaxInputs) +
                                              " are allowed");
        if ((*in)[0].is_number()) {  // one input as token ids
            auto ids = token_array(*in, "input");
            if (!ids.ok()) return ids.error();
            out.inputs.push_back(std::move(ids.value()));
            out.paths.push_back("input");
        } else {
            for (size_t k = 0; k < in->size(); ++k) {
                const json& e = (*in)[k];
                const std::string path = path_index("input", k);
                if (e.is_string()) {
                    if (e.get_ref<const std::string&>().empty())
                        return invalid_value(path, "must not be an empty string");
                    out.inputs.push_back(text(e.get<std::string>()));
                } else if (e.is_array()) {
                    if (e.empty()) return invalid_value(path, "must not be an empty array");
                    auto ids = token_array(e, path);
                    if (!ids.ok()) return ids.error();
                    out.inputs.push_back(std::move(ids.value()));
                } else {
                    return wrong_type(path, "a string or an array of token ids", e);
                }
                out.paths.push_back(path);
            }
        }
    } else {
        return wrong_type("input", what, *in);
    }
    for (size_t i = 0; i < out.inputs.size(); ++i) {
        if (out.inputs[i].empty()) return invalid_value(out.paths[i], "tokenizes to no tokens");
        for (size_t k = 0; k < out.inputs[i].size(); ++k)
            if (out.inputs[i][k] >= tok.n_vocab())
                return invalid_value(out.paths[i], "token id " + std::to_string(out.inputs[i][k]) +
                                                       " is out of range (vocabulary of " +
                                                       std::to_string(tok.n_vocab()) + ")");
    }
    if (const auto f = body.find("encoding_format"); f != body.end() && !f->is_null()) {
        if (!f->is_string()) return wrong_type("encoding_format", "\"float\" or \"base64\"", *f);
        const std::string& v = f->get_ref<const std::string&>();
        if (v != "float" && v != "base64")
            return invalid_value(
                "encoding_format",
                "\"" + v + "\" is not supported (expected \"float\" or \"base64\")");
        out.base64 = v == "base64";
    }
    if (const auto d = body.find("dimensions"); d != body.end() && !d->is_null()) {
        const auto v = d->is_number() ? as_integer(*d) : std::nullopt;
        if (!v) return wrong_type("dimensions", "an integer", *d);
        if (*v != n_embd)
            return invalid_value("dimensions",
                                 std::to_string(*v) +
                                     " is not supported: this model's embeddings "
                                     "have " +
                                     std::to_string(n_embd) +
                                     " dimensions and are not truncated (omit dimensions or give " +
                                     std::to_string(n_embd) + ")");
    }
    if (const auto m = body.find("model"); m != body.end()) {
        if (!m->is_string()) return wrong_type("model", "a string", *m);
        out.has_model = true;
        out.model = m->get<std::string>();
    }
    if (const auto u = body.find("user"); u != body.end() && !u->is_string() && !u->is_null())
        return wrong_type("user", "a string", *u);
    return out;
}

std::string base64_of(const std::vector<float>& v) {
    static const char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::vector<unsigned char> bytes(v.size() * sizeof(float));
    // float32 little-endian, as numpy's frombuffer(dtype="float32") reads it (x86-64 and
    // aarch64 Linux are little-endian; a big-endian host would need a byte swap here).
    static_assert(sizeof(float) == 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    for (size_t i = 0; i < bytes.size(); i += 3) {
        const uint32_t b0 = bytes[i], b1 = i + 1 < bytes.size() ? bytes[i + 1] : 0,
                       b2 = i + 2 < bytes.size() ? bytes[i + 2] : 0;
        const uint32_t n = (b0 << 16) | (b1 << 8) | b2;
        out += kAlphabet[(n >> 18) & 63];
        out += kAlphabet[(n >> 12) & 63];
        out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
        out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
    }
    return out;
}

// Results of one request's inputs, filled by the engine's step thread.
struct Pending {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<engine::EmbeddingResult> results;
    size_t n_done = 0;
};

}  // namespace

void handle_embeddings(ServingContext& ctx, const httplib::Request& req, httplib::Response& res) {
    const CountedRequest counted(ctx.open_requests);
    const auto body = request_body(ctx, req, res);
    if (!body) return;
    const int64_t n_embd = ctx.model.embedding_dim;
    auto parsed = parse_request(*body, *ctx.model.tok, n_embd);
    if (!parsed.ok()) return send_error(res, parsed.error());
    EmbeddingRequest& er = parsed.value();
    if (auto e = refuse_model(ctx, er.has_model, er.model)) return send_error(res, *e);
    const int32_t n_ctx = ctx.model.engine->options().n_ctx;
    for (size_t i = 0; i < er.inputs.size(); ++i)
        if (static_cast<int64_t>(er.inputs[i].size()) > n_ctx)
            return send_error(
                res, context_length_exceeded("this model's context is " + std::to_string(n_ctx) +
                                                 " tokens; this input has " +
                                                 std::to_string(er.inputs[i].size()) + " tokens",
                                             er.paths[i]));

    // Tenants (server/tenancy.h): the inputs' tokens are the tenant's prompt tokens, against
    // its quotas now, in its usage and ledger when answered, and in its prefill bucket (engine).
    std::unique_ptr<TenantLease> lease;
    if (ctx.opts.tenancy) {
        auto t = ctx.opts.tenancy->authenticate(req.get_header_value("Authorization"),
                                                req.get_header_value("X-Api-Key"));
        if (!t) return send_error(res, unauthorized());
        std::vector<int64_t> sizes;
        for (const auto& in : er.inputs) sizes.push_back(static_cast<int64_t>(in.size()));
        auto l = ctx.opts.tenancy->admit_embeddings(std::move(t), sizes);
        if (!l.ok()) return send_error(res, l.error());
        lease = std::move(l.value());
    }

    auto pending = std::make_shared<Pending>();
    pending->results.resize(er.inputs.size());
    std::vector<engine::RequestId> ids;
    int64_t n_tokens = 0;
    for (size_t i = 0; i < er.inputs.size(); ++i) {
        n_tokens += static_cast<int64_t>(er.inputs[i].size());
        engine::EmbeddingParams p;
        p.tokens = std::move(er.inputs[i]);
        p.pooling = ctx.model.pooling;
        if (lease) p.tenant = lease->tenant().id;
        auto r = ctx.model.engine->submit_embedding(
            std::move(p), [pending, i](engine::EmbeddingResult result) {
                {
                    std::lock_guard<std::mutex> lk(pending->mu);
                    pending->results[i] = std::move(result);
                    ++pending->n_done;
                }
                pending->cv.notify_one();
            });
        if (const auto* err = std::get_if<engine::SubmitError>(&r)) {
            for (engine::RequestId id : ids) ctx.model.engine->cancel(id);
            {  // the cancelled ones still report (as errors): wait so none outlives the request
                std::unique_lock<std::mutex> lk(pending->mu);
                pending->cv.wait(lk, [&] { return pending->n_done == ids.size(); });
            }
            switch (err->kind) {
                case engine::SubmitErrorKind::ContextLength:
                    return send_error(res, context_length_exceeded(err->message, er.paths[i]));
                case engine::SubmitErrorKind::QueueFull:
                    return send_error(res, queue_full(err->message));
                case engine::SubmitErrorKind::ShuttingDown:
                    return send_error(res, shutting_down());
                case engine::SubmitErrorKind::InvalidRequest:
                    return send_error(res, bad_request(err->message, er.paths[i]));
            }
            return send_error(res, internal_error(err->message));
        }
        ids.push_back(std::get<engine::RequestId>(r));
    }
    {
        std::unique_lock<std::mutex> lk(pending->mu);
        pending->cv.wait(lk, [&] { return pending->n_done == pending->results.size(); });
    }
    json data = json::array();
    for (size_t i = 0; i < pending->results.size(); ++i) {
        const engine::EmbeddingResult& r = pending->results[i];
        if (!r.error.empty())
            return send_error(res, internal_error("embedding of " + er.paths[i] + ": " + r.error));
        json e = {{"object", "embedding"}, {"index", static_cast<int>(i)}};
        if (er.base64)
            e["embedding"] = base64_of(r.embedding);
        else
            e["embedding"] = r.embedding;
        data.push_back(std::move(e));
    }
    ctx.metrics.count_tokens(static_cast<uint64_t>(n_tokens), 0);
    if (lease) lease->settle(n_tokens, 0, 0.0);  // no queue time is measured for embeddings
    send_json(res, {{"object", "list"},
                    {"data", std::move(data)},
                    {"model", ctx.opts.model_id},
                    {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}}});
}

}  // namespace zinc::server
