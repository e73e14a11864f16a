// zinc/chat/parser.cpp — recursive-descent parser for the Jinja subset (grammar in parser.h).
#include "chat/parser.h"

#include <algorithm>
#include <functional>
#include <initializer_list>

#include "chat/builtins.h"
#include "chat/lexer.h"

namespace zinc::chat {

namespace {

constexpr int kMaxDepth = 200;  // nesting limit: deep input must fail cleanly, never overflow

class Parser {
public:
    explicit Parser(std::vector<Token> toks) : toks_(std::move(toks)) {}

    NodePtr parse() {
        auto root = std::make_unique<Node>(NodeKind::Template, SourcePos{1, 1});
        root->body = subparse({});
        if (cur().type != TokType::Eof) fail("unexpected " + describe_token(cur()), cur().pos);
        return root;
    }

private:
    // ---- token stream -------------------------------------------------------------------
    const Token& cur() const { return toks_[pos_]; }
    const Token& look(size_t n = 1) const {
        return toks_[std::min(pos_ + n, toks_.size() - 1)];
    }
    void next() {
        if (pos_ + 1 < toks_.size()) pos_++;
    }
    bool is_op(const char* op) const { return cur().type == TokType::Operator && cur().value == op; }
    bool is_name(const char* n) const { return cur().type == TokType::Name && cur().value == n; }
    bool skip_op(const char* op) {
        if (!is_op(op)) return false;
        next();
        return true;
    }
    bool skip_name(const char* n) {
        if (!is_name(n)) return false;
        next();
        return true;
    }
    [[noreturn]] void fail_expected(const std::string& what) const {
        fail("expected " + what + ", got " + describe_token(cur()), cur().pos);
    }
    void expect_op(const char* op) {
        if (!skip_op(op)) fail_expected(std::string("'") + op + "'");
    }
    std::string expect_name() {
        if (cur().type != TokType::Name) fail_expected("a name");
        std::string n = cur().value;
        next();
        return n;
    }
    void expect(TokType t) {
        if (cur().type != t) {
            Token want;
            want.type = t;
            fail_expected(describe_token(want));
        }
        next();
    }
    NodePtr make(NodeKind k, SourcePos p) { return std::make_unique<Node>(k, p); }

    struct DepthGuard {
        explicit DepthGuard(Parser& p) : p_(p) {
            if (++p_.depth_ > kMaxDepth) fail("template nested too deeply", p_.cur().pos);
        }
        ~DepthGuard() { p_.depth_--; }
        Parser& p_;
    };

    // ---- statements ---------------------------------------------------------------------
    using EndSet = std::vector<std::string>;

    std::vector<NodePtr> subparse(const EndSet& ends) {
        std::vector<NodePtr> body;
        DepthGuard guard(*this);
        while (cur().type != TokType::Eof) {
            const Token& t = cur();
            if (t.type == TokType::Data) {
                auto n = make(NodeKind::Data, t.pos);
                n->str = t.value;
                body.push_back(std::move(n));
                next();
            } else if (t.type == TokType::VarBegin) {
                next();
                auto n = make(NodeKind::Output, t.pos);
                n->a = parse_tuple(true, {}, false);
                expect(TokType::VarEnd);
                body.push_back(std::move(n));
            } else if (t.type == TokType::BlockBegin) {
                next();
                if (cur().type == TokType::Name &&
                    std::find(ends.begin(), ends.end(), cur().value) != ends.end())
                    return body;
                body.push_back(parse_statement());
                expect(TokType::BlockEnd);
            } else {
                fail("unexpected " + describe_token(t), t.pos);
            }
        }
        return body;
    }

    // Parses "[:] %}" body up to one of `ends`; leaves the end name current unless `drop`.
    std::vector<NodePtr> parse_statements(const EndSet& ends, bool drop) {
        skip_op(":");
        expect(TokType::BlockEnd);
        auto body = subparse(ends);
        if (cur().type == TokType::Eof) {
            std::string want;
            for (const auto& e : ends) want += (want.empty() ? "'" : " or '") + e + "'";
            fail("unexpected end of template, expected " + want + " (the innermost open block is '" +
                     open_tags_.back() + "')",
                 cur().pos);
        }
        if (drop) next();
        return body;
    }

    NodePtr parse_statement() {
        const Token& t = cur();
        if (t.type != TokType::Name) fail("tag name expected", t.pos);
        const std::string tag = t.value;
        const SourcePos p = t.pos;
        open_tags_.push_back(tag);
        NodePtr n;
        if (tag == "if") n = parse_if();
        else if (tag == "for") n = parse_for();
        else if (tag == "set") n = parse_set();
        else if (tag == "macro") n = parse_macro();
        else if (tag == "call") n = parse_call_block();
        else if (tag == "filter") n = parse_filter_block();
        else if (tag == "with") n = parse_with();
        else if (tag == "print") n = parse_print();
        else if (tag == "generation") {
            next();
            n = make(NodeKind::Scope, p);
            n->body = parse_statements({"endgeneration"}, true);
        } else if (tag == "break" || tag == "continue") {
            if (loop_depth_ == 0) fail("'" + tag + "' outside loop", p);
            next();
            n = make(tag == "break" ? NodeKind::Break : NodeKind::Continue, p);
        } else if (tag == "block" || tag == "extends" || tag == "include" || tag == "import" ||
                   tag == "from" || tag == "autoescape") {
            fail("unsupported construct '{% " + tag + " %}' (chat templates are rendered alone)", p);
        } else {
            fail("unknown tag '" + tag + "'", p);
        }
        open_tags_.pop_back();
        return n;
    }

    NodePtr parse_if() {
        auto root = make(NodeKind::If, cur().pos);
        next();
        Node* node = root.get();
        while (true) {
            node->a = parse_tuple(false, {}, false);
            node->body = parse_statements({"elif", "else", "endif"}, false);
            const std::string which = cur().value;
            const SourcePos p = cur().pos;
            next();
            if (which == "elif") {
                auto elif = make(NodeKind::If, p);
                Node* raw = elif.get();
                node->orelse.push_back(std::move(elif));
                node = raw;
                continue;
            }
            if (which == "else") node->orelse = parse_statements({"endif"}, true);
            break;
        }
        return root;
    }

    NodePtr parse_for() {
        auto n = make(NodeKind::For, cur().pos);
        next();
        n->a = parse_assign_target(true, {"in"}, false);
        if (!skip_name("in")) fail_expected("'in'");
        n->b = parse_tuple(false, {"recursive"}, false);
        if (skip_name("if")) n->c = parse_expression(true);
        if (is_name("recursive")) fail("unsupported construct 'recursive' for loop", cur().pos);
        loop_depth_++;
        n->body = parse_statements({"endfor", "else"}, false);
        loop_depth_--;
        const bool has_else = cur().value == "else";
        next();
        if (has_else) n->orelse = parse_statements({"endfor"}, true);
        return n;
    }

    NodePtr parse_set() {
        const SourcePos p = cur().pos;
        next();
        NodePtr target = parse_assign_target(true, {}, true);
        if (skip_op("=")) {
            auto n = make(NodeKind::Set, p);
            n->a = std::move(target);
            n->b = parse_tuple(true, {}, false);
            return n;
        }
        auto n = make(NodeKind::SetBlock, p);
        n->a = std::move(target);
        n->b = parse_filter(nullptr, false);
        n->body = parse_statements({"endset"}, true);
        return n;
    }

    void parse_signature(Node& n) {
        expect_op("(");
        while (!is_op(")")) {
            if (!n.names.empty()) expect_op(",");
            n.names.push_back(expect_name());
            if (skip_op("=")) n.kw_values.push_back(parse_expression(true));
            else if (!n.kw_values.empty()) fail("non-default argument follows default argument", cur().pos);
        }
        expect_op(")");
    }

    NodePtr parse_macro() {
        auto n = make(NodeKind::Macro, cur().pos);
        next();
        n->str = expect_name();
        parse_signature(*n);
        const int saved = loop_depth_;
        loop_depth_ = 0;
        n->body = parse_statements({"endmacro"}, true);
        loop_depth_ = saved;
        return n;
    }

    NodePtr parse_call_block() {
        auto n = make(NodeKind::CallBlock, cur().pos);
        next();
        if (is_op("(")) parse_signature(*n);
        n->a = parse_expression(true);
        if (n->a->kind != NodeKind::Call) fail("expected call", n->pos);
        const int saved = loop_depth_;
        loop_depth_ = 0;
        n->body = parse_statements({"endcall"}, true);
        loop_depth_ = saved;
        return n;
    }

    NodePtr parse_filter_block() {
        auto n = make(NodeKind::FilterBlock, cur().pos);
        next();
        n->b = parse_filter(nullptr, true);
        n->body = parse_statements({"endfilter"}, true);
        return n;
    }

    NodePtr parse_with() {
        auto n = make(NodeKind::With, cur().pos);
        next();
        while (cur().type != TokType::BlockEnd) {
            if (!n->names.empty()) expect_op(",");
            NodePtr target = parse_assign_target(true, {}, false);
            if (target->kind != NodeKind::Name) fail("unsupported construct: tuple target in 'with'", target->pos);
            n->names.push_back(target->str);
            expect_op("=");
            n->items.push_back(parse_expression(true));
        }
        n->body = parse_statements({"endwith"}, true);
        return n;
    }

    NodePtr parse_print() {
        const SourcePos p = cur().pos;
        next();
        auto tuple = make(NodeKind::Tuple, p);
        while (cur().type != TokType::BlockEnd) {
            if (!tuple->items.empty()) expect_op(",");
            tuple->items.push_back(parse_expression(true));
        }
        // {% print a, b %} prints each expression in turn.
        auto concat = make(NodeKind::Scope, p);
        for (auto& item : tuple->items) {
            auto out = make(NodeKind::Output, item->pos);
            out->a = std::move(item);
            concat->body.push_back(std::move(out));
        }
        return concat;
    }

    NodePtr parse_assign_target(bool with_tuple, const EndSet& extra_end, bool with_namespace) {
        NodePtr target;
        if (with_tuple) {
            target = parse_tuple_simplified(extra_end, with_namespace);
        } else {
            target = parse_primary(with_namespace);
        }
        auto assignable = [](const Node& n) {
            return n.kind == NodeKind::Name || n.kind == NodeKind::NSRef;
        };
        bool ok = assignable(*target);
        if (target->kind == NodeKind::Tuple) {
            ok = std::all_of(target->items.begin(), target->items.end(),
                             [&](const NodePtr& x) { return assignable(*x); });
        }
        if (!ok) fail("can't assign to this expression", target->pos);
        if (target->kind == NodeKind::Name &&
            (target->str == "true" || target->str == "false" || target->str == "none"))
            fail("can't assign to '" + target->str + "'", target->pos);
        return target;
    }

    // ---- expressions --------------------------------------------------------------------
    bool is_tuple_end(const EndSet& extra) const {
        const Token& t = cur();
        if (t.type == TokType::VarEnd || t.type == TokType::BlockEnd || t.type == TokType::Eof)
            return true;
        if (t.type == TokType::Operator && t.value == ")") return true;
        if (t.type == TokType::Name &&
            std::find(extra.begin(), extra.end(), t.value) != extra.end())
            return true;
        return false;
    }

    NodePtr parse_tuple_simplified(const EndSet& extra, bool with_namespace) {
        return parse_tuple_impl([&] { return parse_primary(with_namespace); }, extra, false);
    }

    NodePtr parse_tuple(bool with_condexpr, const EndSet& extra, bool explicit_parens) {
        return parse_tuple_impl([&] { return parse_expression(with_condexpr); }, extra,
                                explicit_parens);
    }

    NodePtr parse_tuple_impl(const std::function<NodePtr()>& item, const EndSet& extra,
                             bool explicit_parens) {
        const SourcePos p = cur().pos;
        std::vector<NodePtr> args;
        bool is_tuple = false;
        while (true) {
            if (!args.empty()) expect_op(",");
            if (is_tuple_end(extra)) break;
            args.push_back(item());
            if (is_op(",")) is_tuple = true;
            else break;
        }
        if (!is_tuple) {
            if (!args.empty()) return std::move(args[0]);
            if (!explicit_parens) fail_expected("an expression");
        }
        auto n = make(NodeKind::Tuple, p);
        n->items = std::move(args);
        return n;
    }

    NodePtr parse_expression(bool with_condexpr) {
        DepthGuard guard(*this);
        return with_condexpr ? parse_condexpr() : parse_or();
    }

    NodePtr parse_condexpr() {
        NodePtr expr1 = parse_or();
        while (is_name("if")) {
            const SourcePos p = cur().pos;
            next();
            auto n = make(NodeKind::CondExpr, p);
            n->a = parse_or();
            n->b = std::move(expr1);
            if (skip_name("else")) n->c = parse_condexpr();
            expr1 = std::move(n);
        }
        return expr1;
    }

    NodePtr binary(const char* op, NodePtr l, NodePtr r, SourcePos p) {
        auto n = make(NodeKind::Binary, p);
        n->str = op;
        n->a = std::move(l);
        n->b = std::move(r);
        return n;
    }

    NodePtr parse_or() {
        NodePtr left = parse_and();
        while (is_name("or")) {
            const SourcePos p = cur().pos;
            next();
            left = binary("or", std::move(left), parse_and(), p);
        }
        return left;
    }

    NodePtr parse_and() {
        NodePtr left = parse_not();
        while (is_name("and")) {
            const SourcePos p = cur().pos;
            next();
            left = binary("and", std::move(left), parse_not(), p);
        }
        return left;
    }

    NodePtr parse_not() {
        if (is_name("not")) {
            DepthGuard guard(*this);
            auto n = make(NodeKind::Unary, cur().pos);
            next();
            n->str = "not";
            n->a = parse_not();
            return n;
        }
        return parse_compare();
    }

    NodePtr parse_compare() {
        const SourcePos p = cur().pos;
        NodePtr expr = parse_math1();
        NodePtr cmp;
        while (true) {
            std::string op;
            if (cur().type == TokType::Operator &&
                (cur().value == "==" || cur().value == "!=" || cur().value == "<" ||
                 cur().value == "<=" || cur().value == ">" || cur().value == ">=")) {
                op = cur().value;
                next();
            } else if (is_name("in")) {
                op = "in";
                next();
            } else if (is_name("not") && look().type == TokType::Name && look().value == "in") {
                op = "notin";
                next();
                next();
            } else {
                break;
            }
            if (!cmp) {
                cmp = make(NodeKind::Compare, p);
                cmp->a = std::move(expr);
            }
            cmp->names.push_back(op);
            cmp->items.push_back(parse_math1());
        }
        return cmp ? std::move(cmp) : std::move(expr);
    }

    NodePtr parse_math1() {
        NodePtr left = parse_concat();
        while (is_op("+") || is_op("-")) {
            const std::string op = cur().value;
            const SourcePos p = cur().pos;
            next();
            left = binary(op == "+" ? "+" : "-", std::move(left), parse_concat(), p);
        }
        return left;
    }

    NodePtr parse_concat() {
        const SourcePos p = cur().pos;
        NodePtr first = parse_math2();
        if (!is_op("~")) return first;
        auto n = make(NodeKind::Concat, p);
        n->items.push_back(std::move(first));
        while (skip_op("~")) n->items.push_back(parse_math2());
        return n;
    }

    NodePtr parse_math2() {
        NodePtr left = parse_pow();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const std::string op = cur().value;
            const SourcePos p = cur().pos;
            next();
            const char* o = op == "*" ? "*" : op == "/" ? "/" : op == "//" ? "//" : "%";
            left = binary(o, std::move(left), parse_pow(), p);
        }
        return left;
    }

    NodePtr parse_pow() {
        NodePtr left = parse_unary(true);
        while (is_op("**")) {
            const SourcePos p = cur().pos;
            next();
            left = binary("**", std::move(left), parse_unary(true), p);
        }
        return left;
    }

    NodePtr parse_unary(bool with_filter) {
        DepthGuard guard(*this);
        NodePtr node;
        if (is_op("-") || is_op("+")) {
            node = make(NodeKind::Unary, cur().pos);
            node->str = cur().value;
            next();
            node->a = parse_unary(false);
        } else {
            node = parse_primary(false);
        }
        node = parse_postfix(std::move(node));
        if (with_filter) node = parse_filter_expr(std::move(node));
        return node;
    }

    NodePtr parse_primary(bool with_namespace) {
        DepthGuard guard(*this);
        const Token& t = cur();
        const SourcePos p = t.pos;
        if (t.type == TokType::Name) {
            const std::string v = t.value;
            next();
            auto n = make(NodeKind::Const, p);
            if (v == "true" || v == "True") n->value = Value::boolean(true);
            else if (v == "false" || v == "False") n->value = Value::boolean(false);
            else if (v == "none" || v == "None") n->value = Value::none();
            else if (with_namespace && is_op(".")) {
                next();
                n = make(NodeKind::NSRef, p);
                n->str = v;
                n->str2 = expect_name();
            } else {
                n = make(NodeKind::Name, p);
                n->str = v;
            }
            return n;
        }
        if (t.type == TokType::String) {
            auto n = make(NodeKind::Const, p);
            std::string s;
            while (cur().type == TokType::String) {
                s += cur().value;
                next();
            }
            n->value = Value::string(std::move(s));
            return n;
        }
        if (t.type == TokType::Integer || t.type == TokType::Float) {
            auto n = make(NodeKind::Const, p);
            n->value = t.type == TokType::Integer ? Value::integer(t.ival) : Value::number(t.fval);
            next();
            return n;
        }
        if (is_op("(")) {
            next();
            NodePtr n = parse_tuple(true, {}, true);
            expect_op(")");
            return n;
        }
        if (is_op("[")) {
            auto n = make(NodeKind::List, p);
            next();
            while (!is_op("]")) {
                if (!n->items.empty()) expect_op(",");
                if (is_op("]")) break;
                n->items.push_back(parse_expression(true));
            }
            expect_op("]");
            return n;
        }
        if (is_op("{")) {
            auto n = make(NodeKind::Dict, p);
            next();
            while (!is_op("}")) {
                if (!n->items.empty()) expect_op(",");
                if (is_op("}")) break;
                n->items.push_back(parse_expression(true));
                expect_op(":");
                n->kw_values.push_back(parse_expression(true));
            }
            expect_op("}");
            return n;
        }
        fail("unexpected " + describe_token(t), p);
    }

    NodePtr parse_postfix(NodePtr node) {
        while (true) {
            if (is_op(".") || is_op("[")) node = parse_subscript(std::move(node));
            else if (is_op("(")) node = parse_call(std::move(node));
            else break;
        }
        return node;
    }

    NodePtr parse_filter_expr(NodePtr node) {
        while (true) {
            if (is_op("|")) node = parse_filter(std::move(node), false);
            else if (is_name("is")) node = parse_test(std::move(node));
            else if (is_op("(")) node = parse_call(std::move(node));
            else break;
        }
        return node;
    }

    NodePtr parse_subscript(NodePtr node) {
        DepthGuard guard(*this);
        const Token t = cur();
        next();
        if (t.value == ".") {
            const Token& attr = cur();
            if (attr.type == TokType::Name) {
                auto n = make(NodeKind::Getattr, t.pos);
                n->a = std::move(node);
                n->str = attr.value;
                next();
                return n;
            }
            if (attr.type != TokType::Integer) fail("expected name or number", attr.pos);
            auto n = make(NodeKind::Getitem, t.pos);
            n->a = std::move(node);
            n->b = make(NodeKind::Const, attr.pos);
            n->b->value = Value::integer(attr.ival);
            next();
            return n;
        }
        // "[" subscript ("," subscript)* "]"
        std::vector<NodePtr> args;
        while (!is_op("]")) {
            if (!args.empty()) expect_op(",");
            args.push_back(parse_subscribed());
        }
        expect_op("]");
        auto n = make(NodeKind::Getitem, t.pos);
        n->a = std::move(node);
        if (args.size() == 1) {
            n->b = std::move(args[0]);
        } else {
            n->b = make(NodeKind::Tuple, t.pos);
            n->b->items = std::move(args);
        }
        return n;
    }

    NodePtr parse_subscribed() {
        const SourcePos p = cur().pos;
        NodePtr start;
        if (is_op(":")) {
            next();
        } else {
            start = parse_expression(true);
            if (!is_op(":")) return start;
            next();
        }
        auto n = make(NodeKind::Slice, p);
        n->a = std::move(start);
        if (!is_op(":") && !is_op("]") && !is_op(",")) n->b = parse_expression(true);
        if (skip_op(":")) {
            if (!is_op("]") && !is_op(",")) n->c = parse_expression(true);
        }
        return n;
    }

    void parse_call_args(Node& n) {
        expect_op("(");
        bool need_comma = false;
        while (!is_op(")")) {
            if (need_comma) {
                expect_op(",");
                if (is_op(")")) break;
            }
            if (is_op("*") || is_op("**")) {
                fail("unsupported construct '" + cur().value + "' argument unpacking", cur().pos);
            }
            if (cur().type == TokType::Name && look().type == TokType::Operator &&
                look().value == "=") {
                n.kw_names.push_back(cur().value);
                next();
                next();
                n.kw_values.push_back(parse_expression(true));
            } else {
                if (!n.kw_names.empty()) fail("invalid syntax for function call expression", cur().pos);
                n.items.push_back(parse_expression(true));
            }
            need_comma = true;
        }
        expect_op(")");
    }

    NodePtr parse_call(NodePtr node) {
        DepthGuard guard(*this);
        // Report call errors (raise_exception, bad arguments) at the start of the callee.
        auto n = make(NodeKind::Call, node->pos);
        n->a = std::move(node);
        parse_call_args(*n);
        return n;
    }

    NodePtr parse_filter(NodePtr node, bool start_inline) {
        while (is_op("|") || start_inline) {
            DepthGuard guard(*this);
            if (!start_inline) next();
            const SourcePos p = cur().pos;
            std::string name = expect_name();
            while (skip_op(".")) name += "." + expect_name();
            if (!is_known_filter(name)) fail("unknown filter '" + name + "'", p);
            auto n = make(NodeKind::Filter, p);
            n->a = std::move(node);
            n->str = name;
            if (is_op("(")) parse_call_args(*n);
            node = std::move(n);
            start_inline = false;
        }
        return node;
    }

    NodePtr parse_test(NodePtr node) {
        DepthGuard guard(*this);
        const SourcePos p = cur().pos;
        next();  // "is"
        const bool negated = skip_name("not");
        std::string name = expect_name();
        while (skip_op(".")) name += "." + expect_name();
        auto n = make(NodeKind::Test, p);
        n->a = std::move(node);
        n->str = name;
        const Token& t = cur();
        if (is_op("(")) {
            parse_call_args(*n);
        } else if ((t.type == TokType::Name || t.type == TokType::String ||
                    t.type == TokType::Integer || t.type == TokType::Float || is_op("[") ||
                    is_op("{")) &&
                   !(is_name("else") || is_name("or") || is_name("and"))) {
            if (is_name("is")) fail("you cannot chain multiple tests with 'is'", t.pos);
            n->items.push_back(parse_postfix(parse_primary(false)));
        }
        if (!negated) return n;
        auto neg = make(NodeKind::Unary, p);
        neg->str = "not";
        neg->a = std::move(n);
        return neg;
    }

    std::vector<Token> toks_;
    size_t pos_ = 0;
    int depth_ = 0;
    int loop_depth_ = 0;
    std::vector<std::string> open_tags_;
};

}  // namespace

NodePtr parse_template(std::string_view source) {
    Parser p(tokenize(source));
    return p.parse();
}

}  // namespace zinc::chat
