// zinc/server/tool_calls.cpp — see tool_calls.h.
#include "server/tool_calls.h"

#include <set>

#include "server/json_fields.h"
#include "server/json_schema_grammar.h"

namespace zinc::server {

using nlohmann::json;

ApiResult<ToolsRequest> parse_tools(const json* tools, const json* choice) {
    ToolsRequest t;
    if (tools) {
        if (!tools->is_array()) return wrong_type("tools", "an array of tools", *tools);
        std::set<std::string> seen;
        for (size_t i = 0; i < tools->size(); ++i) {
            const json& tool = (*tools)[i];
            const std::string p = path_index("tools", i);
            if (!tool.is_object()) return wrong_type(p, "an object", tool);
            auto ty = tool.find("type");
            if (ty == tool.end() || !ty->is_string() || *ty != "function")
                return invalid_value(path_join(p, "type"), "must be 'function'");
            auto fn = tool.find("function");
            const std::string fp = path_join(p, "function");
            if (fn == tool.end() || !fn->is_object())
                return invalid_value(fp, "is required (an object with 'name')");
            auto name = fn->find("name");
            if (name == fn->end() || !name->is_string() || name->get<std::string>().empty())
                return invalid_value(path_join(fp, "name"), "is required (a non-empty string)");
            const std::string n = name->get<std::string>();
            for (char c : n)
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-' || c == '.'))
                    return invalid_value(
                        path_join(fp, "name"),
                        "'" + n + "' has a character other than a-z, A-Z, 0-9, _, - and .");
            if (!seen.insert(n).second)
                return invalid_value(path_join(fp, "name"), "'" + n + "' names two tools");
            if (auto pr = fn->find("parameters");
                pr != fn->end() && !pr->is_object() && !pr->is_null())
                return wrong_type(path_join(fp, "parameters"), "an object (a JSON Schema)", *pr);
            t.names.push_back(n);
        }
        t.tools = *tools;
    }
    if (choice) {
        if (choice->is_string()) {
            const std::string c = choice->get<std::string>();
            if (c == "none") {
                t.choice = ToolChoice::None;
            } else if (c == "auto") {
                t.choice = ToolChoice::Auto;
            } else if (c == "required") {
                t.choice = ToolChoice::Required;
            } else {
                return invalid_value("tool_choice", "'" + c +
                                                        "' is not a tool choice; expected 'none', "
                                                        "'auto', 'required' or a named function");
            }
        } else if (choice->is_object()) {
            auto fn = choice->find("function");
            if (fn == choice->end() || !fn->is_object() || !fn->contains("name") ||
                !(*fn)["name"].is_string())
                return invalid_value("tool_choice.function.name", "is required");
            t.choice = ToolChoice::Named;
            t.named = (*fn)["name"].get<std::string>();
            bool found = false;
            for (const auto& n : t.names) found = found || n == t.named;
            if (!found)
                return invalid_value("tool_choice.function.name",
                                     "'" + t.named + "' is not one of the request's tools");
        } else {
            return wrong_type("tool_choice", "a string or an object", *choice);
        }
        if (t.names.empty() && t.choice != ToolChoice::None && t.choice != ToolChoice::Auto)
            return invalid_value("tool_choice", "needs 'tools'");
    }
    return t;
}

ToolFormat tool_format_for_template(const std::string& src) {
    return src.find("<tool_call>") != std::string::npos ? ToolFormat::Hermes : ToolFormat::Json;
}

ApiResult<std::string> tool_call_grammar(const ToolsRequest& t, ToolFormat f) {
    std::string rules, calls;
    for (size_t i = 0; i < t.tools.size(); ++i) {
        const json& fn = t.tools[i]["function"];
        const std::string& name = t.names[i];
        if (t.choice == ToolChoice::Named && name != t.named) continue;
        json params = fn.value("parameters", json::object());
        if (params.is_null()) params = json::object();
        const std::string p =
            path_join(path_join(path_index("tools", i), "function"), "parameters");
        const std::string args = "args" + std::to_string(i);
        auto g = json_schema_rules(params, p, args, "t" + std::to_string(i) + "-");
        if (!g.ok()) return g.error();
        rules += g.value();
        const char* key = f == ToolFormat::Hermes ? "arguments" : "parameters";
        calls += (calls.empty() ? "" : " | ") + std::string("call") + std::to_string(i);
        rules += "call" + std::to_string(i) + " ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws \"\\\"" +
                 name + "\\\"\" ws \",\" ws \"\\\"" + key + "\\\"\" ws \":\" ws " + args +
                 " ws \"}\"\n";
    }
    std::string root;
    if (f == ToolFormat::Hermes) {
        root = "root ::= block";
        if (t.choice == ToolChoice::Required) root += " (\"\\n\" block){0,7}";
        root += "\nblock ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n";
    } else {
        root = "root ::= call";
        if (t.choice == ToolChoice::Required) root += " (\";\" ws call){0,7}";
        root += "\n";
    }
    return root + "call ::= " + calls + "\n" + rules + json_primitives_gbnf();
}

chat::Value json_to_template_value(const json& j) {
    switch (j.type()) {
        case json::value_t::null:
            return chat::Value::none();
        case json::value_t::boolean:
            return chat::Value::boolean(j.get<bool>());
        case json::value_t::number_integer:
            return chat::Value::integer(j.get<int64_t>());
        case json::value_t::number_unsigned:
            return chat::Value::integer(static_cast<int64_t>(j.get<uint64_t>()));
        case json::value_t::number_float:
            return chat::Value::number(j.get<double>());
        case json::value_t::string:
            return chat::Value::data_string(j.get<std::string>());
        case json::value_t::array: {
            std::vector<chat::Value> items;
            for (const auto& e : j) items.push_back(json_to_template_value(e));
            return chat::Value::list(std::move(items));
        }
        case json::value_t::object: {
            std::vector<std::pair<chat::Value, chat::Value>> items;
            for (const auto& [k, v] : j.items())
                items.emplace_back(chat::Value::data_string(k), json_to_template_value(v));
            return chat::Value::dict(std::move(items));
        }
        default:
            return chat::Value::none();
    }
}

chat::Value tool_calls_value(const json& calls) {
    json c = calls;
    for (auto& call : c) {
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
            continue;
        json& fn = call["function"];
        if (fn.contains("arguments") && fn["arguments"].is_string()) {
            json a = json::parse(fn["arguments"].get<std::string>(), nullptr, false);
            if (!a.is_discarded()) fn["arguments"] = std::move(a);
        }
    }
    return json_to_template_value(c);
}

namespace {

std::string trim(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    const size_t e = s.find_last_not_of(" \t\r\n");
    return s.substr(b, e - b + 1);
}

// {"name": ..., "arguments"/"parameters": ...} naming one of `names`, as a call.
std::optional<ParsedCall> as_call(const std::string& text, const std::vector<std::string>& names) {
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    auto n = j.find("name");
    if (n == j.end() || !n->is_string()) return std::nullopt;
    bool known = false;
    for (const auto& k : names) known = known || k == n->get<std::string>();
    if (!known) return std::nullopt;
    auto a = j.find("arguments");
    if (a == j.end()) a = j.find("parameters");
    ParsedCall c;
    c.name = n->get<std::string>();
    if (a == j.end() || a->is_null())
        c.arguments = "{}";
    else if (a->is_string())
        c.arguments = a->get<std::string>();
    else
        c.arguments = a->dump();
    return c;
}

}  // namespace

ParsedReply parse_tool_calls(const std::string& text, ToolFormat f,
                             const std::vector<std::string>& names) {
    ParsedReply r;
    if (f == ToolFormat::Hermes) {
        static const std::string open = "<tool_call>", close = "</tool_call>";
        size_t pos = 0;
        std::string rest;
        while (true) {
            const size_t b = text.find(open, pos);
            if (b == std::string::npos) {
                rest += text.substr(pos);
                break;
            }
            const size_t inner = b + open.size();
            size_t e = text.find(close, inner);
            const size_t end = e == std::string::npos ? text.size() : e + close.size();
            auto call = as_call(
                trim(text.substr(inner, (e == std::string::npos ? text.size() : e) - inner)),
                names);
            if (call) {
                rest += text.substr(pos, b - pos);
                r.calls.push_back(std::move(*call));
            } else {
                rest += text.substr(pos, end - pos);
            }
            pos = end;
            if (e == std::string::npos) break;
        }
        r.content = trim(rest);
        // A template's <tool_call> may be a control token, which the reply's text leaves out:
        // a reply without blocks may still be a bare call.
        if (!r.calls.empty()) return r;
    }
    // Json: the whole reply is one call, or several separated by ';' or newlines.
    const std::string t = trim(text);
    if (auto c = as_call(t, names)) {
        r.calls.push_back(std::move(*c));
        return r;
    }
    std::vector<ParsedCall> calls;
    size_t pos = 0;
    while (pos <= t.size()) {
        size_t e = t.find_first_of(";\n", pos);
        if (e == std::string::npos) e = t.size();
        const std::string part = trim(t.substr(pos, e - pos));
        if (!part.empty()) {
            auto c = as_call(part, names);
            if (!c) {
                calls.clear();
                break;
            }
            calls.push_back(std::move(*c));
        }
        pos = e + 1;
    }
    if (calls.empty()) {
        r.content = t;
    } else {
        r.calls = std::move(calls);
    }
    return r;
}

}  // namespace zinc::server
