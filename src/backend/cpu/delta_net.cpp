// zinc/backend/cpu/delta_net.cpp — Gated DeltaNet kernels and the recurrent state pool
// (formulas: model/ir.h SsmConvP / DeltaNetP; conventions: llama.cpp's qwen35 graph and
// ggml-cpu's ssm_conv and gated_delta_net, whose float order is followed where it matters).
#include "backend/cpu/delta_net.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/activations.h"
#include "backend/cpu/norm.h"
#include "util/check.h"

namespace zinc::cpu {

StatePool::StatePool(const model::Program& prog, int32_t n_slots, int32_t n_ckpt)
    : slots_(n_slots, prog.recurrent.empty() ? 0 : n_ckpt),
      bytes_per_seq_(bytes_per_seq(prog)),
      layers_(prog.recurrent) {
    ZINC_CHECK(n_slots > 0 && n_ckpt >= 0);
    const size_t n = static_cast<size_t>(n_slots);
    const size_t nc = n * static_cast<size_t>(n_checkpoints());
    for (const auto& l : layers_) {
        conv_.emplace_back(n * static_cast<size_t>(l.conv_floats), 0.0f);
        ssm_.emplace_back(n * static_cast<size_t>(l.ssm_floats), 0.0f);
        conv_ckpt_.emplace_back(nc * static_cast<size_t>(l.conv_floats), 0.0f);
        ssm_ckpt_.emplace_back(nc * static_cast<size_t>(l.ssm_floats), 0.0f);
    }
}

size_t StatePool::bytes_per_seq(const model::Program& prog) {
    size_t b = 0;
    for (const auto& l : prog.recurrent)
        b += static_cast<size_t>(l.conv_floats + l.ssm_floats) * sizeof(float);
    return b;
}

float* StatePool::conv(int rs_layer, int32_t slot) {
    ZINC_CHECK(rs_layer >= 0 && static_cast<size_t>(rs_layer) < layers_.size());
    ZINC_CHECK(slot >= 0 && slot < n_slots());
    return conv_[static_cast<size_t>(rs_layer)].data() +
           static_cast<size_t>(slot) * static_cast<size_t>(layers_[rs_layer].conv_floats);
}

float* StatePool::ssm(int rs_layer, int32_t slot) {
    ZINC_CHECK(rs_layer >= 0 && static_cast<size_t>(rs_layer) < layers_.size());
    ZINC_CHECK(slot >= 0 && slot < n_slots());
    return ssm_[static_cast<size_t>(rs_layer)].data() +
           static_cast<size_t>(slot) * static_cast<size_t>(layers_[rs_layer].ssm_floats);
}

void StatePool::reset(int32_t slot) {
    for (size_t il = 0; il < layers_.size(); ++il) {
        std::fill_n(conv(static_cast<int>(il), slot), layers_[il].conv_floats, 0.0f);
        std::fill_n(ssm(static_cast<int>(il), slot), layers_[il].ssm_floats, 0.0f);
    }
}

float* StatePool::conv_ckpt(int rs_layer, int32_t slot) {
    ZINC_CHECK(n_checkpoints() > 0 && rs_layer >= 0 &&
               static_cast<size_t>(rs_layer) < layers_.size());
    ZINC_CHECK(slot >= 0 && slot < n_slots());
    return conv_ckpt_[static_cast<size_t>(rs_layer)].data() +
           static_cast<size_t>(slot) * static_cast<size_t>(n_checkpoints()) *
               static_cast<size_t>(layers_[rs_layer].conv_floats);
}

float* StatePool::ssm_ckpt(int rs_layer, int32_t slot) {
    ZINC_CHECK(n_checkpoints() > 0 && rs_layer >= 0 &&
               static_cast<size_t>(rs_layer) < layers_.size());
    ZINC_CHECK(slot >= 0 && slot < n_slots());
    return ssm_ckpt_[static_cast<size_t>(rs_layer)].data() +
           static_cast<size_t>(slot) * static_cast<size_t>(n_checkpoints()) *
               static_cast<size_t>(layers_[rs_layer].ssm_floats);
}

Result<void> StatePool::rewind(int32_t slot, int64_t p) {
    Result<int32_t> r = slots_.rewind(slot, p);
    if (!r) return r.error();
    if (r.value() < 0) return {};  // already there
    const auto row = static_cast<size_t>(r.value());
    for (size_t il = 0; il < layers_.size(); ++il) {
        const int rl = static_cast<int>(il);
        const auto cf = static_cast<size_t>(layers_[il].conv_floats);
        const auto sf = static_cast<size_t>(layers_[il].ssm_floats);
        std::copy_n(conv_ckpt(rl, slot) + row * cf, cf, conv(rl, slot));
        std::copy_n(ssm_ckpt(rl, slot) + row * sf, sf, ssm(rl, slot));
    }
    return {};
}

void ssm_conv(const float* x, int n_t, int64_t ch, const float* w, int d_conv, float* state,
              float* y, int64_t c0, int64_t c1, float* ckpt) {
    const int k1 = d_conv - 1;
    float win[16];
    ZINC_CHECK(d_conv >= 2 && d_conv <= 16);
    for (int64_t c = c0; c < c1; ++c) {
        float* st = state + c * k1;
        const float* wc = w + c * d_conv;
        for (int i = 0; i < k1; ++i) win[i] = st[i];
        for (int t = 0; t < n_t; ++t) {
            win[k1] = x[static_cast<int64_t>(t) * ch + c];
            float s = 0.0f;
            for (int i = 0; i < d_conv; ++i) s += win[i] * wc[i];
            y[static_cast<int64_t>(t) * ch + c] = silu(s);
            for (int i = 0; i < k1; ++i) win[i] = win[i + 1];
            if (ckpt) std::copy_n(win, k1, ckpt + (static_cast<int64_t>(t) * ch + c) * k1);
        }
        for (int i = 0; i < k1; ++i) st[i] = win[i];
    }
}

namespace {

// x / sqrt(sum x^2 + eps), as llama.cpp's build_gdn_l2_norm: rms_norm with eps / n, then a
// scale by 1 / sqrt(n) (sum of squares in double, as ggml_rms_norm).
void l2_norm(const float* x, float* y, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
    const float mean = static_cast<float>(sum / n);
    const float scale = 1.0f / std::sqrt(mean + eps / static_cast<float>(n));
    const float s2 = 1.0f / std::sqrt(static_cast<float>(n));
    for (int i = 0; i < n; ++i) y[i] = (x[i] * scale) * s2;
}

float dot(const float* a, const float* b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
}

}  // namespace

void delta_net_head(const model::DeltaNetP& p, const float* qkv, const float* beta,
                    const float* alpha, int n_t, int h, float* S, float* out, float* scratch,
                    float* ckpt, int64_t ckpt_stride) {
    const int dk = p.head_k_dim, dv = p.head_v_dim;
    const int64_t key_dim = int64_t{p.n_k_heads} * dk;
    const int64_t width = 2 * key_dim + int64_t{p.n_v_heads} * dv;
    const int64_t out_w = int64_t{p.n_v_heads} * dv;
    const int kh = h % p.n_k_heads;  // llama.cpp tiles q/k heads over the v heads
    float* q = scratch;
    float* k = scratch + dk;
    float* delta = scratch + 2 * dk;
    const float scale = 1.0f / std::sqrt(static_cast<float>(dv));
    const float a = p.a->f32()[h];
    const float dt_bias = p.dt_bias->f32()[h];
    for (int t = 0; t < n_t; ++t) {
        const float* row = qkv + static_cast<int64_t>(t) * width;
        l2_norm(row + int64_t{kh} * dk, q, dk, p.eps);
        l2_norm(row + key_dim + int64_t{kh} * dk, k, dk, p.eps);
        const float* v = row + 2 * key_dim + int64_t{h} * dv;
        const float b = 1.0f / (1.0f + std::exp(-beta[static_cast<int64_t>(t) * p.n_v_heads + h]));
        const float x = alpha[static_cast<int64_t>(t) * p.n_v_heads + h] + dt_bias;
        const float softplus = x > 20.0f ? x : std::log(1.0f + std::exp(x));
        const float decay = std::exp(softplus * a);
        for (int64_t i = 0; i < int64_t{dv} * dk; ++i) S[i] *= decay;
        for (int j = 0; j < dv; ++j) delta[j] = (v[j] - dot(S + int64_t{j} * dk, k, dk)) * b;
        for (int j = 0; j < dv; ++j) {
            float* sj = S + int64_t{j} * dk;
            for (int i = 0; i < dk; ++i) sj[i] += delta[j] * k[i];
        }
        float* o = out + static_cast<int64_t>(t) * out_w + int64_t{h} * dv;
        for (int j = 0; j < dv; ++j) o[j] = dot(S + int64_t{j} * dk, q, dk) * scale;
        if (ckpt) std::copy_n(S, int64_t{dv} * dk, ckpt + static_cast<int64_t>(t) * ckpt_stride);
    }
}

void gated_rms_norm_row(float* x, const float* z, const float* w, int64_t width, int head_dim,
                        float eps) {
    for (int64_t h0 = 0; h0 < width; h0 += head_dim) {
        rms_norm(x + h0, w, x + h0, head_dim, eps);
        for (int i = 0; i < head_dim; ++i) x[h0 + i] *= silu(z[h0 + i]);
    }
}

void split_gate_row(const float* in, float* q, float* gate, int n_head, int head_dim) {
    for (int h = 0; h < n_head; ++h) {
        const float* src = in + int64_t{h} * 2 * head_dim;
        std::memcpy(q + int64_t{h} * head_dim, src, sizeof(float) * head_dim);
        std::memcpy(gate + int64_t{h} * head_dim, src + head_dim, sizeof(float) * head_dim);
    }
}

void sigmoid_mul(float* x, const float* gate, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
}

}  // namespace zinc::cpu
