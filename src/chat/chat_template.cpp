// zinc/chat/chat_template.cpp — the public entry points: parse, render, apply (messages and
// standard variables as transformers passes them), the GGUF template lookup; and the boundary
// where the interpreter's internal TemplateError becomes a zinc::Error.
#include "chat/chat_template.h"

#include "chat/interpreter.h"
#include "chat/parser.h"
#include "gguf/gguf.h"

namespace zinc::chat {

namespace {

Error to_error(const std::string& name, const TemplateError& e) {
    std::string msg = name;
    if (e.pos.line > 0) msg += ":" + std::to_string(e.pos.line) + ":" + std::to_string(e.pos.col);
    msg += e.raised ? ": template raised an exception: " : ": ";
    // Keep errors on one line.
    for (char c : e.message) msg += (c == '\n' || c == '\r') ? ' ' : c;
    return make_error(std::move(msg));
}

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(std::string_view source, std::string name) {
    ChatTemplate t;
    t.name_ = std::move(name);
    try {
        t.root_ = parse_template(source);
    } catch (const TemplateError& e) {
        return to_error(t.name_, e);
    } catch (const std::bad_alloc&) {
        return make_error(t.name_ + ": out of memory while parsing the template");
    }
    return t;
}

Result<RenderedPrompt> ChatTemplate::render_prompt(
    const std::vector<std::pair<std::string, Value>>& vars, const RenderOptions& opt) const {
    if (!root_) return make_error(name_ + ": template was not parsed");
    DictData context;
    for (const auto& [k, v] : vars) context.set(Value::string(k), v);
    RenderLimits limits;
    limits.max_steps = opt.max_steps;
    limits.max_output_bytes = opt.max_output_bytes;
    try {
        Interpreter in(context, opt.now_unix, limits);
        TaintedText t = in.render(*root_);
        return RenderedPrompt{std::move(t.text_mut()), std::move(t.spans_mut())};
    } catch (const TemplateError& e) {
        return to_error(name_, e);
    } catch (const std::bad_alloc&) {
        return make_error(name_ + ": out of memory while rendering the template");
    }
}

Result<std::string> ChatTemplate::render(const std::vector<std::pair<std::string, Value>>& vars,
                                         const RenderOptions& opt) const {
    auto r = render_prompt(vars, opt);
    if (!r) return r.error();
    return std::move(r.value().text);
}

Value messages_value(const std::vector<Message>& messages) {
    std::vector<Value> list;
    list.reserve(messages.size());
    for (const auto& m : messages) {
        std::vector<std::pair<Value, Value>> items = {
            {Value::string("role"), Value::data_string(m.role)},
            {Value::string("content"), Value::data_string(m.content)}};
        for (const auto& [k, v] : m.extra) items.emplace_back(Value::string(k), mark_data(v));
        list.push_back(Value::dict(std::move(items)));
    }
    return Value::list(std::move(list));
}

Result<RenderedPrompt> ChatTemplate::apply_prompt(const std::vector<Message>& messages,
                                                  const ApplyOptions& opt) const {
    std::vector<std::pair<std::string, Value>> vars;
    vars.emplace_back("messages", messages_value(messages));
    vars.emplace_back("tools", Value::none());
    vars.emplace_back("documents", Value::none());
    vars.emplace_back("add_generation_prompt", Value::boolean(opt.add_generation_prompt));
    vars.emplace_back("bos_token", Value::string(opt.bos_token));
    vars.emplace_back("eos_token", Value::string(opt.eos_token));
    if (opt.enable_thinking)
        vars.emplace_back("enable_thinking", Value::boolean(*opt.enable_thinking));
    for (const auto& kv : opt.extra_vars) vars.push_back(kv);
    return render_prompt(vars, opt.render);
}

Result<std::string> ChatTemplate::apply(const std::vector<Message>& messages,
                                        const ApplyOptions& opt) const {
    auto r = apply_prompt(messages, opt);
    if (!r) return r.error();
    return std::move(r.value().text);
}

Result<TemplateSource> template_from_gguf(const gguf::File& file) {
    auto s = file.get_string("tokenizer.chat_template");
    if (!s.ok()) return s.error();
    if (s.value() && !s.value()->empty()) return TemplateSource{std::string(*s.value()), false};
    return TemplateSource{std::string(fallback_chatml_template()), true};
}

}  // namespace zinc::chat
