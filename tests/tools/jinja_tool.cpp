// jinja_tool — renders Jinja chat templates with zinc's interpreter, for the parity tests.
//
//   jinja_tool TEMPLATE_FILE [CONTEXT_JSON_FILE] [--now UNIX_SECONDS]
//       Renders one template. The context (a JSON object of variables) comes from the file or,
//       without one, from stdin. Prints the output; on error prints the error line to stderr and
//       exits with status 2.
//   jinja_tool --batch
//       Reads a JSON array of cases {"template": SOURCE, "context": {...}, "now": N?} from stdin
//       and writes a JSON array of results {"ok": true, "output": TEXT} or
//       {"ok": false, "error": LINE} to stdout (one process for a whole corpus).
//   jinja_tool --gguf MODEL.gguf
//       Prints the model's chat template (or the ChatML fallback) and whether it is the fallback
//       on stderr.
//
// JSON objects keep their key order (Python dicts are insertion-ordered too); integers stay
// integers and numbers with a fraction or exponent become floats, as json.loads does.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "chat/chat_template.h"
#include "gguf/gguf.h"

using zinc::chat::Value;
using json = nlohmann::ordered_json;

namespace {

constexpr int kMaxJsonDepth = 200;

Value to_value(const json& j, int depth) {
    if (depth > kMaxJsonDepth) throw std::runtime_error("context JSON nested too deeply");
    switch (j.type()) {
        case json::value_t::null: return Value::none();
        case json::value_t::boolean: return Value::boolean(j.get<bool>());
        case json::value_t::number_integer: return Value::integer(j.get<int64_t>());
        case json::value_t::number_unsigned: {
            const auto u = j.get<uint64_t>();
            if (u > static_cast<uint64_t>(INT64_MAX)) throw std::runtime_error("integer too large");
            return Value::integer(static_cast<int64_t>(u));
        }
        case json::value_t::number_float: return Value::number(j.get<double>());
        case json::value_t::string: return Value::string(j.get<std::string>());
        case json::value_t::array: {
            std::vector<Value> items;
            for (const auto& x : j) items.push_back(to_value(x, depth + 1));
            return Value::list(std::move(items));
        }
        case json::value_t::object: {
            Value d = Value::dict();
            for (auto it = j.begin(); it != j.end(); ++it) {
                d.dict_data().set(Value::string(it.key()), to_value(it.value(), depth + 1));
            }
            return d;
        }
        default: throw std::runtime_error("unsupported JSON value");
    }
}

std::vector<std::pair<std::string, Value>> to_vars(const json& ctx) {
    std::vector<std::pair<std::string, Value>> vars;
    if (!ctx.is_object()) throw std::runtime_error("context must be a JSON object");
    for (auto it = ctx.begin(); it != ctx.end(); ++it) vars.emplace_back(it.key(), to_value(it.value(), 0));
    return vars;
}

// Returns {ok, text-or-error}.
std::pair<bool, std::string> render_one(const std::string& source, const json& ctx,
                                        std::optional<int64_t> now) {
    auto t = zinc::chat::ChatTemplate::parse(source, "template");
    if (!t.ok()) return {false, t.error().message};
    zinc::chat::RenderOptions opt;
    opt.now_unix = now;
    auto r = t->render(to_vars(ctx), opt);
    if (!r.ok()) return {false, r.error().message};
    return {true, r.value()};
}

std::string read_all(std::istream& in) {
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc >= 2 && std::string(argv[1]) == "--batch") {
            const json cases = json::parse(read_all(std::cin));
            json results = json::array();
            for (const auto& c : cases) {
                std::optional<int64_t> now;
                if (c.contains("now") && !c["now"].is_null()) now = c["now"].get<int64_t>();
                const json ctx = c.contains("context") ? c["context"] : json::object();
                auto [ok, text] = render_one(c.at("template").get<std::string>(), ctx, now);
                json r;
                r["ok"] = ok;
                r[ok ? "output" : "error"] = text;
                results.push_back(r);
            }
            // Invalid UTF-8 in outputs is replaced rather than aborting the dump.
            std::cout << results.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
            return 0;
        }
        if (argc >= 3 && std::string(argv[1]) == "--gguf") {
            auto f = zinc::gguf::File::open(argv[2]);
            if (!f.ok()) {
                std::fprintf(stderr, "%s\n", f.error().message.c_str());
                return 2;
            }
            auto src = zinc::chat::template_from_gguf(*f.value());
            if (!src.ok()) {
                std::fprintf(stderr, "%s\n", src.error().message.c_str());
                return 2;
            }
            std::cout << src->text;
            std::fprintf(stderr, "fallback=%d\n", src->is_fallback ? 1 : 0);
            return 0;
        }
        if (argc < 2) {
            std::fprintf(stderr, "usage: jinja_tool TEMPLATE [CONTEXT.json] [--now N] | --batch | --gguf FILE\n");
            return 2;
        }
        std::optional<int64_t> now;
        std::string ctx_path;
        for (int i = 2; i < argc; i++) {
            const std::string a = argv[i];
            if (a == "--now" && i + 1 < argc) now = std::stoll(argv[++i]);
            else ctx_path = a;
        }
        std::ifstream tf(argv[1], std::ios::binary);
        if (!tf) {
            std::fprintf(stderr, "cannot read template %s\n", argv[1]);
            return 2;
        }
        const std::string source = read_all(tf);
        json ctx = json::object();
        if (!ctx_path.empty()) {
            std::ifstream cf(ctx_path, std::ios::binary);
            if (!cf) {
                std::fprintf(stderr, "cannot read context %s\n", ctx_path.c_str());
                return 2;
            }
            ctx = json::parse(read_all(cf));
        } else {
            const std::string in = read_all(std::cin);
            if (!in.empty()) ctx = json::parse(in);
        }
        auto [ok, text] = render_one(source, ctx, now);
        if (!ok) {
            std::fprintf(stderr, "%s\n", text.c_str());
            return 2;
        }
        std::fwrite(text.data(), 1, text.size(), stdout);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "jinja_tool: %s\n", e.what());
        return 2;
    }
}
