// zinc/server/json_schema_grammar.cpp — see json_schema_grammar.h. One rule per schema node
// (named after its path), the JSON primitives as fixed rules, in the spirit of llama.cpp's
// json-schema-to-grammar.
#include "server/json_schema_grammar.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "server/json_fields.h"

namespace zinc::server {

using nlohmann::json;

namespace {

const char* kPrimitives = R"(ws ::= (" " | "\n" [ ]{0,16})?
string ::= "\"" char* "\""
char ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
integer ::= "-"? ("0" | [1-9] [0-9]{0,15})
number ::= integer ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ws (string ws ":" ws value ws ("," ws string ws ":" ws value ws)*)? "}"
array ::= "[" ws (value ws ("," ws value ws)*)? "]"
)";

// Gemma 4's syntax (gemma4_args.h): the same rule names, so the schema rules refer to them alike.
const char* kGemma4Primitives = R"(ws ::= (" " | "\n" [ ]{0,16})?
string ::= "<|\"|>" ([^<] | "<" [^|<])* "<|\"|>"
integer ::= "-"? ("0" | [1-9] [0-9]{0,15})
number ::= integer ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
key ::= [a-zA-Z_] [a-zA-Z0-9_.-]{0,63}
object ::= "{" ws (key ":" ws value ws ("," ws key ":" ws value ws)*)? "}"
array ::= "[" ws (value ws ("," ws value ws)*)? "]"
)";

constexpr std::string_view kGemma4Quote = "<|\"|>";

// Keys in the order of jinja2's `dictsort` (case-insensitive, stable).
std::vector<std::string> dictsort_keys(const json& obj) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : obj.items()) keys.push_back(k);
    auto folded = [](std::string k) {
        for (char& c : k)
            if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        return k;
    };
    std::stable_sort(keys.begin(), keys.end(), [&](const std::string& a, const std::string& b) {
        return folded(a) < folded(b);
    });
    return keys;
}

// Why `name` cannot be a bare Gemma 4 key ("" when it can).
std::string gemma4_bad_key(const std::string& name) {
    if (name.empty()) return "an empty property name";
    if (name[0] == '<') return "a property name starting with '<'";
    for (char c : name)
        if (c == ':' || c == '}' || c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r')
            return "the property name '" + name + "' (it has ':', '}', ',' or whitespace)";
    return "";
}

// `v` written in Gemma 4's syntax (its template's format_argument), or why it cannot be.
ApiResult<std::string> gemma4_text(const json& v, const std::string& path) {
    if (v.is_string()) {
        const std::string t = v.get<std::string>();
        if (t.find(kGemma4Quote) != std::string::npos)
            return invalid_value(path,
                                 "a string holding '<|\"|>' cannot be written in Gemma 4's "
                                 "tool-call syntax");
        return std::string(kGemma4Quote) + t + std::string(kGemma4Quote);
    }
    if (v.is_object()) {
        std::string out = "{";
        for (const std::string& k : dictsort_keys(v)) {
            if (const std::string bad = gemma4_bad_key(k); !bad.empty())
                return invalid_value(path, bad + " cannot be a key in Gemma 4's tool-call syntax");
            auto e = gemma4_text(v[k], path);
            if (!e.ok()) return e.error();
            out += (out.size() > 1 ? "," : "") + k + ":" + e.value();
        }
        return out + "}";
    }
    if (v.is_array()) {
        std::string out = "[";
        for (const auto& e : v) {
            auto t = gemma4_text(e, path);
            if (!t.ok()) return t.error();
            out += (out.size() > 1 ? "," : "") + t.value();
        }
        return out + "]";
    }
    return v.dump();
}

}  // namespace

std::string gbnf_literal(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7F) {
            static const char* hex = "0123456789ABCDEF";
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

namespace {

const std::set<std::string> kAnnotations = {"title",    "description", "default",  "examples",
                                            "$schema",  "$id",         "$comment", "deprecated",
                                            "readOnly", "writeOnly",   "$defs",    "definitions"};

class Converter {
  public:
    Converter(const json& root, std::string root_path, std::string prefix = "s",
              SchemaSyntax syntax = SchemaSyntax::Json)
        : root_(root),
          root_path_(std::move(root_path)),
          prefix_(std::move(prefix)),
          gemma4_(syntax == SchemaSyntax::Gemma4) {}

    /// The rules without the primitives, the root named `root_name`.
    ApiResult<std::string> run(const std::string& root_name) {
        auto r = visit(root_, root_path_, "root");
        if (!r.ok()) return r.error();
        std::string out = root_name + " ::= " + r.value() + "\n";
        for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
        return out;
    }

  private:
    const json& root_;
    std::string root_path_;
    std::string prefix_;
    bool gemma4_ = false;  // SchemaSyntax::Gemma4
    std::vector<std::pair<std::string, std::string>> rules_;
    std::map<std::string, std::string> refs_;  // "$ref" value -> rule name
    int n_ = 0;

    std::string add_rule(const std::string& hint, std::string body) {
        std::string name = prefix_ + std::to_string(n_++);
        for (char c : hint) {
            if (name.size() > 40) break;
            const bool word =
                (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
            name += word ? c : '-';
        }
        rules_.emplace_back(name, std::move(body));
        return name;
    }

    static ApiError unsupported(const std::string& path, const std::string& what) {
        return invalid_value(path, what);
    }

    // A const or enum value as a GBNF literal of its text in this syntax.
    ApiResult<std::string> literal(const json& v, const std::string& path) const {
        if (!gemma4_) return gbnf_literal(v.dump());
        auto t = gemma4_text(v, path);
        if (!t.ok()) return t.error();
        return gbnf_literal(t.value());
    }

    ApiResult<std::string> visit_ref(const std::string& ref, const std::string& path) {
        if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
        std::string key;
        const json* defs = nullptr;
        std::string defs_path;
        for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
            const std::string p = prefix;
            if (ref.rfind(p, 0) == 0) {
                key = ref.substr(p.size());
                const std::string field = p.substr(2, p.size() - 3);
                if (root_.is_object() && root_.contains(field)) {
                    defs = &root_[field];
                    defs_path = path_join(root_path_, field);
                }
            }
        }
        if (key.empty())
            return unsupported(path, "'" + ref +
                                         "' is not supported; expected a local reference "
                                         "'#/$defs/NAME' or '#/definitions/NAME'");
        if (!defs || !defs->is_object() || !defs->contains(key))
            return unsupported(path, "'" + ref + "' names no definition of this schema");
        // Named before visiting, so a recursive definition refers to itself.
        const std::string name = add_rule("ref-" + key, "");
        refs_[ref] = name;
        const size_t slot = rules_.size() - 1;
        auto body = visit((*defs)[key], path_join(defs_path, key), key);
        if (!body.ok()) return body.error();
        rules_[slot].second = body.value();
        return name;
    }

    ApiResult<std::string> visit_alternatives(const json& list, const std::string& path,
                                              const std::string& hint) {
        if (!list.is_array() || list.empty())
            return wrong_type(path, "a non-empty array of schemas", list);
        std::string body;
        for (size_t i = 0; i < list.size(); ++i) {
            auto r = visit(list[i], path_index(path, i), hint);
            if (!r.ok()) return r.error();
            body += (i ? " | " : "") + r.value();
        }
        return add_rule(hint, body);
    }

    ApiResult<std::string> visit(const json& s, const std::string& path, const std::string& hint) {
        if (s.is_boolean()) {
            if (s.get<bool>()) return std::string("value");
            return unsupported(path, "the schema 'false' accepts no value");
        }
        if (!s.is_object()) return wrong_type(path, "a schema (an object or a boolean)", s);
        for (const auto& [k, v] : s.items()) {
            static const std::set<std::string> known = {
                "type",     "properties", "required", "additionalProperties",
                "enum",     "const",      "anyOf",    "oneOf",
                "allOf",    "$ref",       "items",    "minItems",
                "maxItems", "minLength",  "maxLength"};
            if (!known.count(k) && !kAnnotations.count(k))
                return unsupported(
                    path_join(path, k),
                    "the JSON Schema keyword '" + k + "' is not supported for structured output");
        }
        if (auto it = s.find("$ref"); it != s.end()) {
            if (!it->is_string()) return wrong_type(path_join(path, "$ref"), "a string", *it);
            if (s.size() > 1)
                for (const auto& [k, v] : s.items())
                    if (k != "$ref" && !kAnnotations.count(k))
                        return unsupported(path_join(path, k), "is not supported next to '$ref'");
            return visit_ref(it->get<std::string>(), path_join(path, "$ref"));
        }
        if (auto it = s.find("const"); it != s.end()) {
            auto l = literal(*it, path_join(path, "const"));
            if (!l.ok()) return l.error();
            return add_rule(hint, l.value());
        }
        if (auto it = s.find("enum"); it != s.end()) {
            const std::string p = path_join(path, "enum");
            if (!it->is_array() || it->empty()) return wrong_type(p, "a non-empty array", *it);
            std::string body;
            for (size_t i = 0; i < it->size(); ++i) {
                auto l = literal((*it)[i], path_index(p, i));
                if (!l.ok()) return l.error();
                body += (i ? " | " : "") + l.value();
            }
            return add_rule(hint, body);
        }
        if (auto it = s.find("anyOf"); it != s.end())
            return visit_alternatives(*it, path_join(path, "anyOf"), hint);
        if (auto it = s.find("oneOf"); it != s.end())
            return visit_alternatives(*it, path_join(path, "oneOf"), hint);
        if (auto it = s.find("allOf"); it != s.end()) {
            if (!it->is_array() || it->size() != 1)
                return unsupported(path_join(path, "allOf"),
                                   "is supported only with exactly one schema");
            return visit((*it)[0], path_index(path_join(path, "allOf"), 0), hint);
        }
        auto t = s.find("type");
        if (t == s.end()) {
            if (s.contains("properties") || s.contains("additionalProperties") ||
                s.contains("required"))
                return visit_typed(s, "object", path, hint);
            if (s.contains("items")) return visit_typed(s, "array", path, hint);
            return std::string("value");
        }
        const std::string tp = path_join(path, "type");
        if (t->is_string()) return visit_typed(s, t->get<std::string>(), path, hint);
        if (!t->is_array() || t->empty())
            return wrong_type(tp, "a type name or a non-empty array of them", *t);
        std::string body;
        for (size_t i = 0; i < t->size(); ++i) {
            if (!(*t)[i].is_string()) return wrong_type(path_index(tp, i), "a type name", (*t)[i]);
            auto r = visit_typed(s, (*t)[i].get<std::string>(), path, hint);
            if (!r.ok()) return r.error();
            body += (i ? " | " : "") + r.value();
        }
        return add_rule(hint, body);
    }

    ApiResult<int64_t> count(const json& s, const char* key, const std::string& path,
                             int64_t dflt) {
        auto it = s.find(key);
        if (it == s.end()) return dflt;
        const auto v = as_integer(*it);
        if (!v || *v < 0 || *v > 10000)
            return wrong_type(path_join(path, key), "an integer from 0 to 10000", *it);
        return *v;
    }

    ApiResult<std::string> visit_typed(const json& s, const std::string& type,
                                       const std::string& path, const std::string& hint) {
        if (type == "null" || type == "boolean" || type == "integer" || type == "number")
            return type;
        if (type == "string") {
            auto lo = count(s, "minLength", path, 0);
            if (!lo.ok()) return lo.error();
            auto hi = count(s, "maxLength", path, -1);
            if (!hi.ok()) return hi.error();
            if (lo.value() == 0 && hi.value() < 0) return std::string("string");
            if (hi.value() >= 0 && hi.value() < lo.value())
                return unsupported(path_join(path, "maxLength"), "is below minLength");
            const std::string rep = "{" + std::to_string(lo.value()) + "," +
                                    (hi.value() >= 0 ? std::to_string(hi.value()) : "") + "}";
            if (gemma4_)  // no '<' at all: each character counts one
                return add_rule(hint, gbnf_literal(std::string(kGemma4Quote)) + " [^<]" + rep +
                                          " " + gbnf_literal(std::string(kGemma4Quote)));
            return add_rule(hint, "\"\\\"\" char" + rep + " \"\\\"\"");
        }
        if (type == "array") return visit_array(s, path, hint);
        if (type == "object") return visit_object(s, path, hint);
        return unsupported(
            path_join(path, "type"),
            "unknown type '" + type +
                "'; expected string, number, integer, boolean, null, object or array");
    }

    ApiResult<std::string> visit_array(const json& s, const std::string& path,
                                       const std::string& hint) {
        std::string item = "value";
        if (auto it = s.find("items"); it != s.end()) {
            if (it->is_array())
                return unsupported(path_join(path, "items"),
                                   "tuple 'items' (an array of schemas) is not supported");
            auto r = visit(*it, path_join(path, "items"), hint + "-item");
            if (!r.ok()) return r.error();
            item = r.value();
        }
        auto lo = count(s, "minItems", path, 0);
        if (!lo.ok()) return lo.error();
        auto hi = count(s, "maxItems", path, -1);
        if (!hi.ok()) return hi.error();
        if (hi.value() >= 0 && hi.value() < lo.value())
            return unsupported(path_join(path, "maxItems"), "is below minItems");
        const int64_t mn = lo.value(), mx = hi.value();
        if (mx == 0) return add_rule(hint, "\"[\" ws \"]\"");
        // item ("," item){mn-1, mx-1}, optional as a whole when mn == 0.
        const std::string more = "(\",\" ws " + item + " ws)";
        std::string rep = "{" + std::to_string(mn > 0 ? mn - 1 : 0) + "," +
                          (mx > 0 ? std::to_string(mx - 1) : "") + "}";
        std::string list = item + " ws " + more + rep;
        if (mn == 0) list = "(" + list + ")?";
        return add_rule(hint, "\"[\" ws " + list + " \"]\"");
    }

    ApiResult<std::string> visit_object(const json& s, const std::string& path,
                                        const std::string& hint) {
        const json* props = nullptr;
        if (auto it = s.find("properties"); it != s.end()) {
            if (!it->is_object())
                return wrong_type(path_join(path, "properties"), "an object", *it);
            props = &*it;
        }
        std::set<std::string> required;
        if (auto it = s.find("required"); it != s.end()) {
            const std::string rp = path_join(path, "required");
            if (!it->is_array()) return wrong_type(rp, "an array of property names", *it);
            for (size_t i = 0; i < it->size(); ++i) {
                const json& n = (*it)[i];
                if (!n.is_string()) return wrong_type(path_index(rp, i), "a property name", n);
                if (!props || !props->contains(n.get<std::string>()))
                    return unsupported(path_index(rp, i),
                                       "'" + n.get<std::string>() +
                                           "' is required but not in 'properties' (its schema "
                                           "is unknown)");
                required.insert(n.get<std::string>());
            }
        }
        const json* extra = nullptr;
        if (auto it = s.find("additionalProperties"); it != s.end()) {
            if (!it->is_boolean() && !it->is_object())
                return wrong_type(path_join(path, "additionalProperties"), "a boolean or a schema",
                                  *it);
            extra = &*it;
        }
        if (!props || props->empty()) {
            if (extra && extra->is_boolean() && !extra->get<bool>())
                return add_rule(hint, "\"{\" ws \"}\"");
            if (!extra || extra->is_boolean()) return std::string("object");
            auto v = visit(*extra, path_join(path, "additionalProperties"), hint + "-value");
            if (!v.ok()) return v.error();
            const std::string kv =
                (gemma4_ ? "key \":\" ws " : "string ws \":\" ws ") + v.value() + " ws";
            return add_rule(hint, "\"{\" ws (" + kv + " (\",\" ws " + kv + ")*)? \"}\"");
        }
        // One key: value rule per property, in declared order.
        std::vector<std::pair<std::string, bool>> kvs;
        const std::string pp = path_join(path, "properties");
        std::vector<std::string> names;
        if (gemma4_) {
            names = dictsort_keys(*props);
        } else {
            for (const auto& [name, sub] : props->items()) names.push_back(name);
        }
        for (const std::string& name : names) {
            const json& sub = (*props)[name];
            if (gemma4_)
                if (const std::string bad = gemma4_bad_key(name); !bad.empty())
                    return unsupported(path_join(pp, name),
                                       bad + " cannot be a key in Gemma 4's tool-call syntax");
            auto v = visit(sub, path_join(pp, name), hint + "-" + name);
            if (!v.ok()) return v.error();
            const std::string key = gemma4_ ? gbnf_literal(name + ":") + " ws "
                                            : gbnf_literal(json(name).dump()) + " ws \":\" ws ";
            kvs.emplace_back(add_rule(hint + "-" + name + "-kv", key + v.value()),
                             required.count(name) > 0);
        }
        // rest_i: properties i.. after one was written; first_i: properties i.. with none yet.
        const size_t n = kvs.size();
        std::vector<std::string> rest(n + 1), first(n + 1);
        rest[n] = "\"\"";
        first[n] = "\"\"";
        for (size_t i = n; i-- > 0;) {
            const std::string& kv = kvs[i].first;
            const bool req = kvs[i].second;
            rest[i] = add_rule(hint + "-rest", req ? "\",\" ws " + kv + " ws " + rest[i + 1]
                                                   : "(\",\" ws " + kv + " ws)? " + rest[i + 1]);
            first[i] =
                add_rule(hint + "-first", req ? kv + " ws " + rest[i + 1]
                                              : kv + " ws " + rest[i + 1] + " | " + first[i + 1]);
        }
        return add_rule(hint, "\"{\" ws " + first[0] + " \"}\"");
    }
};

}  // namespace

ApiResult<std::string> json_schema_to_gbnf(const json& schema, const std::string& path) {
    auto r = Converter(schema, path).run("root");
    if (!r.ok()) return r.error();
    return r.value() + kPrimitives;
}

ApiResult<std::string> json_schema_rules(const json& schema, const std::string& path,
                                         const std::string& root_name, const std::string& prefix,
                                         SchemaSyntax syntax) {
    return Converter(schema, path, prefix, syntax).run(root_name);
}

std::string json_primitives_gbnf(SchemaSyntax syntax) {
    return syntax == SchemaSyntax::Gemma4 ? kGemma4Primitives : kPrimitives;
}

std::string json_object_gbnf() {
    return std::string("root ::= object\n") + kPrimitives;
}

}  // namespace zinc::server
