// The evidence cannot lie (CPU tier, runs in CI): op counts equal what the model's forward
// issues (computed here from n_layer and the architecture, and weight bytes from the GGUF's own
// tensor table), a skipped layer flips shortcut_free and removes its ops, validation against a
// second CPU runner names the op and layer of an injected fault, and strict mode finishes on the
// oracle with the fallback counted and the clean logits delivered.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gguf/gguf.h"
#include "model/batch.h"
#include "model/config.h"
#include "model/model.h"
#include "runtime/checked_runner.h"

namespace rt = zinc::runtime;
namespace zm = zinc::model;

namespace {

struct Loaded {
    std::unique_ptr<zinc::gguf::File> file;
    std::unique_ptr<zm::Model> model;
};

const Loaded& load(const char* name) {
    static std::map<std::string, Loaded*> cache;
    auto& slot = cache[name];
    if (!slot) {
        slot = new Loaded;
        auto f = zinc::gguf::File::open(std::string(ZINC_SOURCE_DIR) + "/models/" + name);
        if (f.ok()) {
            slot->file = std::move(f.value());
            auto m = zm::Model::load(*slot->file, {});
            if (m.ok()) slot->model = std::move(m.value());
        }
    }
    return *slot;
}

constexpr const char* kSmol = "SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr const char* kGemma = "gemma-3-270m-q4_k_m.gguf";

zm::RunnerOptions runner_opts() {
    zm::RunnerOptions ro;
    ro.n_blocks = 16;
    ro.block_size = 16;
    ro.max_batch_tokens = 32;
    ro.max_seqs = 2;
    ro.max_seq_len = 256;
    ro.n_threads = 2;
    return ro;
}

rt::TieredRunner make(const zm::Model& m, const rt::RuntimeOptions& ro) {
    rt::TierChoice c;
    c.tier = rt::Tier::Cpu;
    c.reason = "test";
    auto r = rt::create_tiered_runner(m, runner_opts(), ro, c);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return std::move(r.value());
}

// One sequence in blocks 0..15: a prefill of `prompt` then `n_decode` greedy decode steps.
// Returns every step's logits (last row).
std::vector<std::vector<float>> run_seq(zm::Runner& r, int32_t n_vocab,
                                        const std::vector<int32_t>& prompt, int n_decode) {
    std::vector<int32_t> table(16);
    for (int i = 0; i < 16; ++i) table[i] = i;
    std::vector<std::vector<float>> out;
    std::vector<int32_t> toks = prompt;
    int pos = 0;
    for (int step = 0; step <= n_decode; ++step) {
        const int n = step == 0 ? static_cast<int>(prompt.size()) : 1;
        zm::BatchSeq s;
        s.n_tokens = n;
        s.pos0 = pos;
        s.block_table = table;
        zm::Batch b;
        b.tokens = std::span<const int32_t>(toks.data() + pos, n);
        b.seqs = std::span<const zm::BatchSeq>(&s, 1);
        std::vector<float> logits(n_vocab);
        auto res = r.forward(b, logits.data());
        EXPECT_TRUE(res.ok()) << res.error().message;
        pos += n;
        int32_t best = 0;
        for (int32_t i = 1; i < n_vocab; ++i)
            if (logits[i] > logits[best]) best = i;
        toks.push_back(best);
        out.push_back(std::move(logits));
    }
    return out;
}

const std::vector<int32_t> kPrompt = {1, 504, 3458, 282, 4649, 314, 253, 1345};

uint64_t op(const rt::OpTally& t, rt::Op o) {
    return t.ops[static_cast<int>(rt::Device::Cpu)][static_cast<int>(o)];
}

// The ops one step of the pre-norm decoder (llama) or Gemma 3 issues on the CPU tier, from the
// architecture: per layer 2 norms (+2 post-norms in Gemma), 4 projection calls (QKV together,
// output, gate+up together, down), RoPE/KV, attention, GLU and 2 residual adds; plus the
// embedding, the output-row gather when not every row is an output row, and the output head.
struct Expect {
    uint64_t embed, rms_norm, matmul, rope_kv, attention, glu, add, gather;
};
Expect expected_ops(int n_layer_run, bool gemma, int n_rows, int n_out) {
    Expect e{};
    e.embed = 1;
    e.rms_norm = static_cast<uint64_t>(n_layer_run) * (gemma ? 4 : 2) + (n_out > 0 ? 1 : 0);
    e.matmul = static_cast<uint64_t>(n_layer_run) * 4 + (n_out > 0 ? 1 : 0);
    e.rope_kv = e.attention = e.glu = static_cast<uint64_t>(n_layer_run);
    e.add = 2ull * n_layer_run;
    e.gather = n_out != n_rows ? 1 : 0;
    return e;
}
void expect_ops(const rt::OpTally& t, const Expect& e, const char* what) {
    EXPECT_EQ(op(t, rt::Op::Embed), e.embed) << what;
    EXPECT_EQ(op(t, rt::Op::RmsNorm), e.rms_norm) << what;
    EXPECT_EQ(op(t, rt::Op::Matmul), e.matmul) << what;
    EXPECT_EQ(op(t, rt::Op::RopeKv), e.rope_kv) << what;
    EXPECT_EQ(op(t, rt::Op::Attention), e.attention) << what;
    EXPECT_EQ(op(t, rt::Op::Glu), e.glu) << what;
    EXPECT_EQ(op(t, rt::Op::Add), e.add) << what;
    EXPECT_EQ(op(t, rt::Op::Gather), e.gather) << what;
    EXPECT_EQ(t.total_ops(rt::Device::Cuda), 0u) << what;
    EXPECT_EQ(t.total_ops(rt::Device::Cpu), e.embed + e.rms_norm + e.matmul + e.rope_kv +
                                                e.attention + e.glu + e.add + e.gather +
                                                op(t, rt::Op::Softcap))
        << what;
}

#define NEED(name)                                           \
    const Loaded& L = load(name);                            \
    ASSERT_TRUE(L.model) << "models/" << name << " missing"; \
    const zm::Model& model = *L.model

}  // namespace

TEST(CheckedRunner, OpsCountedEqualTheForwardsOps) {
    for (const char* name : {kSmol, kGemma}) {
        NEED(name);
        const int n_layer = model.config().n_layer;
        const bool gemma = model.arch_name() == "gemma3";
        auto tr = make(model, {});
        // Prefill (8 rows, 1 output row).
        auto before = tr.evidence->snapshot();
        run_seq(*tr.runner, model.n_vocab(), kPrompt, 0);
        auto after = tr.evidence->snapshot();
        auto d = rt::evidence_delta(after, before);
        EXPECT_EQ(d.steps, 1u);
        expect_ops(d.ops, expected_ops(n_layer, gemma, 8, 1), name);
        EXPECT_EQ(after.execution_tier, "cpu");
        EXPECT_TRUE(after.shortcut_free);
        EXPECT_EQ(after.cpu_fallback, 0u);
    }
}

TEST(CheckedRunner, DecodeReadsEveryWeightByteOnce) {
    NEED(kSmol);
    // Independent count from the GGUF tensor table: a decode step reads every tensor once (the
    // tied token_embd as the LM head), plus one embedding row.
    uint64_t file_bytes = 0, embd_row = 0;
    for (const auto& t : L.file->tensors()) {
        file_bytes += t.n_bytes;
        if (t.name == "token_embd.weight") embd_row = t.n_bytes / static_cast<uint64_t>(t.ne[1]);
    }
    ASSERT_GT(embd_row, 0u);
    auto tr = make(model, {});
    std::vector<int32_t> table(16);
    for (int i = 0; i < 16; ++i) table[i] = i;
    std::vector<float> logits(model.n_vocab());
    const int32_t tok[1] = {504};
    zm::BatchSeq s;
    s.n_tokens = 1;
    s.block_table = table;
    zm::Batch b;
    b.tokens = tok;
    b.seqs = std::span<const zm::BatchSeq>(&s, 1);
    ASSERT_TRUE(tr.runner->forward(b, logits.data()).ok());
    const auto e = tr.evidence->snapshot();
    expect_ops(e.ops, expected_ops(model.config().n_layer, false, 1, 1), "decode");
    EXPECT_EQ(e.ops.weight_bytes[0], file_bytes + embd_row);
    EXPECT_GT(e.ops.act_bytes[0], 0u);
}

TEST(CheckedRunner, SkippedLayerIsAShortcutAndItsOpsAreGone) {
    NEED(kSmol);
    rt::RuntimeOptions ro;
    ro.skip_layers = {3, 5};
    auto tr = make(model, ro);
    const auto skipped = run_seq(*tr.runner, model.n_vocab(), kPrompt, 1);
    const auto e = tr.evidence->snapshot();
    EXPECT_FALSE(e.shortcut_free);
    EXPECT_EQ(e.shortcuts.count("layer 3 skipped (ZINC_SKIP_LAYERS)"), 1u);
    EXPECT_EQ(e.shortcuts.at("layer 5 skipped (ZINC_SKIP_LAYERS)"), 2u);  // both steps
    const int n_layer = model.config().n_layer;
    // Two steps: prefill (8 rows) and one decode, each with 28 of 30 layers.
    const Expect p = expected_ops(n_layer - 2, false, 8, 1),
                 q = expected_ops(n_layer - 2, false, 1, 1);
    EXPECT_EQ(op(e.ops, rt::Op::Matmul), p.matmul + q.matmul);
    EXPECT_EQ(op(e.ops, rt::Op::Attention), p.attention + q.attention);
    EXPECT_NE(rt::evidence_line(e).find("shortcut_free=false"), std::string::npos);
    // And the skip really changed the result.
    auto clean = make(model, {});
    const auto ref = run_seq(*clean.runner, model.n_vocab(), kPrompt, 1);
    EXPECT_NE(skipped[0], ref[0]);
    EXPECT_TRUE(clean.evidence->snapshot().shortcut_free);
}

TEST(CheckedRunner, CleanValidationPassesAndPromotes) {
    NEED(kSmol);
    rt::RuntimeOptions ro;
    ro.validate_steps = 2;
    auto tr = make(model, ro);
    const auto got = run_seq(*tr.runner, model.n_vocab(), kPrompt, 3);
    const auto e = tr.evidence->snapshot();
    EXPECT_EQ(e.validated_steps, 2u);
    EXPECT_EQ(e.validation_failures, 0u) << e.first_failure;
    EXPECT_TRUE(e.trust_promoted);
    // CPU serving tier against the CPU oracle: bitwise (the same code and options).
    EXPECT_EQ(e.validation_mode, "bitwise");
    EXPECT_TRUE(tr.runner->exact());
    EXPECT_NE(rt::evidence_line(e).find(" validation=bitwise "), std::string::npos);
    EXPECT_EQ(e.finiteness_checks, 2u);  // steps 2 and 3, after promotion
    EXPECT_GT(e.oracle_ops.total_ops(rt::Device::Cpu), 0u);
    // The oracle's ops (prefill + 1 decode) are kept apart from the serving tier's (prefill +
    // 3 decodes).
    auto total = [](const Expect& x) {
        return x.embed + x.rms_norm + x.matmul + x.rope_kv + x.attention + x.glu + x.add + x.gather;
    };
    const int n_layer = model.config().n_layer;
    const uint64_t prefill = total(expected_ops(n_layer, false, 8, 1));
    const uint64_t decode = total(expected_ops(n_layer, false, 1, 1));
    EXPECT_EQ(e.oracle_ops.total_ops(rt::Device::Cpu), prefill + decode);
    EXPECT_EQ(e.ops.total_ops(rt::Device::Cpu), prefill + 3 * decode);
    auto plain = make(model, {});
    EXPECT_EQ(got, run_seq(*plain.runner, model.n_vocab(), kPrompt, 3));
}

TEST(CheckedRunner, ValidationNamesTheCorruptedOpAndLayer) {
    NEED(kSmol);
    for (const auto& [name, il, op_words] : std::vector<std::tuple<std::string, int, std::string>>{
             {"attn_out", 3, "layer 3 op attn_output matmul: blk.3.attn_out"},
             {"ffn_out", 7, "layer 7 op ffn_down matmul: blk.7.ffn_out"},
             {"l_out", 0, "layer 0 op ffn residual add: blk.0.l_out"},
             {"Kcur", 12, "layer 12 op attn_k matmul: blk.12.Kcur"},
             {"Vcur", 2, "layer 2 op attn_v matmul: blk.2.Vcur"},
             {"kqv_out", 1, "layer 1 op attention (rope_kv, attention): blk.1.kqv_out"},
             {"ffn_inp", 5, "layer 5 op attention residual add: blk.5.ffn_inp"},
             {"ffn_gate", 4, "layer 4 op ffn_gate matmul: blk.4.ffn_gate"},
             {"ffn_up", 4, "layer 4 op ffn_up matmul: blk.4.ffn_up"},
             {"ffn_glu", 6, "layer 6 op glu: blk.6.ffn_glu"},
             {"inp_embd", -1, "layer - op embed: inp_embd"}}) {
        rt::RuntimeOptions ro;
        ro.validate_steps = 2;
        ro.corrupt = {name, il};
        auto tr = make(model, ro);
        run_seq(*tr.runner, model.n_vocab(), kPrompt, 2);
        const auto e = tr.evidence->snapshot();
        EXPECT_EQ(e.validated_steps, 2u) << name;
        EXPECT_EQ(e.validation_failures, 2u) << name;
        EXPECT_FALSE(e.trust_promoted) << name;
        EXPECT_NE(e.first_failure.find("step 0 " + op_words), std::string::npos)
            << name << ": " << e.first_failure;
        // The CPU tier validates bitwise: one changed row is counted value by value.
        EXPECT_EQ(e.validation_mode, "bitwise");
        EXPECT_NE(e.first_failure.find(" values differ in bits"), std::string::npos)
            << e.first_failure;
        EXPECT_EQ(e.cpu_fallback, 0u);  // not strict: reported, not replaced
    }
}

TEST(CheckedRunner, StrictFinishesOnTheOracleAndCountsTheFallback) {
    NEED(kSmol);
    rt::RuntimeOptions ro;
    ro.validate_steps = 4;
    ro.validate_strict = true;
    ro.corrupt = {"attn_out", 3};
    auto tr = make(model, ro);
    const auto got = run_seq(*tr.runner, model.n_vocab(), kPrompt, 3);
    const auto e = tr.evidence->snapshot();
    EXPECT_EQ(e.validated_steps, 1u);  // the failing step; then the oracle serves
    EXPECT_EQ(e.validation_failures, 1u);
    EXPECT_EQ(e.cpu_fallback, 4u);  // the failing step and the 3 after it
    EXPECT_EQ(e.fallback_ops.at("forward"), 4u);
    EXPECT_EQ(tr.runner->tier(), "cpu");
    auto plain = make(model, {});
    EXPECT_EQ(got, run_seq(*plain.runner, model.n_vocab(), kPrompt, 3));  // clean logits
    // Without strict the corrupted logits reach the caller.
    rt::RuntimeOptions lax = ro;
    lax.validate_strict = false;
    auto bad = make(model, lax);
    EXPECT_NE(run_seq(*bad.runner, model.n_vocab(), kPrompt, 0)[0], got[0]);
}
