// tests/unit/engine/tiny_qwen35.cpp — see tiny_qwen35.h.
#include "tiny_qwen35.h"

#include <random>

#include "gguf/writer.h"
#include "quant/quant.h"

namespace zinc_test::tiny_qwen35 {

using zinc::gguf::OwnedValue;
using zinc::quant::GgmlType;

std::vector<uint8_t> build_qwen35(const Bad& bad) {
    zinc::gguf::Writer w;
    const std::string a = "qwen35";
    w.add_kv("general.architecture", OwnedValue::string(a));
    auto kv = [&](const std::string& k, OwnedValue v) {
        if (k != a + "." + bad.omit_key) w.add_kv(k, std::move(v));
    };
    w.add_kv(a + ".block_count", OwnedValue::u32(static_cast<uint32_t>(kLayers + bad.n_nextn)));
    if (bad.n_nextn > 0)
        w.add_kv(a + ".nextn_predict_layers", OwnedValue::u32(static_cast<uint32_t>(bad.n_nextn)));
    w.add_kv(a + ".embedding_length", OwnedValue::u32(kEmbd));
    w.add_kv(a + ".feed_forward_length", OwnedValue::u32(kFf));
    w.add_kv(a + ".attention.head_count", OwnedValue::u32(kHead));
    w.add_kv(a + ".attention.head_count_kv", OwnedValue::u32(kHeadKv));
    w.add_kv(a + ".attention.key_length", OwnedValue::u32(kHd));
    w.add_kv(a + ".attention.value_length", OwnedValue::u32(kHd));
    w.add_kv(a + ".attention.layer_norm_rms_epsilon", OwnedValue::f32(1e-6f));
    w.add_kv(a + ".rope.freq_base", OwnedValue::f32(10000.0f));
    w.add_kv(a + ".rope.dimension_count", OwnedValue::u32(8));
    OwnedValue sec;
    sec.type = zinc::gguf::ValueType::ARRAY;
    sec.elem_type = zinc::gguf::ValueType::INT32;
    for (int v : bad.sections) sec.arr.push_back(OwnedValue::i32(v));
    w.add_kv(a + ".rope.dimension_sections", std::move(sec));
    w.add_kv(a + ".context_length", OwnedValue::u32(512));
    kv(a + ".ssm.conv_kernel", OwnedValue::u32(kConv));
    kv(a + ".ssm.state_size", OwnedValue::u32(kDk));
    kv(a + ".ssm.group_count", OwnedValue::u32(kNk));
    kv(a + ".ssm.time_step_rank", OwnedValue::u32(static_cast<uint32_t>(bad.n_v)));
    kv(a + ".ssm.inner_size", OwnedValue::u32(static_cast<uint32_t>(bad.inner_size)));
    w.add_kv(a + ".full_attention_interval", OwnedValue::u32(4));
    std::mt19937 rng(7);
    auto add = [&](const std::string& name, int64_t ne0, int64_t ne1, GgmlType t, float sd,
                   float mean = 0.0f) {
        std::normal_distribution<float> d(mean, sd);
        std::vector<float> f(static_cast<size_t>(ne0 * ne1));
        for (float& v : f) v = d(rng);
        const size_t rb = zinc::quant::row_size(t, ne0);
        std::vector<uint8_t> out(rb * ne1);
        for (int64_t r = 0; r < ne1; ++r)
            zinc::quant::quantize_row(t, f.data() + r * ne0, out.data() + r * rb, ne0);
        std::vector<int64_t> ne = {ne0};
        if (ne1 > 1) ne.push_back(ne1);
        w.add_tensor(name, ne, t, out);
    };
    const GgmlType q = GgmlType::Q8_0, f = GgmlType::F32;
    const int kd = kNk * kDk, vd = kNv * kDk;
    add("token_embd.weight", kEmbd, kVocab, q, 1.0f);
    add("output_norm.weight", kEmbd, 1, f, 0.1f, 1.0f);
    for (int il = 0; il < kLayers + bad.n_nextn; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        const bool nextn = il >= kLayers;
        // (the NextN block's matrices in f32: its hand-composed reference is then tight)
        const GgmlType mq = nextn ? f : q;
        add(b + "attn_norm.weight", kEmbd, 1, f, 0.1f, 1.0f);
        add(b + "post_attention_norm.weight", kEmbd, 1, f, 0.1f, 1.0f);
        if (!nextn && (il + 1) % 4 != 0) {
            add(b + "attn_qkv.weight", kEmbd, 2 * kd + vd, mq, 0.2f);
            add(b + "attn_gate.weight", kEmbd, vd, mq, 0.2f);
            add(b + "ssm_conv1d.weight", kConv, 2 * kd + vd, f, 0.5f);
            add(b + "ssm_dt.bias", kNv, 1, f, 0.5f);
            add(b + "ssm_a", kNv, 1, f, 0.2f, -1.0f);
            add(b + "ssm_beta.weight", kEmbd, kNv, mq, 0.2f);
            add(b + "ssm_alpha.weight", kEmbd, kNv, mq, 0.2f);
            add(b + "ssm_norm.weight", kDk, 1, f, 0.1f, 1.0f);
            add(b + "ssm_out.weight", vd, kEmbd, mq, 0.2f);
        } else {
            add(b + "attn_q.weight", kEmbd, 2 * kHead * kHd, mq, 0.2f);
            add(b + "attn_k.weight", kEmbd, kHeadKv * kHd, mq, 0.2f);
            add(b + "attn_v.weight", kEmbd, kHeadKv * kHd, mq, 0.2f);
            add(b + "attn_output.weight", kHead * kHd, kEmbd, mq, 0.2f);
            add(b + "attn_q_norm.weight", kHd, 1, f, 0.1f, 1.0f);
            add(b + "attn_k_norm.weight", kHd, 1, f, 0.1f, 1.0f);
        }
        add(b + "ffn_gate.weight", kEmbd, kFf, mq, 0.2f);
        add(b + "ffn_up.weight", kEmbd, kFf, mq, 0.2f);
        add(b + "ffn_down.weight", kFf, kEmbd, mq, 0.2f);
        if (nextn) {  // eh_proj (2 n_embd -> n_embd), the norms, optionally the own head
            add(b + "nextn.eh_proj.weight", 2 * kEmbd, kEmbd, mq, 0.15f);
            add(b + "nextn.enorm.weight", kEmbd, 1, f, 0.1f, 1.0f);
            add(b + "nextn.hnorm.weight", kEmbd, 1, f, 0.1f, 1.0f);
            if (bad.nextn_head) {
                add(b + "nextn.shared_head_norm.weight", kEmbd, 1, f, 0.1f, 1.0f);
                add(b + "nextn.shared_head_head.weight", kEmbd, kVocab, mq, 0.5f);
            }
        }
    }
    return w.serialize();
}

}  // namespace zinc_test::tiny_qwen35
