// zinc/tests/cuda/test_exact_ops.cpp — the CUDA tier's matrix products, activation packings and
// embedding rows against the CPU tier, bit for bit (docs/exactness.md, "Matrix products").
//
//   cuda_test_exact_ops [--ctest]
//
// Every output buffer is poisoned with NaN (0xff bytes) before the kernel runs; a NaN never
// compares equal, so an unwritten element fails. Per weight type and activation row count
// (1, 3, 16, 100): dmmv_exact (two fused jobs, a bias on the second, then the accumulate mode)
// on activations packed by pack.cu must equal quant::vec_dot on the CPU's quantize_row packing,
// memcmp; the packings (pack_rows, rms_norm_out with and without weight, glu_out SwiGLU / GeGLU,
// for Q8_0 / Q8_1 / Q8_K) must give quantize_row's codes, scales and sums, and the f32 outputs
// canon.h's values; add_rms_norm canon's values; get_rows must equal dequantize_row (times the
// scale). Each line prints the largest |difference| and "bitwise equal: yes/no".
// Without a usable device it prints the reason and exits 77 (ctest: skipped).
//
// tests/cuda/emu/run_emu.py also builds this file against a host emulation of CUDA
// (ZINC_CUDA_EMU, smaller sizes) so CI checks the kernels' code without a GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "backend/canon.h"
#include "backend/cuda/cuda_tier.h"
#include "backend/cuda/kernels.h"
#include "gpu_test.h"
#include "quant/quant.h"
#include "quant/types.h"

using namespace zinc;
namespace cu = zinc::cuda;
using quant::GgmlType;

namespace {

using namespace zinc::gpu_test;

#if defined(ZINC_CUDA_EMU)  // host emulation: one std::thread per CUDA thread, so small shapes
constexpr int kOut = 29, kJob0 = 9, kLegacyK = 1184, kKQuantK = 1280, kEvenLegacyK = 256,
              kEvenKQuantK = 512;
constexpr int kActs[] = {1, 3, 17};
#else
constexpr int kOut = 389, kJob0 = 131, kLegacyK = 2080, kKQuantK = 2304, kEvenLegacyK = 2048,
              kEvenKQuantK = 2048;
constexpr int kActs[] = {1, 3, 16, 100};
#endif

int g_fail = 0, g_pass = 0;
void report(bool ok, const std::string& what) {
    std::printf("%-4s %s\n", ok ? "PASS" : "FAIL", what.c_str());
    std::fflush(stdout);
    ok ? ++g_pass : ++g_fail;
}

std::string tname(GgmlType t) {
    return std::string(quant::type_name(t));
}

// Bitwise comparison of float arrays: equal iff memcmp equal; max |a - b| (inf for NaN/inf).
struct Cmp {
    bool equal = true;
    double max_diff = 0;
    size_t n_diff = 0;
};
Cmp compare(const float* got, const float* want, size_t n) {
    Cmp c;
    for (size_t i = 0; i < n; ++i) {
        if (std::memcmp(&got[i], &want[i], 4) != 0) {
            c.equal = false;
            ++c.n_diff;
            const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
            c.max_diff = std::max(c.max_diff, std::isfinite(d) ? d : INFINITY);
        }
    }
    return c;
}
std::string verdict(const Cmp& c) {
    return fmt("max |diff| %.3g, bitwise equal: %s", c.max_diff, c.equal ? "yes" : "no") +
           (c.equal ? "" : fmt(" (%zu differ)", c.n_diff));
}

uint16_t rand_half(std::mt19937& rng) {
    const uint32_t r = rng();
    const uint16_t sign = (r & 1) ? 0x8000 : 0;
    const uint16_t mant = static_cast<uint16_t>((r >> 1) & 0x3FF);
    if ((r >> 11) % 16 == 0) return sign | mant;         // subnormal or zero
    const int e = 1 + static_cast<int>((r >> 15) % 22);  // up to 2^6
    return static_cast<uint16_t>(sign | (e << 10) | mant);
}

// Weight rows: even rows quantized from Gaussians (per-row scale and offset), odd rows random
// payload bytes with random finite f16 scale fields (every code pattern, extreme scales).
std::vector<uint8_t> make_weights(GgmlType t, int n_out, int k, std::mt19937& rng) {
    const size_t rb = quant::row_size(t, k);
    std::vector<uint8_t> w(rb * n_out);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> row(k);
    for (int r = 0; r < n_out; ++r) {
        uint8_t* p = w.data() + rb * r;
        if (r % 2 == 0 || t == GgmlType::F32 || t == GgmlType::BF16) {
            const float sc = std::ldexp(1.0f, static_cast<int>(rng() % 12) - 8);
            const float off = (r % 3 == 0) ? 0.3f * sc : 0.f;
            for (auto& v : row) v = nd(rng) * sc + off;
            quant::quantize_row(t, row.data(), p, k);
            continue;
        }
        for (size_t i = 0; i < rb; ++i) p[i] = static_cast<uint8_t>(rng());
        const int64_t bs = quant::type_traits(t).block_size;
        auto set_h = [&](uint8_t* q) {
            const uint16_t h = rand_half(rng);
            std::memcpy(q, &h, 2);
        };
        if (t == GgmlType::F16) {
            for (int i = 0; i < k; ++i) set_h(p + 2 * i);
            continue;
        }
        const size_t blk = quant::row_size(t, bs);
        for (int64_t b = 0; b < k / bs; ++b) {
            uint8_t* q = p + b * blk;
            switch (t) {
                case GgmlType::Q4_0:
                case GgmlType::Q5_0:
                case GgmlType::Q8_0:
                    set_h(q);
                    break;
                case GgmlType::Q4_1:
                case GgmlType::Q5_1:
                    set_h(q);
                    set_h(q + 2);
                    break;
                case GgmlType::Q2_K:
                    set_h(q + 80);
                    set_h(q + 82);
                    break;
                case GgmlType::Q3_K:
                    set_h(q + 108);
                    break;
                case GgmlType::Q4_K:
                case GgmlType::Q5_K:
                    set_h(q);
                    set_h(q + 2);
                    break;
                case GgmlType::Q6_K:
                    set_h(q + 208);
                    break;
                case GgmlType::MXFP4:
                    q[0] = static_cast<uint8_t>(100 + rng() % 40);
                    break;
                default:
                    break;
            }
        }
    }
    return w;
}

// Activation rows: Gaussians with a per-row scale, outliers, an all-zero 256-element stretch in
// some rows, and values on rounding ties of the Q8 codes.
std::vector<float> make_acts(int n_act, int k, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> x(static_cast<size_t>(n_act) * k);
    for (int j = 0; j < n_act; ++j) {
        float* r = x.data() + static_cast<size_t>(j) * k;
        const float sc = std::ldexp(1.0f, static_cast<int>(rng() % 16) - 8);
        for (int i = 0; i < k; ++i) r[i] = nd(rng) * sc;
        for (int i = static_cast<int>(rng() % 97); i < k; i += 97) r[i] *= 50.f;
        if (j % 4 == 1 && k >= 512) std::fill(r + 256, r + 512, 0.f);
        if (j % 4 == 2 && k >= 32) {  // a block whose max is 127 * 0.25: codes land on .5 ties
            for (int i = 0; i < 32; ++i)
                r[i] = 0.125f * static_cast<float>(static_cast<int>(rng() % 255) - 127);
            r[5] = 127 * 0.25f;
        }
    }
    return x;
}

// The CPU's packing of activation rows x (n_act, k) for weight type t.
std::vector<uint8_t> cpu_pack(GgmlType t, const std::vector<float>& x, int n_act, int k) {
    const GgmlType vt = quant::type_traits(t).vec_dot_type;
    const size_t prb = quant::row_size(vt, k);
    std::vector<uint8_t> packed(prb * n_act);
    for (int j = 0; j < n_act; ++j)
        quant::quantize_row(vt, x.data() + static_cast<size_t>(j) * k, packed.data() + j * prb, k);
    return packed;
}

bool is_float_type(GgmlType t) {
    return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
}

// GPU packing (aq, ad) against the CPU's packed rows: codes, scales (as the CPU holds them) and
// the 16-element sums, field by field. Returns the number of mismatching fields.
size_t pack_mismatches(GgmlType vt, const std::vector<uint8_t>& cpu, const std::vector<int8_t>& q,
                       const std::vector<float4>& d, int n_rows, int k) {
    const size_t prb = quant::row_size(vt, k);
    size_t bad = 0;
    auto feq = [](float a, float b) { return std::memcmp(&a, &b, 4) == 0; };
    for (int j = 0; j < n_rows; ++j) {
        const uint8_t* row = cpu.data() + prb * j;
        for (int c = 0; c < k / 32; ++c) {
            const int8_t* gq = q.data() + static_cast<size_t>(j) * k + 32 * c;
            const float4 gd = d[static_cast<size_t>(j) * (k / 32) + c];
            uint32_t sums;
            std::memcpy(&sums, &gd.w, 4);
            const int g_lo = static_cast<int16_t>(sums & 0xffff),
                      g_hi = static_cast<int16_t>(sums >> 16);
            const int8_t* cq;
            int lo = 0, hi = 0;
            if (vt == GgmlType::Q8_K) {
                const uint8_t* b = row + 292 * (c / 8);
                float dk;
                std::memcpy(&dk, b, 4);
                cq = reinterpret_cast<const int8_t*>(b + 4) + 32 * (c % 8);
                int16_t bs[2];
                std::memcpy(bs, b + 4 + 256 + 4 * (c % 8), 4);
                lo = bs[0];
                hi = bs[1];
                bad += !feq(gd.x, dk);
            } else {
                const size_t bsz = vt == GgmlType::Q8_0 ? 34 : 36;
                const uint8_t* b = row + bsz * c;
                uint16_t dh, sh;
                std::memcpy(&dh, b, 2);
                bad += !feq(gd.x, quant::fp16_to_fp32(dh));
                if (vt == GgmlType::Q8_1) {
                    std::memcpy(&sh, b + 2, 2);
                    bad += !feq(gd.y, quant::fp16_to_fp32(sh));
                }
                cq = reinterpret_cast<const int8_t*>(b + bsz - 32);
                for (int i = 0; i < 16; ++i) lo += cq[i], hi += cq[16 + i];
            }
            bad += std::memcmp(gq, cq, 32) != 0;
            bad += (g_lo != lo) + (g_hi != hi);
        }
    }
    return bad;
}

// ---- matrix products ---------------------------------------------------------------------------

void test_dmmv(std::mt19937& rng, GgmlType t, int k, int n_act) {
    const int n_out = kOut;  // not a multiple of the rows per block
    const int n0 = kJob0;    // job 0: rows [0, n0), job 1: the rest (with a bias)
    const size_t rb = quant::row_size(t, k);
    const auto w = make_weights(t, n_out, k, rng);
    const auto x = make_acts(n_act, k, rng);
    std::vector<float> bias(n_out - n0);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (auto& b : bias) b = nd(rng);
    const GgmlType vt = quant::type_traits(t).vec_dot_type;
    const auto packed = cpu_pack(t, x, n_act, k);
    const size_t prb = quant::row_size(vt, k);

    uint8_t* dw = dev_copy(w);
    float* dx = dev_copy(x);
    float* dbias = dev_copy(bias);
    cu::RowOut o;
    o.f = dev_poisoned<float>(x.size());
    o.q = dev_poisoned<int8_t>(x.size());
    o.d = dev_poisoned<float4>(x.size() / 32);
    o.mode = cu::pack_mode_for(static_cast<int>(t));
    const bool fl = is_float_type(t);
    cu::pack_rows(dx, n_act, k, o, nullptr);
    if (!fl && n_act == kActs[std::size(kActs) - 2]) {
        const size_t bad = pack_mismatches(vt, packed, host_copy(o.q, x.size()),
                                           host_copy(o.d, x.size() / 32), n_act, k);
        report(bad == 0,
               fmt("exact pack_rows for %-5s (%s), %d rows: %zu fields differ, bitwise equal: %s",
                   tname(t).c_str(), tname(vt).c_str(), n_act, bad, bad ? "no" : "yes"));
    }
    float* y0 = dev_poisoned<float>(static_cast<size_t>(n_act) * n0);
    float* y1 = dev_poisoned<float>(static_cast<size_t>(n_act) * (n_out - n0));
    cu::MatJob jobs[2];
    jobs[0].w = dw;
    jobs[0].row_bytes = rb;
    jobs[0].n_out = n0;
    jobs[0].y = y0;
    jobs[0].ldy = n0;
    jobs[1].w = dw + rb * n0;
    jobs[1].row_bytes = rb;
    jobs[1].n_out = n_out - n0;
    jobs[1].y = y1;
    jobs[1].ldy = n_out - n0;
    jobs[1].bias = dbias;
    cu::dmmv_exact(static_cast<int>(t), jobs, 2, k, o.q, o.d, o.f, n_act, false, nullptr);
    auto g0 = host_copy(y0, static_cast<size_t>(n_act) * n0);
    auto g1 = host_copy(y1, static_cast<size_t>(n_act) * (n_out - n0));
    // The CPU tier's outputs: vec_dot on its own packing (+ bias as cpu::matmul adds it).
    std::vector<float> want(static_cast<size_t>(n_act) * n_out), got(want.size());
    for (int j = 0; j < n_act; ++j)
        for (int r = 0; r < n_out; ++r) {
            float v = quant::vec_dot(t, k, w.data() + rb * r, packed.data() + prb * j);
            if (r >= n0) v += bias[r - n0];
            want[static_cast<size_t>(j) * n_out + r] = v;
            got[static_cast<size_t>(j) * n_out + r] =
                r < n0 ? g0[static_cast<size_t>(j) * n0 + r]
                       : g1[static_cast<size_t>(j) * (n_out - n0) + (r - n0)];
        }
    const Cmp c = compare(got.data(), want.data(), want.size());
    report(c.equal, fmt("exact dmmv %-5s x %3d rows (k %d, %d out, 2 jobs, bias): ",
                        tname(t).c_str(), n_act, k, n_out) +
                        verdict(c));
    // accumulate: y = y + (W x + b), one rounded add, as the CPU's residual x += y
    cu::dmmv_exact(static_cast<int>(t), jobs, 2, k, o.q, o.d, o.f, n_act, true, nullptr);
    auto a0 = host_copy(y0, g0.size());
    auto a1 = host_copy(y1, g1.size());
    std::vector<float> want2(want.size()), got2(want.size());
    for (int j = 0; j < n_act; ++j)
        for (int r = 0; r < n_out; ++r) {
            const size_t i = static_cast<size_t>(j) * n_out + r;
            want2[i] = want[i] + want[i];
            got2[i] = r < n0 ? a0[static_cast<size_t>(j) * n0 + r]
                             : a1[static_cast<size_t>(j) * (n_out - n0) + (r - n0)];
        }
    const Cmp c2 = compare(got2.data(), want2.data(), want2.size());
    report(c2.equal,
           fmt("exact dmmv %-5s x %3d rows accumulate: ", tname(t).c_str(), n_act) + verdict(c2));
    for (void* p : {static_cast<void*>(dw), static_cast<void*>(dx), static_cast<void*>(dbias),
                    static_cast<void*>(o.f), static_cast<void*>(o.q), static_cast<void*>(o.d),
                    static_cast<void*>(y0), static_cast<void*>(y1)})
        cudaFree(p);
}

// Expert gathering (MoE, MatJob::expert): n_exp matrices of n_out rows back to back, activation
// row j multiplied by the matrix of expert ids[j]; each output must equal vec_dot of that
// expert's row (n_act > 16 also checks that a gathered call never takes the tiled GEMM).
void test_dmmv_gathered(std::mt19937& rng, GgmlType t, int k, int n_act) {
    const int n_out = kOut, n_exp = 3;
    const size_t rb = quant::row_size(t, k);
    const auto w = make_weights(t, n_out * n_exp, k, rng);
    const auto x = make_acts(n_act, k, rng);
    std::vector<int32_t> ids(n_act);
    for (int j = 0; j < n_act; ++j) ids[j] = static_cast<int32_t>(rng() % n_exp);
    const GgmlType vt = quant::type_traits(t).vec_dot_type;
    const auto packed = cpu_pack(t, x, n_act, k);
    const size_t prb = quant::row_size(vt, k);
    uint8_t* dw = dev_copy(w);
    float* dx = dev_copy(x);
    int32_t* dids = dev_copy(ids);
    cu::RowOut o;
    o.f = dev_poisoned<float>(x.size());
    o.q = dev_poisoned<int8_t>(x.size());
    o.d = dev_poisoned<float4>(x.size() / 32);
    o.mode = cu::pack_mode_for(static_cast<int>(t));
    cu::pack_rows(dx, n_act, k, o, nullptr);
    float* y = dev_poisoned<float>(static_cast<size_t>(n_act) * n_out);
    cu::MatJob job;
    job.w = dw;
    job.row_bytes = rb;
    job.n_out = n_out;
    job.y = y;
    job.ldy = n_out;
    job.expert = dids;
    job.expert_stride = rb * n_out;
    cu::dmmv_exact(static_cast<int>(t), &job, 1, k, o.q, o.d, o.f, n_act, false, nullptr);
    const auto got = host_copy(y, static_cast<size_t>(n_act) * n_out);
    std::vector<float> want(got.size());
    for (int j = 0; j < n_act; ++j)
        for (int r = 0; r < n_out; ++r) {
            const uint8_t* row = w.data() + rb * (static_cast<size_t>(ids[j]) * n_out + r);
            want[static_cast<size_t>(j) * n_out + r] =
                quant::vec_dot(t, k, row, packed.data() + prb * j);
        }
    const Cmp c = compare(got.data(), want.data(), want.size());
    report(c.equal, fmt("exact dmmv %-5s x %3d rows gathered over %d experts: ", tname(t).c_str(),
                        n_act, n_exp) +
                        verdict(c));
    for (void* p : {static_cast<void*>(dw), static_cast<void*>(dx), static_cast<void*>(dids),
                    static_cast<void*>(o.f), static_cast<void*>(o.q), static_cast<void*>(o.d),
                    static_cast<void*>(y)})
        cudaFree(p);
}

// Float weights with row lengths that leave groups of 8 and single elements (the tails of the
// canonical float order); activations straight from the host (no packing).
void test_dmmv_float_tail(std::mt19937& rng, GgmlType t, int k, int n_act) {
    const int n_out = 77;
    const size_t rb = quant::row_size(t, k);
    const auto w = make_weights(t, n_out, k, rng);
    const auto x = make_acts(n_act, k, rng);
    uint8_t* dw = dev_copy(w);
    float* dx = dev_copy(x);
    float* dy = dev_poisoned<float>(static_cast<size_t>(n_act) * n_out);
    cu::MatJob job;
    job.w = dw;
    job.row_bytes = rb;
    job.n_out = n_out;
    job.y = dy;
    job.ldy = n_out;
    cu::dmmv_exact(static_cast<int>(t), &job, 1, k, nullptr, nullptr, dx, n_act, false, nullptr);
    auto got = host_copy(dy, static_cast<size_t>(n_act) * n_out);
    std::vector<float> want(got.size());
    for (int j = 0; j < n_act; ++j)
        for (int r = 0; r < n_out; ++r)
            want[static_cast<size_t>(j) * n_out + r] =
                quant::vec_dot(t, k, w.data() + rb * r, x.data() + static_cast<size_t>(j) * k);
    const Cmp c = compare(got.data(), want.data(), want.size());
    report(c.equal, fmt("exact dmmv %-5s x %3d rows (k %d: tails): ", tname(t).c_str(), n_act, k) +
                        verdict(c));
    cudaFree(dw);
    cudaFree(dx);
    cudaFree(dy);
}

// ---- packings with norm / GLU ------------------------------------------------------------------

void test_packings(std::mt19937& rng, int mode, int dim) {
    const int n = 5;
    const float eps = 1e-6f;
    const GgmlType vt = mode == cu::kPackQ8_0   ? GgmlType::Q8_0
                        : mode == cu::kPackQ8_1 ? GgmlType::Q8_1
                                                : GgmlType::Q8_K;
    const GgmlType wt = mode == cu::kPackQ8_0   ? GgmlType::Q8_0
                        : mode == cu::kPackQ8_1 ? GgmlType::Q4_1
                                                : GgmlType::Q4_K;
    auto x = make_acts(n, dim, rng);
    auto u = make_acts(n, dim, rng);
    std::vector<float> w(dim);
    std::normal_distribution<float> nd(1.f, 0.3f);
    for (auto& v : w) v = nd(rng);
    float* dx = dev_copy(x);
    float* du = dev_copy(u);
    float* dw = dev_copy(w);
    struct Case {
        const char* name;
        int kind;  // 0 norm with w, 1 norm without w, 2 pack, 3 swiglu, 4 geglu
    };
    for (const Case& cs :
         {Case{"rms_norm_out(w)", 0}, Case{"rms_norm_out", 1}, Case{"pack_rows", 2},
          Case{"glu_out swiglu", 3}, Case{"glu_out geglu", 4}}) {
        cu::RowOut o;
        o.f = dev_poisoned<float>(x.size());
        o.q = dev_poisoned<int8_t>(x.size());
        o.d = dev_poisoned<float4>(x.size() / 32);
        o.mode = mode;
        std::vector<float> want(x.size());
        for (int r = 0; r < n; ++r) {
            const float* xr = x.data() + static_cast<size_t>(r) * dim;
            const float* ur = u.data() + static_cast<size_t>(r) * dim;
            float* yr = want.data() + static_cast<size_t>(r) * dim;
            const float sc = canon::rms_scale(xr, dim, eps);
            for (int i = 0; i < dim; ++i) {
                switch (cs.kind) {
                    case 0:
                        yr[i] = canon::rms_apply(xr[i], sc, w[i]);
                        break;
                    case 1:
                        yr[i] = canon::rms_apply(xr[i], sc);
                        break;
                    case 2:
                        yr[i] = xr[i];
                        break;
                    case 3:
                        yr[i] = canon::mul(canon::silu(xr[i]), ur[i]);
                        break;
                    default:
                        yr[i] = canon::mul(canon::gelu_tanh(xr[i]), ur[i]);
                        break;
                }
            }
        }
        switch (cs.kind) {
            case 0:
                cu::rms_norm_out(dx, dw, eps, n, dim, o, true, nullptr);
                break;
            case 1:
                cu::rms_norm_out(dx, nullptr, eps, n, dim, o, true, nullptr);
                break;
            case 2:
                cu::pack_rows(dx, n, dim, o, nullptr);
                break;
            default:
                cu::glu_out(dx, du, dim, cs.kind == 4, n, dim, o, nullptr);
                break;
        }
        const auto f = host_copy(o.f, x.size());
        const Cmp c = compare(f.data(), want.data(), want.size());
        const size_t bad = pack_mismatches(vt, cpu_pack(wt, want, n, dim), host_copy(o.q, x.size()),
                                           host_copy(o.d, x.size() / 32), n, dim);
        report(
            c.equal && bad == 0,
            fmt("exact %-16s -> %-4s dim %d: f32 ", cs.name, tname(vt).c_str(), dim) + verdict(c) +
                fmt("; packed fields differing %zu, bitwise equal: %s", bad, bad ? "no" : "yes"));
        cudaFree(o.f);
        cudaFree(o.q);
        cudaFree(o.d);
    }
    if (mode == cu::kPackQ8_0) {  // Gemma's post-norm: x += rms_apply(h, scale, w)
        float* dacc = dev_copy(u);
        cu::add_rms_norm(dacc, dx, dw, eps, n, dim, true, nullptr);
        const auto got = host_copy(dacc, u.size());
        std::vector<float> want(u);
        for (int r = 0; r < n; ++r) {
            const float* xr = x.data() + static_cast<size_t>(r) * dim;
            const float sc = canon::rms_scale(xr, dim, eps);
            for (int i = 0; i < dim; ++i)
                want[static_cast<size_t>(r) * dim + i] = canon::add(
                    want[static_cast<size_t>(r) * dim + i], canon::rms_apply(xr[i], sc, w[i]));
        }
        const Cmp c = compare(got.data(), want.data(), want.size());
        report(c.equal, fmt("exact add_rms_norm dim %d: ", dim) + verdict(c));
        cudaFree(dacc);
    }
    cudaFree(dx);
    cudaFree(du);
    cudaFree(dw);
}

// ---- embedding rows ----------------------------------------------------------------------------

void test_get_rows(std::mt19937& rng, GgmlType t, int k) {
    const int n_table = 40, n = 9;
    const size_t rb = quant::row_size(t, k);
    const auto w = make_weights(t, n_table, k, rng);
    std::vector<int32_t> ids(n);
    for (auto& i : ids) i = static_cast<int32_t>(rng() % n_table);
    ids[1] = ids[0];
    uint8_t* dw = dev_copy(w);
    int32_t* did = dev_copy(ids);
    for (float scale : {1.0f, std::sqrt(static_cast<float>(k))}) {
        float* dout = dev_poisoned<float>(static_cast<size_t>(n) * k);
        cu::get_rows(static_cast<int>(t), dw, rb, did, n, k, scale, dout, nullptr);
        const auto got = host_copy(dout, static_cast<size_t>(n) * k);
        std::vector<float> want(got.size());
        for (int r = 0; r < n; ++r) {  // cpu::get_rows
            float* y = want.data() + static_cast<size_t>(r) * k;
            quant::dequantize_row(t, w.data() + rb * ids[r], y, k);
            if (scale != 1.0f)
                for (int i = 0; i < k; ++i) y[i] *= scale;
        }
        const Cmp c = compare(got.data(), want.data(), want.size());
        report(c.equal,
               fmt("exact get_rows %-5s k %d scale %g: ", tname(t).c_str(), k, scale) + verdict(c));
        cudaFree(dout);
    }
    cudaFree(dw);
    cudaFree(did);
}

// ---- whole matrices to f16 (the cuBLAS prefill path)
// ---------------------------------------------

// dequant_f16 writes each element as f16 of the decoded value; the decode's float operations may
// be contracted differently from dequantize_row, so each element may be one f16 step off the
// CPU value rounded to f16 (never more; a zero may differ in sign), and every element must be
// written: 37 rows so that the chunk count is no multiple of a warp (the staged stores' tail).
void test_dequant_f16(std::mt19937& rng, GgmlType t, int k) {
    const int n = 37;
    const size_t rb = quant::row_size(t, k);
    const auto w = make_weights(t, n, k, rng);
    uint8_t* dw = dev_copy(w);
    uint16_t* dh = dev_poisoned<uint16_t>(static_cast<size_t>(n) * k);
    cu::dequant_f16(static_cast<int>(t), dw, rb, n, k, dh, nullptr);
    const auto got = host_copy(dh, static_cast<size_t>(n) * k);
    std::vector<float> row(k);
    size_t off = 0, far = 0;
    for (int r = 0; r < n; ++r) {
        quant::dequantize_row(t, w.data() + rb * r, row.data(), k);
        for (int i = 0; i < k; ++i) {
            const uint16_t want = quant::fp32_to_fp16(row[i]),
                           g = got[static_cast<size_t>(r) * k + i];
            if (g == want || ((g | want) & 0x7fff) == 0) continue;  // (+0 and -0 alike)
            ++off;
            const int d = static_cast<int>(g) - static_cast<int>(want);
            if ((g & 0x8000) != (want & 0x8000) || d > 1 || d < -1) ++far;
        }
    }
    report(far == 0, fmt("dequant_f16 %-5s %d x %d: %zu elements one f16 step off, %zu further",
                         tname(t).c_str(), n, k, off, far));
    cudaFree(dw);
    cudaFree(dh);
}

}  // namespace

int main(int, char**) {
    const cu::Probe p = cu::probe();
    if (p.devices.empty()) {
        std::printf("SKIP cuda_test_exact_ops: %s\n", p.reason.c_str());
        return 77;
    }
    const auto& d = p.devices.front();
    std::printf("device: %s, cc %d.%d, %zu MiB; CPU kernels: %s\n", d.name.c_str(), d.cc_major,
                d.cc_minor, d.mem_total >> 20, quant::simd_level());
    std::mt19937 rng(20261129);
    using T = GgmlType;
    // ZINC_EXACT_OPS_ONLY=<type name> (e.g. mxfp4): that type's cases only, no packings (for the
    // slow host emulation).
    const char* only = std::getenv("ZINC_EXACT_OPS_ONLY");
    for (T t : {T::F32, T::F16, T::BF16, T::Q4_0, T::Q4_1, T::Q5_0, T::Q5_1, T::Q8_0, T::Q2_K,
                T::Q3_K, T::Q4_K, T::Q5_K, T::Q6_K, T::MXFP4}) {
        if (only && tname(t) != only) continue;
        const bool kq = quant::type_traits(t).block_size == 256;
        for (int n_act : kActs)
            test_dmmv(rng, t, kq ? kKQuantK : kLegacyK, n_act);  // odd block counts
        test_dmmv(rng, t, kq ? kEvenKQuantK : kEvenLegacyK, 2);  // even
        if (is_float_type(t))
            for (int k : {8, 40, 77, 2085}) test_dmmv_float_tail(rng, t, k, 3);
        test_get_rows(rng, t, kq ? 768 : 576);
        if (!is_float_type(t)) test_dequant_f16(rng, t, kq ? 768 : 576);
        for (int n_act : {1, 5, 19}) test_dmmv_gathered(rng, t, kq ? kKQuantK : kLegacyK, n_act);
    }
    if (only) {
        std::printf("%s: %d passed, %d failed\n", g_fail ? "FAIL" : "PASS", g_pass, g_fail);
        return g_fail ? 1 : 0;
    }
    for (int mode : {cu::kPackQ8_0, cu::kPackQ8_1, cu::kPackQ8K})
        for (int dim : {576, 2048})
            if (mode != cu::kPackQ8K || dim % 256 == 0) test_packings(rng, mode, dim);
    test_packings(rng, cu::kPackQ8K, 1536);
    std::printf("%s: %d passed, %d failed\n", g_fail ? "FAIL" : "PASS", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
