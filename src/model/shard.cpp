// zinc/model/shard.cpp — the tensor-parallel transform of the op list (model/shard.h).
//
// One pass over the source ops. Each tensor is either replicated (every rank holds all of it)
// or split (rank r holds columns [begin, end) of it, the same count on every rank). The
// projections that produce q/k/v (recognised by their consumer, a RopeKv) and gate/up (a Glu)
// are split by output rows; RopeKv, Attention and Glu work on the rank's heads / columns; a
// Matmul whose input is split is row-parallel and followed by an AllReduce. Any other op must
// touch replicated tensors only, so an op kind the transform does not know is replicated when
// that is correct and an error when it is not.
#include "model/shard.h"

#include <cstring>
#include <string>

#include "quant/types.h"
#include "util/check.h"

namespace zinc::model {

namespace {

struct Cols {
    int64_t begin = 0, end = 0;  // columns [begin, end) of the unsharded tensor
    int64_t size() const { return end - begin; }
    bool operator==(const Cols&) const = default;
};
using Split = std::vector<Cols>;  // one per rank; empty: replicated

std::string cols_string(Cols c) {
    return "[" + std::to_string(c.begin) + ", " + std::to_string(c.end) + ")";
}

// A rank's attention heads.
struct Heads {
    int hq = 0, hkv = 0;  // query heads, KV heads per rank
    int n_rep = 1;        // ranks sharing one KV head (N / n_head_kv when N > n_head_kv)
    int kv0(int r) const { return n_rep > 1 ? r / n_rep : r * hkv; }
};

class Sharder {
  public:
    Sharder(const Program& p, const ModelConfig& c, int n, ShardSet& out)
        : src_(p),
          cfg_(c),
          n_(n),
          out_(out),
          split_(p.tensors.size()),
          whole_(p.tensors.size(), false),
          ops_(static_cast<size_t>(n)) {}

    Result<void> run() {
        Heads h;
        ZINC_TRY(heads(cfg_.n_head, cfg_.n_head_kv, h));
        out_.kv_replicas = h.n_rep;
        // end[i]: how many rank ops the source's ops [0, i] became (the same on every rank).
        std::vector<int> end(src_.ops.size());
        for (size_t i = 0; i < src_.ops.size(); ++i) {
            ZINC_TRY(op(i));
            end[i] = static_cast<int>(ops_[0].size());
        }
        // The values read after the forward (embeddings, hidden rows) are whole on every rank:
        // the arch files mark the residual stream or its norm, which only replicated ops write.
        for (Tid t : {src_.embd, src_.hidden})
            ZINC_CHECK(t == kNoTensor || split_[static_cast<size_t>(t)].empty());
        out_.shards.resize(static_cast<size_t>(n_));
        for (int r = 0; r < n_; ++r) {
            Shard& s = out_.shards[static_cast<size_t>(r)];
            // Every mark of the source carries over (logits, embd, hidden, bidirectional,
            // recurrent, n_layer): they name tensors, whose ids are the source's. What changes:
            // the ops, the split tensors' widths, and embd_op, an op index: the last rank op of
            // source op embd_op, so the embeddings value is the one after its AllReduce, if any.
            s.program = src_;
            for (size_t t = 0; t < split_.size(); ++t)
                if (!split_[t].empty()) s.program.tensors[t].width = split_[t][0].size();
            s.program.ops = std::move(ops_[static_cast<size_t>(r)]);
            if (src_.embd_op >= 0) s.program.embd_op = end[static_cast<size_t>(src_.embd_op)] - 1;
            s.config = cfg_;
            s.config.n_head = h.hq;
            s.config.n_head_kv = h.hkv;
        }
        return {};
    }

  private:
    std::string where(size_t i) const {
        const Op& op = src_.ops[i];
        return "tensor parallel " + std::to_string(n_) + ": op " + std::to_string(i) + " (" +
               op_kind_name(op.kind()) + (op.il >= 0 ? ", layer " + std::to_string(op.il) : "") +
               ")";
    }
    const std::string& role(Tid t) const { return src_.tensors[static_cast<size_t>(t)].role; }

    Result<void> heads(int n_head, int n_head_kv, Heads& h) const {
        const bool kv_split = n_head_kv > 0 && n_head_kv % n_ == 0;
        const bool kv_rep = n_head_kv > 0 && n_ > n_head_kv && n_ % n_head_kv == 0;
        if (n_head <= 0 || n_head % n_ != 0 || !(kv_split || kv_rep)) {
            return make_error("tensor parallel " + std::to_string(n_) + ": " + cfg_.arch_name +
                              " model has " + std::to_string(n_head) + " attention heads and " +
                              std::to_string(n_head_kv) +
                              " KV heads; the ranks need whole heads: n_head % N == 0 and "
                              "n_head_kv % N == 0 (or N a multiple of n_head_kv, each KV head "
                              "then replicated on N / n_head_kv ranks)");
        }
        h.hq = n_head / n_;
        h.hkv = kv_split ? n_head_kv / n_ : 1;
        h.n_rep = kv_split ? 1 : n_ / n_head_kv;
        return {};
    }

    // ---- weight views

    std::string view_name(const Weight* w, int r) const {
        return w->name + "[tp" + std::to_string(r) + "/" + std::to_string(n_) + "]";
    }
    // Output rows c of matrix w: whole rows, a view into its data.
    Result<const Weight*> rows(const Weight* w, Cols c, int r, size_t i) {
        if (c.begin == 0 && c.end == w->n_rows) return w;
        if (w->ne[2] != 1 || w->ne[3] != 1 || c.end > w->n_rows)
            return make_error(where(i) + ": " + w->name + " is not a matrix with rows " +
                              cols_string(c));
        Weight v = *w;
        v.name = view_name(w, r);
        v.ne[1] = c.size();
        v.n_rows = c.size();
        v.data = w->data + static_cast<size_t>(c.begin) * w->row_bytes;
        out_.views.push_back(std::move(v));
        return &out_.views.back();
    }
    // Elements c of an f32 vector (a bias).
    const Weight* elems(const Weight* b, Cols c, int r) {
        if (!b || (c.begin == 0 && c.end == b->ne[0])) return b;
        Weight v = *b;
        v.name = view_name(b, r);
        v.ne[0] = c.size();
        v.row_bytes = sizeof(float) * static_cast<size_t>(c.size());
        v.data = b->data + sizeof(float) * static_cast<size_t>(c.begin);
        out_.views.push_back(std::move(v));
        return &out_.views.back();
    }
    // Input columns c of every row of w: must be whole quant blocks, copied as they are.
    Result<const Weight*> columns(const Weight* w, Cols c, int r, size_t i) {
        if (c.begin == 0 && c.end == w->ne[0]) return w;
        const quant::TypeTraits& tt = quant::type_traits(w->type);
        if (c.begin % tt.block_size != 0 || c.end % tt.block_size != 0 || c.end > w->ne[0]) {
            return make_error(where(i) + ": " + w->name + ": rank " + std::to_string(r) +
                              " would take input columns " + cols_string(c) + " of this " +
                              std::string(tt.name) + " matrix (rows of " +
                              std::to_string(w->ne[0]) + "), not on its " +
                              std::to_string(tt.block_size) + "-element block boundaries");
        }
        const size_t off = static_cast<size_t>(c.begin / tt.block_size) * tt.type_size;
        const size_t rb = quant::row_size(w->type, c.size());
        const size_t bytes = rb * static_cast<size_t>(w->n_rows);
        std::unique_ptr<uint8_t[]> buf(new uint8_t[bytes]);
        for (int64_t row = 0; row < w->n_rows; ++row)
            std::memcpy(buf.get() + static_cast<size_t>(row) * rb,
                        w->data + static_cast<size_t>(row) * w->row_bytes + off, rb);
        Weight v = *w;
        v.name = view_name(w, r);
        v.ne[0] = c.size();
        v.row_bytes = rb;
        v.data = buf.get();
        out_.copies.push_back(std::move(buf));
        out_.copied_bytes += bytes;
        out_.views.push_back(std::move(v));
        return &out_.views.back();
    }

    // ---- tensor states

    Result<void> set_split(Tid t, const Split& s, size_t i) {
        auto& cur = split_[static_cast<size_t>(t)];
        if (whole_[static_cast<size_t>(t)])
            return make_error(where(i) + " splits tensor " + role(t) +
                              ", which an earlier op uses whole");
        if (!cur.empty() && cur != s)
            return make_error(where(i) + " splits tensor " + role(t) +
                              " differently from an earlier op (its width is fixed)");
        cur = s;
        return {};
    }
    Result<void> expect_split(Tid t, const Split& s, size_t i) const {
        if (split_[static_cast<size_t>(t)] != s)
            return make_error(where(i) + " reads tensor " + role(t) +
                              ", which is not split on the heads / columns this op needs");
        return {};
    }
    // An op every rank runs as it is: it may only touch replicated tensors.
    Result<void> replicated(size_t i) {
        const Op& op = src_.ops[i];
        for (size_t t = 0; t < split_.size(); ++t) {
            const Tid id = static_cast<Tid>(t);
            if (!op.reads(id) && !op.writes(id)) continue;
            if (!split_[t].empty())
                return make_error(where(i) + " uses tensor " + role(id) +
                                  ", which is split across the ranks, and the transform does "
                                  "not know how to split this op");
            whole_[t] = true;
        }
        for (auto& ops : ops_) ops.push_back(op);
        return {};
    }
    Split even(int64_t width, size_t i, Result<void>& err) const {
        Split s;
        if (width % n_ != 0) {
            err = make_error(where(i) + ": width " + std::to_string(width) +
                             " does not split into " + std::to_string(n_) + " equal parts");
            return s;
        }
        const int64_t w = width / n_;
        for (int r = 0; r < n_; ++r) s.push_back({r * w, (r + 1) * w});
        return s;
    }
    Split head_cols(const Heads& h, int head_dim, bool kv) const {
        Split s;
        for (int r = 0; r < n_; ++r) {
            const int64_t h0 = kv ? h.kv0(r) : static_cast<int64_t>(r) * h.hq;
            const int64_t nh = kv ? h.hkv : h.hq;
            s.push_back({h0 * head_dim, (h0 + nh) * head_dim});
        }
        return s;
    }

    // The first op after i that reads any output of op i.
    const Op* consumer(size_t i) const {
        const Op& op = src_.ops[i];
        for (size_t j = i + 1; j < src_.ops.size(); ++j)
            for (int k = 0; k < op.n_outs; ++k)
                if (src_.ops[j].reads(op.outs[k].t)) return &src_.ops[j];
        return nullptr;
    }

    // ---- ops

    Result<void> op(size_t i) {
        const Op& op = src_.ops[i];
        switch (op.kind()) {
            case OpKind::Matmul:
                return matmul(i);
            case OpKind::RopeKv:
                return rope_kv(i);
            case OpKind::Attention:
                return attention(i);
            case OpKind::Glu:
                return glu(i);
            default:
                return replicated(i);
        }
    }

    Result<void> matmul(size_t i) {
        const Op& op = src_.ops[i];
        const auto& m = op.as<MatmulP>();
        if (m.accumulate) return make_error(where(i) + ": fused ops cannot be sharded");
        if (!split_[static_cast<size_t>(m.in)].empty()) return row_parallel(i);
        // Column-parallel when the consumer is the attention's RopeKv or a GLU.
        const Op* c = consumer(i);
        std::vector<Split> outs(static_cast<size_t>(m.n_w));
        if (c && c->kind() == OpKind::RopeKv && m.n_w == 3) {
            const auto& rk = c->as<RopeKvP>();
            Heads h;
            ZINC_TRY(heads(rk.n_head, rk.n_head_kv, h));
            for (int k = 0; k < m.n_w; ++k) {
                const Tid t = op.outs[k].t;
                if (t == c->outs[0].t)
                    outs[k] = head_cols(h, rk.head_dim_k, false);
                else if (t == c->outs[1].t)
                    outs[k] = head_cols(h, rk.head_dim_k, true);
                else if (t == rk.v)
                    outs[k] = head_cols(h, rk.head_dim_v, true);
                else
                    return make_error(where(i) + ": output " + role(t) + " is not RoPE's q/k/v");
            }
        } else if (c && c->kind() == OpKind::Glu && m.n_w == 2) {
            const auto& g = c->as<GluP>();
            for (int k = 0; k < m.n_w; ++k) {
                const Tid t = op.outs[k].t;
                if (t != g.gate && t != g.up)
                    return make_error(where(i) + ": output " + role(t) + " is not the GLU's input");
                Result<void> err;
                outs[k] = even(src_.width(t), i, err);
                ZINC_TRY(err);
            }
        } else {
            return replicated(i);
        }
        for (int k = 0; k < m.n_w; ++k) ZINC_TRY(set_split(op.outs[k].t, outs[k], i));
        whole_[static_cast<size_t>(m.in)] = true;
        for (int r = 0; r < n_; ++r) {
            Op s = op;
            auto& sp = std::get<MatmulP>(s.p);
            for (int k = 0; k < m.n_w; ++k) {
                auto w = rows(m.w[k], outs[k][r], r, i);
                if (!w) return w.error();
                sp.w[k] = w.value();
                sp.bias[k] = elems(m.bias[k], outs[k][r], r);
                if (n_ > 1) s.outs[k].validate = false;  // a shard holds part of it
            }
            ops_[static_cast<size_t>(r)].push_back(s);
        }
        return {};
    }

    // Input split: each rank multiplies its input columns, the partial sums are all-reduced.
    Result<void> row_parallel(size_t i) {
        const Op& op = src_.ops[i];
        const auto& m = op.as<MatmulP>();
        const Split& in = split_[static_cast<size_t>(m.in)];
        for (int k = 0; k < m.n_w; ++k) {
            const Tid t = op.outs[k].t;
            if (!split_[static_cast<size_t>(t)].empty())
                return make_error(where(i) + ": output " + role(t) + " is split");
            whole_[static_cast<size_t>(t)] = true;
        }
        for (int r = 0; r < n_; ++r) {
            Op s = op;
            auto& sp = std::get<MatmulP>(s.p);
            for (int k = 0; k < m.n_w; ++k) {
                auto w = columns(m.w[k], in[r], r, i);
                if (!w) return w.error();
                sp.w[k] = w.value();
                if (r > 0) sp.bias[k] = nullptr;  // added once, by rank 0
                s.outs[k].name = nullptr;         // the name moves to the reduced value
            }
            auto& ops = ops_[static_cast<size_t>(r)];
            ops.push_back(s);
            for (int k = 0; k < m.n_w; ++k) {
                Op ar;
                ar.il = op.il;
                ar.head = op.head;
                ar.p = AllReduceP{n_};
                ar.n_outs = 1;
                ar.outs[0] = op.outs[k];
                ops.push_back(ar);
            }
        }
        return {};
    }

    Result<void> rope_kv(size_t i) {
        const Op& op = src_.ops[i];
        const auto& p = op.as<RopeKvP>();
        Heads h;
        ZINC_TRY(heads(p.n_head, p.n_head_kv, h));
        ZINC_TRY(expect_split(op.outs[0].t, head_cols(h, p.head_dim_k, false), i));
        ZINC_TRY(expect_split(op.outs[1].t, head_cols(h, p.head_dim_k, true), i));
        ZINC_TRY(expect_split(p.v, head_cols(h, p.head_dim_v, true), i));
        for (int r = 0; r < n_; ++r) {
            Op s = op;
            auto& sp = std::get<RopeKvP>(s.p);
            sp.n_head = h.hq;
            sp.n_head_kv = h.hkv;
            ops_[static_cast<size_t>(r)].push_back(s);
        }
        return {};
    }

    Result<void> attention(size_t i) {
        const Op& op = src_.ops[i];
        const auto& p = op.as<AttentionP>();
        Heads h;
        ZINC_TRY(heads(p.n_head, p.n_head_kv, h));
        ZINC_TRY(expect_split(p.q, head_cols(h, p.head_dim_k, false), i));
        ZINC_TRY(set_split(op.outs[0].t, head_cols(h, p.head_dim_v, false), i));
        for (int r = 0; r < n_; ++r) {
            Op s = op;
            auto& sp = std::get<AttentionP>(s.p);
            sp.n_head = h.hq;
            sp.n_head_kv = h.hkv;
            // The learned sink logits (gpt-oss) of the rank's query heads.
            sp.sinks = elems(p.sinks, {int64_t{r} * h.hq, int64_t{r + 1} * h.hq}, r);
            if (n_ > 1) s.outs[0].validate = false;
            ops_[static_cast<size_t>(r)].push_back(s);
        }
        return {};
    }

    Result<void> glu(size_t i) {
        const Op& op = src_.ops[i];
        const auto& p = op.as<GluP>();
        const Split& s = split_[static_cast<size_t>(p.gate)];
        if (s.empty()) return replicated(i);  // a GLU of replicated tensors (not produced here)
        ZINC_TRY(expect_split(p.up, s, i));
        ZINC_TRY(set_split(op.outs[0].t, s, i));
        for (int r = 0; r < n_; ++r) {
            Op o = op;
            if (n_ > 1) o.outs[0].validate = false;
            ops_[static_cast<size_t>(r)].push_back(o);
        }
        return {};
    }

    const Program& src_;
    const ModelConfig& cfg_;
    const int n_;
    ShardSet& out_;
    std::vector<Split> split_;          // per tensor
    std::vector<bool> whole_;           // per tensor: used whole by some op
    std::vector<std::vector<Op>> ops_;  // per rank
};

}  // namespace

Result<std::unique_ptr<ShardSet>> shard_program(const Program& prog, const ModelConfig& cfg,
                                                int n_shards) {
    if (n_shards < 1 || n_shards > 1024)
        return make_error("tensor parallel " + std::to_string(n_shards) +
                          ": the rank count must be in [1, 1024]");
    if (!cfg.layer_kv_k.empty())
        return make_error("tensor parallel " + std::to_string(n_shards) + ": " + cfg.arch_name +
                          " has per-layer K/V widths (sliding and global layers differ), which "
                          "the shard transform does not split yet");
    auto set = std::make_unique<ShardSet>();
    set->n_shards = n_shards;
    ZINC_TRY(Sharder(prog, cfg, n_shards, *set).run());
    // A rank's KV cache is sized from its config: it must hold what its RopeKv ops append.
    for (const Shard& s : set->shards) {
        for (const Op& op : s.program.ops) {
            if (op.kind() != OpKind::RopeKv) continue;
            const auto& p = op.as<RopeKvP>();
            if (int64_t{p.n_head_kv} * p.head_dim_k != s.config.kv_dim_k() ||
                int64_t{p.n_head_kv} * p.head_dim_v != s.config.kv_dim_v())
                return make_error("tensor parallel " + std::to_string(n_shards) + ": layer " +
                                  std::to_string(op.il) +
                                  " has other KV head counts than the model config");
        }
    }
    return set;
}

}  // namespace zinc::model
