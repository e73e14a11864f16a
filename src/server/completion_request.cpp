// zinc/server/completion_request.cpp — see completion_request.h.
#include "server/completion_request.h"

#include <limits>

#include "server/json_fields.h"
#include "server/json_schema_grammar.h"

namespace zinc::server {

using nlohmann::json;

namespace {
// No request field nests deeper than a few levels (content parts: 4); anything past this is an
// attack on code that walks values recursively.
constexpr int kMaxJsonDepth = 64;
struct TooDeep {};
}  // namespace

ApiResult<json> parse_json_body(std::string_view body) {
    json j;
    try {
        const json::parser_callback_t depth_guard = [](int depth, json::parse_event_t, json&) {
            if (depth > kMaxJsonDepth) throw TooDeep{};
            return true;
        };
        j = json::parse(body.begin(), body.end(), depth_guard);
    } catch (const TooDeep&) {
        return invalid_json("the request body nests arrays/objects deeper than " +
                            std::to_string(kMaxJsonDepth) + " levels");
    } catch (const json::parse_error& e) {
        // e.byte is 1-based, pointing just past the offending character. nlohmann's message is
        // "[json.exception.parse_error.101] parse error at line L, column C: <reason>"; keep the
        // reason (e.g. "syntax error while parsing value - invalid literal; last read: 'x'").
        std::string why = e.what();
        if (auto k = why.find(": "); k != std::string::npos) why = why.substr(k + 2);
        return invalid_json("the request body is not valid JSON at byte offset " +
                            std::to_string(e.byte) + ": " + why);
    }
    if (!j.is_object())
        return invalid_json("the request body must be a JSON object, got " + json_type_name(j));
    return j;
}

namespace {

constexpr int64_t kMaxTokensCap = std::numeric_limits<int32_t>::max();

// response_format (OpenAI's field; accepted by both APIs, as vLLM and llama.cpp's server do):
// text, json_object or json_schema, into the request's one grammar.
void read_response_format(FieldReader& r, CompletionRequest& out) {
    if (const json* f = r.find("response_format")) {
        const std::string p = r.path_of("response_format");
        if (!f->is_object()) {
            r.fail(wrong_type(p, "an object", *f));
        } else {
            FieldReader fr(*f, p);
            std::string type;
            if (!fr.get_string("type", type) && !fr.error())
                fr.fail(invalid_value(fr.path_of("type"), "is required"));
            std::string gbnf;
            if (fr.error() || type == "text") {
            } else if (type == "json_object") {
                gbnf = json_object_gbnf();
            } else if (type == "json_schema") {
                // {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}
                const json* js = fr.find("json_schema");
                const std::string jp = fr.path_of("json_schema");
                if (!js) {
                    fr.fail(invalid_value(jp, "is required when type is 'json_schema'"));
                } else if (!js->is_object()) {
                    fr.fail(wrong_type(jp, "an object", *js));
                } else {
                    FieldReader jr(*js, jp);
                    std::string name;
                    bool strict = false;
                    jr.get_string("name", name);
                    jr.get_bool("strict", strict);
                    const json* schema = jr.find("schema");
                    if (!jr.error()) {
                        // No schema: any JSON value (OpenAI's reading of a missing schema).
                        auto g = json_schema_to_gbnf(schema ? *schema : json::object(),
                                                     jr.path_of("schema"));
                        if (!g.ok())
                            jr.fail(g.error());
                        else
                            gbnf = std::move(g.value());
                    }
                    if (jr.error()) fr.fail(*jr.error());
                }
            } else {
                fr.fail(invalid_value(fr.path_of("type"),
                                      "'" + type +
                                          "' is not supported; expected 'text', 'json_object' or "
                                          "'json_schema'"));
            }
            if (fr.error()) {
                r.fail(*fr.error());
            } else if (!gbnf.empty()) {
                if (!out.grammar_param.empty())
                    r.fail(invalid_value(p, "cannot be combined with '" + out.grammar_param +
                                                "'; give one structured-output field"));
                out.grammar = std::move(gbnf);
                out.grammar_param = p;
            }
        }
    }
}

// Fields shared by both endpoints: model, n, sampling, seed, stop, stream, user.
void read_common(FieldReader& r, const engine::SamplerOptions& defaults,
                 const RequestLimits& limits, CompletionRequest& out) {
    out.sampling = defaults;
    out.has_model = r.get_string("model", out.model);
    int64_t i = 0;
    double d = 0;
    if (r.get_int("n", 1, limits.max_n, i)) out.n = static_cast<int32_t>(i);
    if (r.get_number("temperature", 0.0, 2.0, d)) out.sampling.temperature = static_cast<float>(d);
    // top_p 0 keeps only the most likely token (OpenAI's reading, and the sampler's: the
    // smallest best-first prefix reaching mass 0 is one token), as the CLI's --top-p 0.
    if (r.get_number("top_p", 0.0, 1.0, d)) out.sampling.top_p = static_cast<float>(d);
    // top_k: -1 or 0 turn it off (vLLM uses -1, llama.cpp 0).
    if (r.get_int("top_k", -1, 1 << 30, i)) out.sampling.top_k = i <= 0 ? 0 : static_cast<int>(i);
    if (r.get_number("min_p", 0.0, 1.0, d)) out.sampling.min_p = static_cast<float>(d);
    if (r.get_number("presence_penalty", -2.0, 2.0, d))
        out.sampling.presence_penalty = static_cast<float>(d);
    if (r.get_number("frequency_penalty", -2.0, 2.0, d))
        out.sampling.frequency_penalty = static_cast<float>(d);
    if (r.get_number("repetition_penalty", 0.01, 100.0, d))
        out.sampling.repeat_penalty = static_cast<float>(d);
    if (const json* s = r.find("seed")) {
        const auto v = s->is_number() ? as_integer(*s) : std::nullopt;
        if (s->is_number_unsigned())
            out.seed = s->get<uint64_t>();  // the whole unsigned 64-bit range
        else if (!v)
            r.fail(wrong_type(r.path_of("seed"), "an integer", *s));
        else
            out.seed = static_cast<uint64_t>(*v);  // negative seeds wrap, as in two's complement
    }
    if (const json* s = r.find("stop")) {
        const std::string p = r.path_of("stop");
        auto add = [&](const json& v, const std::string& path) {
            if (!v.is_string()) return r.fail(wrong_type(path, "a string", v));
            std::string str = v.get<std::string>();
            if (str.size() > limits.max_stop_bytes)
                return r.fail(invalid_value(
                    path, "is longer than " + std::to_string(limits.max_stop_bytes) + " bytes"));
            if (!str.empty()) out.stop.push_back(std::move(str));
        };
        if (s->is_string()) {
            add(*s, p);
        } else if (s->is_array()) {
            if (s->size() > static_cast<size_t>(limits.max_stop))
                r.fail(invalid_value(p, "has " + std::to_string(s->size()) +
                                            " stop strings; at most " +
                                            std::to_string(limits.max_stop) + " are allowed"));
            for (size_t k = 0; k < s->size(); ++k) add((*s)[k], path_index(p, k));
        } else {
            r.fail(wrong_type(p, "a string or an array of strings", *s));
        }
    }
    r.get_bool("stream", out.stream);
    if (const json* so = r.find("stream_options")) {
        const std::string p = r.path_of("stream_options");
        if (!so->is_object()) {
            r.fail(wrong_type(p, "an object", *so));
        } else {
            if (!out.stream) r.fail(invalid_value(p, "is only allowed when 'stream' is true"));
            FieldReader sr(*so, p);
            sr.get_bool("include_usage", out.include_usage);
            if (sr.error()) r.fail(*sr.error());
        }
    }
    r.get_string("user", out.user);
    r.get_bool("ignore_eos", out.ignore_eos);
    // Structured output fields of llama.cpp's server (grammar, json_schema) and vLLM's
    // (guided_grammar, guided_json): at most one, as GBNF.
    auto set_grammar = [&](const char* key, std::string gbnf) {
        if (!out.grammar_param.empty())
            return r.fail(invalid_value(r.path_of(key), "cannot be combined with '" +
                                                            out.grammar_param +
                                                            "'; give one structured-output field"));
        out.grammar = std::move(gbnf);
        out.grammar_param = r.path_of(key);
    };
    for (const char* key : {"grammar", "guided_grammar"}) {
        if (const json* g = r.find(key)) {
            if (!g->is_string())
                r.fail(wrong_type(r.path_of(key), "a string (a GBNF grammar)", *g));
            else if (!g->get<std::string>().empty())
                set_grammar(key, g->get<std::string>());
        }
    }
    for (const char* key : {"json_schema", "guided_json"}) {
        if (const json* g = r.find(key)) {
            json schema = *g;
            if (g->is_string()) {  // vLLM accepts the schema as JSON text too
                auto parsed = json::parse(g->get<std::string>(), nullptr, false);
                if (parsed.is_discarded()) {
                    r.fail(invalid_value(r.path_of(key), "is a string that is not valid JSON"));
                    continue;
                }
                schema = std::move(parsed);
            }
            auto gbnf = json_schema_to_gbnf(schema, r.path_of(key));
            if (!gbnf.ok())
                r.fail(gbnf.error());
            else
                set_grammar(key, std::move(gbnf.value()));
        }
    }
    // vLLM's guided_choice: the output is exactly one of the given strings.
    if (const json* gc = r.find("guided_choice")) {
        const std::string p = r.path_of("guided_choice");
        if (!gc->is_array() || gc->empty()) {
            r.fail(wrong_type(p, "a non-empty array of strings", *gc));
        } else {
            std::string alts;
            for (size_t i = 0; i < gc->size(); ++i) {
                const json& c = (*gc)[i];
                if (!c.is_string() || c.get<std::string>().empty()) {
                    r.fail(wrong_type(p + "[" + std::to_string(i) + "]", "a non-empty string", c));
                    alts.clear();
                    break;
                }
                alts += (alts.empty() ? "" : " | ") + gbnf_literal(c.get<std::string>());
            }
            if (!alts.empty()) set_grammar("guided_choice", "root ::= " + alts);
        }
    }
    read_response_format(r, out);
    // Known fields this server does not implement: refuse rather than ignore them.
    if (r.find("guided_regex"))
        r.fail(invalid_value(r.path_of("guided_regex"),
                             "is not supported by this server; use guided_json, guided_grammar, "
                             "guided_choice or response_format"));
    if (const json* lb = r.find("logit_bias")) {
        if (!lb->is_object())
            r.fail(wrong_type(r.path_of("logit_bias"), "an object", *lb));
        else if (!lb->empty())
            r.fail(invalid_value(r.path_of("logit_bias"), "is not supported by this server"));
    }
}

// messages[i].content: a string, text parts, or null (assistant turns).
void read_content(FieldReader& r, const json& msg, const std::string& mpath,
                  const std::string& role, std::string& out) {
    const std::string p = path_join(mpath, "content");
    auto it = msg.find("content");
    if (it == msg.end() || it->is_null()) {
        if (role != "assistant")
            r.fail(invalid_value(p, "is required for a '" + role + "' message"));
        return;
    }
    if (it->is_string()) {
        out = it->get<std::string>();
        return;
    }
    if (!it->is_array()) return r.fail(wrong_type(p, "a string or an array of content parts", *it));
    for (size_t k = 0; k < it->size(); ++k) {
        const json& part = (*it)[k];
        const std::string pp = path_index(p, k);
        if (!part.is_object()) return r.fail(wrong_type(pp, "an object", part));
        FieldReader pr(part, pp);
        std::string type, text;
        if (!pr.get_string("type", type) && !pr.error())
            pr.fail(invalid_value(pr.path_of("type"), "is required"));
        if (!pr.error() && type != "text")
            pr.fail(invalid_value(pr.path_of("type"),
                                  "'" + type + "' is not supported; only 'text' parts are"));
        if (!pr.error() && !pr.get_string("text", text) && !pr.error())
            pr.fail(invalid_value(pr.path_of("text"), "is required"));
        if (pr.error()) return r.fail(*pr.error());
        out += text;
    }
}

}  // namespace

ApiResult<CompletionRequest> parse_chat_request(const json& body,
                                                const engine::SamplerOptions& defaults,
                                                const RequestLimits& limits) {
    CompletionRequest out;
    out.kind = ApiKind::Chat;
    FieldReader r(body, "");
    read_common(r, defaults, limits, out);

    int64_t i = 0;
    // max_completion_tokens replaces the deprecated max_tokens; either is accepted.
    if (r.get_int("max_completion_tokens", 1, kMaxTokensCap, i)) {
        out.max_tokens = static_cast<int32_t>(i);
        out.max_tokens_param = "max_completion_tokens";
    } else if (r.get_int("max_tokens", 1, kMaxTokensCap, i)) {
        out.max_tokens = static_cast<int32_t>(i);
        out.max_tokens_param = "max_tokens";
    }
    r.get_bool("logprobs", out.logprobs);
    if (r.get_int("top_logprobs", 0, limits.max_logprobs, i)) {
        out.top_logprobs = static_cast<int32_t>(i);
        if (!out.logprobs)
            r.fail(invalid_value(r.path_of("top_logprobs"), "requires 'logprobs' to be true"));
    }
    // chat_template_kwargs (vLLM, SGLang and llama.cpp's server): variables for the chat
    // template. enable_thinking (Qwen3-style templates) is read; other keys are ignored, as
    // unknown top-level fields are.
    if (const json* k = r.find("chat_template_kwargs")) {
        const std::string p = r.path_of("chat_template_kwargs");
        if (!k->is_object()) {
            r.fail(wrong_type(p, "an object", *k));
        } else {
            FieldReader kr(*k, p);
            bool think = false;
            if (kr.get_bool("enable_thinking", think)) out.enable_thinking = think;
            if (kr.error()) r.fail(*kr.error());
        }
    }
    {
        auto t = parse_tools(r.find("tools"), r.find("tool_choice"));
        if (!t.ok()) {
            r.fail(t.error());
        } else {
            out.tools = std::move(t.value());
            out.use_tools = !out.tools.names.empty() && out.tools.choice != ToolChoice::None;
        }
        // parallel_tool_calls false: at most one call (tool_calls.h).
        r.get_bool("parallel_tool_calls", out.tools.parallel);
    }
    const json* msgs = r.find("messages");
    if (!msgs) {
        if (!r.error()) r.fail(invalid_value("messages", "is required"));
    } else if (!msgs->is_array()) {
        r.fail(wrong_type("messages", "an array of messages", *msgs));
    } else if (msgs->empty()) {
        r.fail(invalid_value("messages", "must contain at least one message"));
    } else {
        for (size_t k = 0; k < msgs->size() && !r.error(); ++k) {
            const json& m = (*msgs)[k];
            const std::string mp = path_index("messages", k);
            if (!m.is_object()) {
                r.fail(wrong_type(mp, "an object", m));
                break;
            }
            FieldReader mr(m, mp);
            chat::Message msg;
            if (!mr.get_string("role", msg.role) && !mr.error())
                mr.fail(invalid_value(mr.path_of("role"), "is required"));
            if (mr.error()) {
                r.fail(*mr.error());
                break;
            }
            if (msg.role == "developer") msg.role = "system";  // OpenAI's newer name for it
            if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" &&
                msg.role != "tool") {
                r.fail(invalid_value(mr.path_of("role"),
                                     "unknown role '" + msg.role +
                                         "'; expected system, developer, user, assistant or tool"));
                break;
            }
            read_content(r, m, mp, msg.role, msg.content);
            // Tool calling history: an assistant turn's calls, a tool turn's id and name.
            if (auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null()) {
                if (msg.role != "assistant" || !tc->is_array())
                    r.fail(invalid_value(path_join(mp, "tool_calls"),
                                         "must be an array, on an assistant message"));
                else
                    msg.extra.emplace_back("tool_calls", tool_calls_value(*tc));
            }
            for (const char* key : {"tool_call_id", "name"}) {
                if (auto v = m.find(key); v != m.end() && !v->is_null()) {
                    if (!v->is_string())
                        r.fail(wrong_type(path_join(mp, key), "a string", *v));
                    else
                        msg.extra.emplace_back(key, json_to_template_value(*v));
                }
            }
            out.messages.push_back(std::move(msg));
        }
    }
    if (r.error()) return *r.error();
    return out;
}

ApiResult<CompletionRequest> parse_completion_request(const json& body,
                                                      const engine::SamplerOptions& defaults,
                                                      const RequestLimits& limits) {
    CompletionRequest out;
    out.kind = ApiKind::Completion;
    FieldReader r(body, "");
    read_common(r, defaults, limits, out);

    int64_t i = 0;
    if (r.get_int("max_tokens", 1, kMaxTokensCap, i)) {
        out.max_tokens = static_cast<int32_t>(i);
        out.max_tokens_param = "max_tokens";
    }
    // Completions' logprobs is the number of alternatives (0 = the chosen token's only).
    if (r.get_int("logprobs", 0, limits.max_logprobs, i)) {
        out.logprobs = true;
        out.top_logprobs = static_cast<int32_t>(i);
    }
    bool echo = false;
    if (r.get_bool("echo", echo) && echo)
        r.fail(invalid_value(r.path_of("echo"), "echo is not supported by this server"));
    std::string suffix;
    if (r.get_string("suffix", suffix) && !suffix.empty())
        r.fail(invalid_value(r.path_of("suffix"), "is not supported by this server"));
    if (r.get_int("best_of", 1, limits.max_n, i) && i != out.n)
        r.fail(invalid_value(r.path_of("best_of"),
                             "must equal n (best-of sampling is not supported)"));

    auto token_list = [&](const json& a, const std::string& path, PromptInput& p) {
        p.is_tokens = true;
        p.path = path;
        for (size_t k = 0; k < a.size(); ++k) {
            const auto v = a[k].is_number() ? as_integer(a[k]) : std::nullopt;
            if (!v) return r.fail(wrong_type(path_index(path, k), "a token id (integer)", a[k]));
            if (*v < 0 || *v > std::numeric_limits<int32_t>::max())
                return r.fail(invalid_value(path_index(path, k),
                                            "token id " + std::to_string(*v) + " is out of range"));
            p.tokens.push_back(static_cast<int32_t>(*v));
        }
    };
    const json* pr = r.find("prompt");
    if (!pr) {
        if (!r.error()) r.fail(invalid_value("prompt", "is required"));
    } else if (pr->is_string()) {
        out.prompts.push_back({false, pr->get<std::string>(), {}, "prompt"});
    } else if (pr->is_array()) {
        if (pr->empty()) {
            r.fail(invalid_value("prompt", "must not be empty"));
        } else if ((*pr)[0].is_number()) {
            PromptInput p;
            token_list(*pr, "prompt", p);
            out.prompts.push_back(std::move(p));
        } else {
            if (pr->size() > static_cast<size_t>(limits.max_prompts))
                r.fail(invalid_value("prompt",
                                     "has " + std::to_string(pr->size()) + " prompts; at most " +
                                         std::to_string(limits.max_prompts) + " are allowed"));
            for (size_t k = 0; k < pr->size() && !r.error(); ++k) {
                const json& e = (*pr)[k];
                const std::string path = path_index("prompt", k);
                if (e.is_string()) {
                    out.prompts.push_back({false, e.get<std::string>(), {}, path});
                } else if (e.is_array()) {
                    PromptInput p;
                    token_list(e, path, p);
                    out.prompts.push_back(std::move(p));
                } else {
                    r.fail(wrong_type(path, "a string or an array of token ids", e));
                }
            }
        }
    } else {
        r.fail(wrong_type("prompt", "a string, an array of strings or an array of token ids", *pr));
    }
    if (r.error()) return *r.error();
    return out;
}

}  // namespace zinc::server
