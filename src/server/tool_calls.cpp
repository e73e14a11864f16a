// zinc/server/tool_calls.cpp — see tool_calls.h.
#include "server/tool_calls.h"

#include <set>

#include "server/json_fields.h"
#include "server/json_schema_grammar.h"
#include "server/tool_call_stream.h"

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
            bool strict = false;
            if (auto st = fn->find("strict"); st != fn->end() && !st->is_null()) {
                if (!st->is_boolean()) return wrong_type(path_join(fp, "strict"), "a boolean", *st);
                strict = st->get<bool>();
            }
            t.names.push_back(n);
            t.strict.push_back(strict);
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

ApiResult<std::string> tool_call_grammar(const ToolsRequest& t, ToolFormat f) {
    const ToolFormatSpec& spec = tool_format_spec(f);
    const SchemaSyntax syntax =
        spec.head == CallHead::Gemma4 ? SchemaSyntax::Gemma4 : SchemaSyntax::Json;
    std::string rules, calls;
    for (size_t i = 0; i < t.tools.size(); ++i) {
        const json& fn = t.tools[i]["function"];
        const std::string& name = t.names[i];
        if (t.choice == ToolChoice::Named && name != t.named) continue;
        json params = fn.value("parameters", json::object());
        if (params.is_null()) params = json::object();
        // Gemma 4's arguments are a dictionary (its call's head ends at the `{`).
        if (syntax == SchemaSyntax::Gemma4 && params.empty()) params = {{"type", "object"}};
        const std::string p =
            path_join(path_join(path_index("tools", i), "function"), "parameters");
        const std::string args = "args" + std::to_string(i);
        auto g = json_schema_rules(params, p, args, "t" + std::to_string(i) + "-", syntax);
        if (g.ok()) {
            rules += g.value();
        } else if (t.choice == ToolChoice::Auto && !t.strict[i]) {
            // auto: a call the model may or may not make; a schema this server cannot enforce
            // leaves that tool's arguments any object, as before auto calls were constrained.
            // A strict tool asked for its schema: that stays a 400.
            rules += args + " ::= object\n";
        } else {
            return g.error();
        }
        calls += (calls.empty() ? "" : " | ") + std::string("call") + std::to_string(i);
        if (spec.head == CallHead::Harmony) {
            // `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS`, as
            // gpt-oss writes a call (its `<|call|>` ends the generation).
            rules += "call" + std::to_string(i) + " ::= " +
                     gbnf_literal(std::string(spec.open) + "commentary to=functions." + name +
                                  " <|constrain|>json<|message|>") +
                     " " + args + "\n";
            continue;
        }
        if (spec.head == CallHead::Gemma4) {  // `call:NAME{key:...}`, as Gemma 4 writes a call
            rules += "call" + std::to_string(i) + " ::= " + gbnf_literal("call:" + name) + " " +
                     args + "\n";
            continue;
        }
        rules += "call" + std::to_string(i) + " ::= \"{\" ws " + gbnf_literal("\"name\"") +
                 " ws \":\" ws " + gbnf_literal(json(name).dump()) + " ws \",\" ws " +
                 gbnf_literal(json(std::string(spec.arguments_key)).dump()) + " ws \":\" ws " +
                 args + " ws \"}\"\n";
    }
    // One call or (required, auto) up to eight, each in the format's block markers; auto
    // replies may also be bare calls where the format has them (they start at the reply's start:
    // tool_call_triggers).
    const bool several =
        t.choice != ToolChoice::Named && t.parallel && !spec.grammar_separator.empty();
    auto repeated = [&](const std::string& x) {
        return several ? x + " (" + std::string(spec.grammar_separator) + " " + x + "){0,7}" : x;
    };
    std::string root = "root ::= " + repeated("block");
    if (t.choice == ToolChoice::Auto && spec.bare_calls && !spec.open.empty())
        root += " | " + repeated("call");
    root += "\nblock ::= ";
    if (spec.open.empty() || spec.head == CallHead::Harmony)
        root += "call\n";
    else if (spec.head == CallHead::Gemma4)  // blocks back to back, no newlines
        root += gbnf_literal(std::string(spec.open)) + " call " +
                gbnf_literal(std::string(spec.close)) + "\n";
    else
        root += gbnf_literal(std::string(spec.open) + "\n") + " call " +
                gbnf_literal("\n" + std::string(spec.close)) + "\n";
    return root + "call ::= " + calls + "\n" + rules + json_primitives_gbnf(syntax);
}

std::vector<engine::GrammarTrigger> tool_call_triggers(const ToolsRequest& t, ToolFormat f) {
    const ToolFormatSpec& spec = tool_format_spec(f);
    std::vector<engine::GrammarTrigger> out;
    if (!spec.lazy_trigger.empty()) out.push_back({std::string(spec.lazy_trigger), false});
    if (spec.bare_calls && spec.head == CallHead::JsonObject)
        for (const std::string& name : t.names)  // names need no JSON escapes (parse_tools)
            for (const char* head :
                 {"{\"name\": \"", "{\"name\":\"", "{\n  \"name\": \"", "{\n    \"name\": \""})
                out.push_back({head + name + "\"", true});
    return out;
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

const chat::Value* extra_of(const chat::Message& m, std::string_view key) {
    for (const auto& [k, v] : m.extra)
        if (k == key) return &v;
    return nullptr;
}

bool has_calls(const chat::Message& m) {
    const chat::Value* tc = extra_of(m, "tool_calls");
    return m.role == "assistant" && tc && tc->is_list() && !tc->list_data().items.empty();
}

// The function name of call `i` of a tool_calls value ("" when there is none).
std::string call_name(const chat::Value& calls, size_t i) {
    const auto& items = calls.list_data().items;
    if (i >= items.size() || !items[i].is_dict()) return "";
    const chat::Value* fn = items[i].dict_data().find("function");
    if (!fn || !fn->is_dict()) return "";
    const chat::Value* name = fn->dict_data().find("name");
    return name && name->is_string() ? name->str() : "";
}

}  // namespace

std::vector<chat::Message> fold_tool_turns(const std::vector<chat::Message>& messages) {
    std::vector<chat::Message> out;
    for (size_t i = 0; i < messages.size();) {
        const chat::Message& m = messages[i];
        if (!has_calls(m)) {
            out.push_back(m);
            ++i;
            continue;
        }
        const chat::Value& calls = *extra_of(m, "tool_calls");
        chat::Message turn("assistant", "");
        turn.extra.emplace_back("tool_calls", calls);
        std::vector<chat::Value> responses;
        for (++i; i < messages.size() && messages[i].role == "tool"; ++i) {
            const chat::Message& t = messages[i];
            std::string name = call_name(calls, responses.size());
            if (const chat::Value* id = extra_of(t, "tool_call_id"); name.empty() && id)
                name = id->str();
            const json parsed = json::parse(t.content, nullptr, false);
            chat::Value response = parsed.is_discarded() ? chat::Value::data_string(t.content)
                                                         : json_to_template_value(parsed);
            responses.push_back(
                chat::Value::dict({{chat::Value::string("name"), chat::Value::data_string(name)},
                                   {chat::Value::string("response"), response}}));
        }
        if (!responses.empty())
            turn.extra.emplace_back("tool_responses", chat::Value::list(std::move(responses)));
        if (i < messages.size() && messages[i].role == "assistant" && !has_calls(messages[i]) &&
            !messages[i].content.empty())
            turn.content = messages[i++].content;
        out.push_back(std::move(turn));
    }
    return out;
}

ParsedReply parse_tool_calls(const std::string& text, ToolFormat f,
                             const std::vector<std::string>& names, bool parallel) {
    ParsedReply r;
    ToolCallStream stream(f, names, parallel);
    auto add = [&](std::vector<ToolStreamPiece> pieces) {
        for (auto& p : pieces) {
            if (p.call < 0) {
                r.content += p.text;
                continue;
            }
            if (p.starts_call) r.calls.push_back({std::move(p.name), ""});
            r.calls[static_cast<size_t>(p.call)].arguments += p.text;
        }
    };
    add(stream.feed(text));
    add(stream.finish());
    r.truncated = stream.truncated();
    return r;
}

}  // namespace zinc::server
