// zinc/model/ir.cpp — the op list's builder (with its shape checks), queries and the fusion
// schedule.
#include "model/ir.h"

#include <algorithm>
#include <cstdio>

#include "util/check.h"

namespace zinc::model {

const char* op_kind_name(OpKind k) {
    static constexpr const char* kNames[static_cast<int>(OpKind::kCount)] = {
        "embed",    "rms_norm",   "matmul",         "rope_kv",    "attention",
        "glu",      "add",        "add_rms_norm",   "keep_rows",  "softcap",
        "ssm_conv", "delta_net",  "gated_rms_norm", "split_gate", "sigmoid_mul",
        "moe",      "all_reduce", "layer_norm",     "add_embed",  "gelu",
        "scale",    "input",      "concat"};
    return kNames[static_cast<int>(k)];
}

namespace {

// Tensors an op reads besides its outputs (inputs), and whether it also reads its outputs.
void inputs(const Op& op, std::vector<Tid>& in, bool& reads_outs) {
    reads_outs = false;
    switch (op.kind()) {
        case OpKind::Embed:
            break;
        case OpKind::RmsNorm:
            in.push_back(op.as<RmsNormP>().in);
            break;
        case OpKind::Matmul:
            in.push_back(op.as<MatmulP>().in);
            reads_outs = op.as<MatmulP>().accumulate;
            break;
        case OpKind::RopeKv:
            in.push_back(op.as<RopeKvP>().v);
            reads_outs = true;
            break;
        case OpKind::Attention:
            in.push_back(op.as<AttentionP>().q);
            break;
        case OpKind::Glu:
            in.push_back(op.as<GluP>().gate);
            in.push_back(op.as<GluP>().up);
            break;
        case OpKind::Add:
            in.push_back(op.as<AddP>().in);
            reads_outs = true;
            break;
        case OpKind::AddRmsNorm:
            in.push_back(op.as<AddRmsNormP>().in);
            reads_outs = true;
            break;
        case OpKind::KeepRows: {
            const auto& k = op.as<KeepRowsP>();
            for (int i = 0; i < k.n; ++i) in.push_back(k.t[i]);
            break;
        }
        case OpKind::Softcap:
        case OpKind::AllReduce:
            reads_outs = true;
            break;
        case OpKind::SsmConv:
            in.push_back(op.as<SsmConvP>().in);
            break;
        case OpKind::DeltaNet:
            in.push_back(op.as<DeltaNetP>().qkv);
            in.push_back(op.as<DeltaNetP>().beta);
            in.push_back(op.as<DeltaNetP>().alpha);
            break;
        case OpKind::GatedRmsNorm:
            in.push_back(op.as<GatedRmsNormP>().z);
            reads_outs = true;
            break;
        case OpKind::SplitGate:
            in.push_back(op.as<SplitGateP>().in);
            break;
        case OpKind::SigmoidMul:
            in.push_back(op.as<SigmoidMulP>().gate);
            reads_outs = true;
            break;
        case OpKind::Moe:
            in.push_back(op.as<MoeP>().in);
            in.push_back(op.as<MoeP>().logits);
            break;
        case OpKind::LayerNorm:
            in.push_back(op.as<LayerNormP>().in);
            break;
        case OpKind::AddEmbed:
        case OpKind::Gelu:
        case OpKind::Scale:
            reads_outs = true;
            break;
        case OpKind::Input:
            break;
        case OpKind::Concat:
            in.push_back(op.as<ConcatP>().a);
            in.push_back(op.as<ConcatP>().b);
            break;
        case OpKind::kCount:
            break;
    }
}

}  // namespace

bool Op::reads(Tid t) const {
    std::vector<Tid> in;
    bool ro = false;
    inputs(*this, in, ro);
    if (std::find(in.begin(), in.end(), t) != in.end()) return true;
    return ro && writes(t);
}

bool Op::writes(Tid t) const {
    for (int i = 0; i < n_outs; ++i)
        if (outs[i].t == t) return true;
    return false;
}

Tid Program::find(std::string_view role) const {
    for (size_t i = 0; i < tensors.size(); ++i)
        if (tensors[i].role == role) return static_cast<Tid>(i);
    return kNoTensor;
}

std::vector<const Weight*> Program::weights() const {
    std::vector<const Weight*> ws;
    auto add = [&](const Weight* w) {
        if (w && std::find(ws.begin(), ws.end(), w) == ws.end()) ws.push_back(w);
    };
    for (const Op& op : ops) {
        switch (op.kind()) {
            case OpKind::Embed:
                add(op.as<EmbedP>().table);
                break;
            case OpKind::RmsNorm:
                add(op.as<RmsNormP>().w);
                break;
            case OpKind::Matmul: {
                const auto& m = op.as<MatmulP>();
                for (int i = 0; i < m.n_w; ++i) {
                    add(m.w[i]);
                    add(m.bias[i]);
                }
                break;
            }
            case OpKind::RopeKv:
                add(op.as<RopeKvP>().q_norm);
                add(op.as<RopeKvP>().k_norm);
                break;
            case OpKind::AddRmsNorm:
                add(op.as<AddRmsNormP>().w);
                break;
            case OpKind::Attention:
                add(op.as<AttentionP>().sinks);
                break;
            case OpKind::SsmConv:
                add(op.as<SsmConvP>().w);
                break;
            case OpKind::DeltaNet:
                add(op.as<DeltaNetP>().dt_bias);
                add(op.as<DeltaNetP>().a);
                break;
            case OpKind::GatedRmsNorm:
                add(op.as<GatedRmsNormP>().w);
                break;
            case OpKind::Moe:
                add(op.as<MoeP>().gate_exps);
                add(op.as<MoeP>().up_exps);
                add(op.as<MoeP>().down_exps);
                add(op.as<MoeP>().down_scale);
                break;
            case OpKind::Scale:
                add(op.as<ScaleP>().w);
                break;
            case OpKind::LayerNorm:
                add(op.as<LayerNormP>().w);
                add(op.as<LayerNormP>().b);
                break;
            case OpKind::AddEmbed:
                add(op.as<AddEmbedP>().table);
                break;
            default:
                break;
        }
    }
    return ws;
}

std::string Program::describe() const {
    std::string s;
    for (size_t i = 0; i < ops.size(); ++i) {
        const Op& op = ops[i];
        char buf[64];
        std::snprintf(buf, sizeof buf, "%zu L%d%s %s", i, op.il, op.head ? " head" : "",
                      op_kind_name(op.kind()));
        s += buf;
        std::vector<Tid> in;
        bool ro = false;
        inputs(op, in, ro);
        for (Tid t : in) s += " " + tensors[static_cast<size_t>(t)].role;
        s += " ->";
        for (int k = 0; k < op.n_outs; ++k) {
            s += " " + tensors[static_cast<size_t>(op.outs[k].t)].role;
            if (op.outs[k].name) s += std::string(":") + op.outs[k].name;
        }
        if (op.kind() == OpKind::Matmul) {
            const auto& m = op.as<MatmulP>();
            for (int k = 0; k < m.n_w; ++k) s += " [" + m.w[k]->name + "]";
            if (m.accumulate) s += " accumulate";
        }
        if (op.kind() == OpKind::Moe) {
            const auto& m = op.as<MoeP>();
            s += " [" + m.gate_exps->name + " " + m.up_exps->name + " " + m.down_exps->name +
                 "] top " + std::to_string(m.n_used) + "/" + std::to_string(m.n_expert);
        }
        s += "\n";
    }
    return s;
}

// ---- builder

Tid ProgramBuilder::tensor(std::string role, int64_t width) {
    ZINC_CHECK(width > 0);
    ZINC_CHECK(prog_.find(role) == kNoTensor);
    prog_.tensors.push_back({std::move(role), width});
    return static_cast<Tid>(prog_.tensors.size() - 1);
}

Op& ProgramBuilder::emit(OpParams p) {
    Op op;
    op.il = il_;
    op.head = head_;
    op.p = std::move(p);
    prog_.ops.push_back(std::move(op));
    return prog_.ops.back();
}

void ProgramBuilder::out(Op& op, Tid t, const char* name, bool validate) {
    ZINC_CHECK(t >= 0 && static_cast<size_t>(t) < prog_.tensors.size());
    ZINC_CHECK(op.n_outs < 3);
    op.outs[op.n_outs++] = Output{t, name, validate};
}

void ProgramBuilder::embed(const Weight& table, float scale, Tid o, const char* name) {
    ZINC_CHECK(table.ne[0] == prog_.width(o));
    out(emit(EmbedP{&table, scale}), o, name);
}

void ProgramBuilder::rms_norm(Tid in, const Weight& w, float eps, Tid o, const char* name,
                              bool validate, float scale) {
    ZINC_CHECK(prog_.width(in) == prog_.width(o) && w.ne[0] == prog_.width(in));
    out(emit(RmsNormP{in, &w, eps, scale}), o, name, validate);
}

void ProgramBuilder::matmul(Tid in, std::initializer_list<Proj> projs) {
    ZINC_CHECK(projs.size() >= 1 && projs.size() <= 3);
    MatmulP p;
    p.in = in;
    for (const Proj& pr : projs) {
        ZINC_CHECK(pr.w && pr.w->ne[0] == prog_.width(in));
        ZINC_CHECK(pr.w->n_rows == prog_.width(pr.out));
        ZINC_CHECK(!pr.bias || pr.bias->ne[0] == pr.w->n_rows);
        p.w[p.n_w] = pr.w;
        p.bias[p.n_w] = pr.bias;
        ++p.n_w;
    }
    Op& op = emit(p);
    for (const Proj& pr : projs) out(op, pr.out, pr.name);
}

void ProgramBuilder::rope_kv(Tid q, Tid k, Tid v, const RopeKvP& p) {
    ZINC_CHECK(prog_.width(q) == int64_t{p.n_head} * p.head_dim_k);
    ZINC_CHECK(prog_.width(k) == int64_t{p.n_head_kv} * p.head_dim_k);
    ZINC_CHECK(prog_.width(v) == int64_t{p.n_head_kv} * p.head_dim_v);
    RopeKvP pp = p;
    pp.v = v;
    Op& op = emit(pp);
    out(op, q, nullptr);
    out(op, k, nullptr);
}

void ProgramBuilder::attention(Tid o, const AttentionP& p, const char* name) {
    ZINC_CHECK(prog_.width(p.q) == int64_t{p.n_head} * p.head_dim_k);
    ZINC_CHECK(prog_.width(o) == int64_t{p.n_head} * p.head_dim_v);
    ZINC_CHECK(p.n_head_kv > 0 && p.n_head % p.n_head_kv == 0);
    out(emit(p), o, name);
}

void ProgramBuilder::glu(Tid gate, Tid up, GluAct act, Tid o, const char* name) {
    ZINC_CHECK(prog_.width(gate) == prog_.width(up) && prog_.width(up) == prog_.width(o));
    out(emit(GluP{gate, up, act}), o, name);
}

void ProgramBuilder::add(Tid acc, Tid in, const char* name) {
    ZINC_CHECK(acc != in && prog_.width(acc) == prog_.width(in));
    out(emit(AddP{in}), acc, name);
}

void ProgramBuilder::keep_rows(std::initializer_list<Tid> ts) {
    ZINC_CHECK(ts.size() >= 1 && ts.size() <= 4);
    KeepRowsP p;
    for (Tid t : ts) p.t[p.n++] = t;
    emit(p);
}

void ProgramBuilder::softcap(Tid x, float cap) {
    ZINC_CHECK(cap > 0.0f);
    out(emit(SoftcapP{cap}), x, nullptr);
}

void ProgramBuilder::ssm_conv(Tid in, const SsmConvP& p, Tid o, const char* name) {
    const int64_t ch = prog_.width(in);
    ZINC_CHECK(p.in == in && prog_.width(o) == ch && p.w && p.w->ne[1] == ch && p.w->ne[0] >= 2);
    ZINC_CHECK(p.rs_layer >= 0);
    if (prog_.recurrent.size() <= static_cast<size_t>(p.rs_layer))
        prog_.recurrent.resize(static_cast<size_t>(p.rs_layer) + 1);
    prog_.recurrent[static_cast<size_t>(p.rs_layer)].conv_floats = (p.w->ne[0] - 1) * ch;
    out(emit(p), o, name);
}

void ProgramBuilder::delta_net(const DeltaNetP& p, Tid o, const char* name) {
    ZINC_CHECK(p.n_k_heads > 0 && p.n_v_heads % p.n_k_heads == 0);
    const int64_t kd = int64_t{p.n_k_heads} * p.head_k_dim;
    const int64_t vd = int64_t{p.n_v_heads} * p.head_v_dim;
    ZINC_CHECK(prog_.width(p.qkv) == 2 * kd + vd && prog_.width(o) == vd);
    ZINC_CHECK(prog_.width(p.beta) == p.n_v_heads && prog_.width(p.alpha) == p.n_v_heads);
    ZINC_CHECK(p.dt_bias && p.dt_bias->ne[0] == p.n_v_heads && p.a && p.a->ne[0] == p.n_v_heads);
    ZINC_CHECK(p.rs_layer >= 0);
    if (prog_.recurrent.size() <= static_cast<size_t>(p.rs_layer))
        prog_.recurrent.resize(static_cast<size_t>(p.rs_layer) + 1);
    prog_.recurrent[static_cast<size_t>(p.rs_layer)].ssm_floats =
        int64_t{p.n_v_heads} * p.head_v_dim * p.head_k_dim;
    out(emit(p), o, name);
}

void ProgramBuilder::gated_rms_norm(Tid x, const GatedRmsNormP& p, const char* name) {
    ZINC_CHECK(p.head_dim > 0 && prog_.width(x) % p.head_dim == 0);
    ZINC_CHECK(prog_.width(p.z) == prog_.width(x) && p.w && p.w->ne[0] == p.head_dim);
    out(emit(p), x, name);
}

void ProgramBuilder::split_gate(const SplitGateP& p, Tid q, Tid gate) {
    const int64_t d = int64_t{p.n_head} * p.head_dim;
    ZINC_CHECK(prog_.width(p.in) == 2 * d && prog_.width(q) == d && prog_.width(gate) == d);
    Op& op = emit(p);
    out(op, q, "Qcur");
    out(op, gate, "gate");
}

void ProgramBuilder::sigmoid_mul(Tid x, Tid gate, const char* name) {
    ZINC_CHECK(x != gate && (prog_.width(x) == prog_.width(gate) || prog_.width(gate) == 1));
    out(emit(SigmoidMulP{gate}), x, name);
}

void ProgramBuilder::moe(const MoeP& p, Tid o, const char* name) {
    const int64_t e = prog_.width(p.in);
    ZINC_CHECK(p.gate_exps && p.up_exps && p.down_exps);
    ZINC_CHECK(p.n_used >= 1 && p.n_used <= p.n_expert && p.n_used <= kMoeMaxUsed && p.n_ff > 0);
    ZINC_CHECK(prog_.width(p.logits) == p.n_expert && prog_.width(o) == e && o != p.in);
    const int64_t gu_rows = p.gate_up_fused ? 2 * int64_t{p.n_ff} : p.n_ff;
    ZINC_CHECK(!p.gate_up_fused || p.gate_exps == p.up_exps);
    for (const Weight* w : {p.gate_exps, p.up_exps}) {
        ZINC_CHECK(w->ne[0] == e && w->ne[1] == gu_rows && w->ne[2] == p.n_expert);
    }
    ZINC_CHECK(!p.down_scale || p.down_scale->ne[0] == p.n_expert);
    ZINC_CHECK(p.down_exps->ne[0] == p.n_ff && p.down_exps->ne[1] == e &&
               p.down_exps->ne[2] == p.n_expert);
    out(emit(p), o, name);
}

void ProgramBuilder::all_reduce(Tid x, int n_ranks, const char* name) {
    ZINC_CHECK(n_ranks >= 1);
    out(emit(AllReduceP{n_ranks}), x, name);
}

void ProgramBuilder::layer_norm(Tid in, const Weight& w, const Weight* b, float eps, Tid o,
                                const char* name) {
    ZINC_CHECK(prog_.width(in) == prog_.width(o) && w.ne[0] == prog_.width(in));
    ZINC_CHECK(!b || b->ne[0] == prog_.width(in));
    out(emit(LayerNormP{in, &w, b, eps}), o, name);
}

void ProgramBuilder::add_embed(Tid x, const AddEmbedP& p, const char* name) {
    ZINC_CHECK(p.table && p.table->ne[0] == prog_.width(x));
    ZINC_CHECK(p.by_position || (p.row >= 0 && p.row < p.table->n_rows));
    out(emit(p), x, name);
}

void ProgramBuilder::gelu(Tid x, const char* name) {
    out(emit(GeluP{}), x, name);
}

void ProgramBuilder::scale(Tid x, const Weight& w, const char* name) {
    ZINC_CHECK(w.ne[0] == 1 && w.n_rows == 1);
    out(emit(ScaleP{&w}), x, name);
}

void ProgramBuilder::input(Tid x, const char* name) {
    out(emit(InputP{}), x, name);
}

void ProgramBuilder::concat(Tid a, Tid b, Tid o, const char* name) {
    ZINC_CHECK(prog_.width(o) == prog_.width(a) + prog_.width(b) && a != o && b != o);
    out(emit(ConcatP{a, b}), o, name);
}

void ProgramBuilder::mark_embeddings(Tid t) {
    ZINC_CHECK(!prog_.ops.empty() && prog_.ops.back().writes(t));
    prog_.embd = t;
    prog_.embd_op = static_cast<int>(prog_.ops.size()) - 1;
}

Program ProgramBuilder::finish(int n_layer, Tid logits) {
    prog_.n_layer = n_layer;
    prog_.logits = logits;
    ZINC_CHECK(logits != kNoTensor || prog_.embd != kNoTensor);
    for (const Op& op : prog_.ops)
        if (op.kind() == OpKind::Attention && !op.as<AttentionP>().causal)
            prog_.bidirectional = true;
    int last_il = -1;
    for (const Op& op : prog_.ops) {  // a layer's ops are contiguous and layers ascend
        if (op.il >= 0) {
            ZINC_CHECK(op.il >= last_il && op.il < n_layer);
            last_il = op.il;
        }
    }
    return std::move(prog_);
}

// ---- fusion schedule

namespace {

// Whether tensor t's value after op `from` (exclusive) is never read: the next op touching t
// writes it without reading it, or nothing touches it again.
bool dead_after(const Program& prog, size_t from, Tid t) {
    for (size_t i = from + 1; i < prog.ops.size(); ++i) {
        if (prog.ops[i].reads(t)) return false;
        if (prog.ops[i].writes(t)) return true;
    }
    return true;
}

// Matmul (one weight, no bias) -> t; optional KeepRows; Add x += t; t dead afterwards.
bool match_matmul_add(const Program& prog, size_t i, Step& s) {
    const Op& mm = prog.ops[i];
    if (mm.kind() != OpKind::Matmul || mm.head) return false;
    const auto& m = mm.as<MatmulP>();
    if (m.n_w != 1 || m.bias[0] || m.accumulate) return false;
    const Tid t = mm.outs[0].t;
    size_t j = i + 1;
    // A one-rank AllReduce (the shard transform at N = 1) is the identity: fuse across it.
    const Op* reduce = nullptr;
    if (j < prog.ops.size() && prog.ops[j].kind() == OpKind::AllReduce &&
        prog.ops[j].as<AllReduceP>().n_ranks == 1 && prog.ops[j].outs[0].t == t)
        reduce = &prog.ops[j++];
    const Op* keep = nullptr;
    if (j < prog.ops.size() && prog.ops[j].kind() == OpKind::KeepRows) keep = &prog.ops[j++];
    if (j >= prog.ops.size()) return false;
    const Op& add = prog.ops[j];
    if (add.kind() != OpKind::Add || add.as<AddP>().in != t || add.il != mm.il) return false;
    const Tid x = add.outs[0].t;
    if (x == m.in || !dead_after(prog, j, t)) return false;
    s.begin = static_cast<int>(i);
    s.end = static_cast<int>(j + 1);
    if (keep) {
        // The rows kept are decided before the fused projection: keep its input instead of t.
        Op k = *keep;
        auto& kp = std::get<KeepRowsP>(k.p);
        for (int q = 0; q < kp.n; ++q)
            if (kp.t[q] == t) kp.t[q] = m.in;
        s.fused.push_back(k);
    }
    Op f = mm;
    std::get<MatmulP>(f.p).accumulate = true;
    f.outs[0] = add.outs[0];  // x, named as the add's result
    s.fused.push_back(f);
    if (mm.outs[0].name) s.hidden.push_back(mm.outs[0]);
    if (reduce && reduce->outs[0].name) s.hidden.push_back(reduce->outs[0]);
    return true;
}

// RmsNorm t -> t (in place); Add x += t; t dead afterwards.
bool match_add_rms_norm(const Program& prog, size_t i, Step& s) {
    const Op& n = prog.ops[i];
    if (n.kind() != OpKind::RmsNorm || n.head || i + 1 >= prog.ops.size()) return false;
    const auto& np = n.as<RmsNormP>();
    const Tid t = n.outs[0].t;
    if (np.in != t || np.scale != 1.0f) return false;
    const Op& add = prog.ops[i + 1];
    if (add.kind() != OpKind::Add || add.as<AddP>().in != t || add.il != n.il) return false;
    if (!dead_after(prog, i + 1, t)) return false;
    s.begin = static_cast<int>(i);
    s.end = static_cast<int>(i + 2);
    Op f = add;
    f.p = AddRmsNormP{t, np.w, np.eps};
    s.fused.push_back(f);
    if (n.outs[0].name) s.hidden.push_back(n.outs[0]);
    return true;
}

// Op i + 1 is Add x += t of the Moe `mo` at i (-> t; same layer; t dead afterwards; x not an input
// of the Moe): fold it into f (a copy of mo) and extend the step.
bool fold_moe_add(const Program& prog, size_t i, const Op& mo, Op& f, Step& s) {
    if (i + 1 >= prog.ops.size()) return false;
    const auto& mp = mo.as<MoeP>();
    const Tid t = mo.outs[0].t;
    const Op& add = prog.ops[i + 1];
    if (add.kind() != OpKind::Add || add.as<AddP>().in != t || add.il != mo.il) return false;
    const Tid x = add.outs[0].t;
    if (x == mp.in || x == mp.logits || !dead_after(prog, i + 1, t)) return false;
    std::get<MoeP>(f.p).accumulate = true;
    f.outs[0] = add.outs[0];
    s.end = static_cast<int>(i + 2);
    if (mo.outs[0].name) s.hidden.push_back(mo.outs[0]);
    return true;
}

// Moe -> t; Add x += t (fold_moe_add's conditions).
bool match_moe_add(const Program& prog, size_t i, Step& s) {
    const Op& mo = prog.ops[i];
    if (mo.kind() != OpKind::Moe || mo.head || mo.as<MoeP>().accumulate) return false;
    Op f = mo;
    if (!fold_moe_add(prog, i, mo, f, s)) return false;
    s.begin = static_cast<int>(i);
    s.fused.push_back(f);
    return true;
}

// Matmul in -> logits (one weight, no bias, not accumulating); Moe(in, logits) next, same layer;
// logits read by nothing after the Moe. With moe_add, a following residual Add folds in too.
bool match_router_moe(const Program& prog, size_t i, bool moe_add, Step& s) {
    const Op& mm = prog.ops[i];
    if (mm.kind() != OpKind::Matmul || mm.head || i + 1 >= prog.ops.size()) return false;
    const auto& m = mm.as<MatmulP>();
    if (m.n_w != 1 || m.bias[0] || m.accumulate) return false;
    const Op& mo = prog.ops[i + 1];
    if (mo.kind() != OpKind::Moe || mo.il != mm.il || mo.head) return false;
    const auto& mp = mo.as<MoeP>();
    const Tid lg = mm.outs[0].t;
    if (mp.logits != lg || mp.in != m.in || mp.router || mp.accumulate ||
        !dead_after(prog, i + 1, lg))
        return false;
    s.begin = static_cast<int>(i);
    s.end = static_cast<int>(i + 2);
    Op f = mo;
    std::get<MoeP>(f.p).router = m.w[0];
    if (mm.outs[0].name) s.hidden.push_back(mm.outs[0]);
    if (moe_add) fold_moe_add(prog, i + 1, mo, f, s);
    s.fused.push_back(f);
    return true;
}

}  // namespace

std::vector<Step> schedule(const Program& prog, const FusionOptions& opts) {
    std::vector<Step> steps;
    size_t i = 0;
    while (i < prog.ops.size()) {
        Step s;
        s.il = prog.ops[i].il;
        if (!((opts.router_moe && match_router_moe(prog, i, opts.moe_add, s)) ||
              (opts.matmul_add && match_matmul_add(prog, i, s)) ||
              (opts.add_rms_norm && match_add_rms_norm(prog, i, s)) ||
              (opts.moe_add && match_moe_add(prog, i, s)))) {
            s = Step{};
            s.il = prog.ops[i].il;
            s.begin = static_cast<int>(i);
            s.end = static_cast<int>(i + 1);
        }
        i = static_cast<size_t>(s.end);
        steps.push_back(std::move(s));
    }
    return steps;
}

// ---- observation

std::string full_name(std::string_view name, int il) {
    return il >= 0 ? "blk." + std::to_string(il) + "." + std::string(name) : std::string(name);
}

void print_dump(std::string_view full, int64_t pos0, const float* data, int n_rows, int64_t dim) {
    std::fprintf(stderr,
                 "ZINC_DUMP %.*s pos0=%lld shape=[%lld, %d]:", static_cast<int>(full.size()),
                 full.data(), static_cast<long long>(pos0), static_cast<long long>(dim), n_rows);
    for (int64_t i = 0; i < dim * n_rows; ++i) std::fprintf(stderr, " %.6g", data[i]);
    std::fprintf(stderr, "\n");
}

}  // namespace zinc::model
