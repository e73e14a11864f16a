// zinc/backend/cuda/runner_sample.cpp — CudaRunner::forward_sample: the step's logits rows are
// sampled on the device (sampling.cu) and only token ids (and logprobs when asked) cross to the
// host. The sampling settings, penalty windows and uniforms of all rows go over in one pinned
// transfer before the step; the results come back in one small transfer after it.
//
// The forward pass runs through CudaRunner::run (graphs, validation, evidence unchanged), which
// enqueues the sampling kernel and the result copy (after_step_) after the step's kernels and
// before its single stream sync: one host sync per step, as with forward().
#include <cmath>
#include <span>

#include "backend/cuda/runner_impl.h"

namespace zinc::cuda {
namespace runner_detail {

struct SampleState {
    int cap_rows = 0, cap_pen = 0;
    uint8_t* dev = nullptr;   // [params cap_rows][ids cap_pen][counts cap_pen]
    uint8_t* host = nullptr;  // pinned mirror of dev
    float* orig = nullptr;    // (cap_pen) raw logits of the penalised ids
    SampleOut* out_d = nullptr;
    SampleOut* out_h = nullptr;  // pinned

    size_t ids_off() const { return static_cast<size_t>(cap_rows) * sizeof(SampleRowParams); }
    size_t counts_off() const { return ids_off() + static_cast<size_t>(cap_pen) * sizeof(int32_t); }
    size_t bytes() const { return counts_off() + static_cast<size_t>(cap_pen) * sizeof(int32_t); }

    void release() {
        if (dev) cudaFree(dev);
        if (orig) cudaFree(orig);
        if (out_d) cudaFree(out_d);
        if (host) cudaFreeHost(host);
        if (out_h) cudaFreeHost(out_h);
        dev = host = nullptr;
        orig = nullptr;
        out_d = out_h = nullptr;
    }
    ~SampleState() { release(); }

    Result<void> reserve(int rows, int pen) {
        if (rows <= cap_rows && pen <= cap_pen && dev) return {};
        release();
        cap_rows = std::max(rows, cap_rows);
        cap_pen = std::max({pen, cap_pen, 256});
        CU_TRY("sampling buffers", cudaMalloc(reinterpret_cast<void**>(&dev), bytes()));
        CU_TRY("sampling buffers", cudaMallocHost(reinterpret_cast<void**>(&host), bytes()));
        CU_TRY("sampling buffers",
               cudaMalloc(reinterpret_cast<void**>(&orig), cap_pen * sizeof(float)));
        CU_TRY("sampling buffers",
               cudaMalloc(reinterpret_cast<void**>(&out_d), cap_rows * sizeof(SampleOut)));
        CU_TRY("sampling buffers",
               cudaMallocHost(reinterpret_cast<void**>(&out_h), cap_rows * sizeof(SampleOut)));
        return {};
    }
};

}  // namespace runner_detail

SampleRowParams sample_row_params(float temperature, int32_t top_k, float top_p, float min_p,
                                  float repeat, float presence, float frequency, double uniform) {
    SampleRowParams p;
    p.uniform = uniform;
    p.temperature = temperature;
    p.inv_t = temperature > 0.0f ? 1.0f / temperature : 0.0f;
    p.top_p = top_p;
    p.min_p_on = min_p > 0.0f ? 1 : 0;
    p.log_min_p = min_p > 0.0f ? std::log(std::min(min_p, 1.0f)) : 0.0f;
    p.top_k = top_k;
    p.repeat = repeat;
    p.presence = presence;
    p.frequency = frequency;
    return p;
}

namespace runner_detail {

bool CudaRunner::samples_on_device() const {
    return env_on("ZINC_GPU_SAMPLING");
}

Result<void> CudaRunner::forward_sample(const model::Batch& batch,
                                        std::span<const model::RowSampling> rows,
                                        model::SampledToken* out, bool want_logprob) {
    int n_out = 0;
    for (size_t s = 0; s < batch.seqs.size(); ++s) {
        if (batch.seqs[s].all_logits)
            return make_error("cuda forward_sample: sequence " + std::to_string(s) +
                              " asks for all_logits (use forward)");
        if (batch.seqs[s].want_logits) ++n_out;
    }
    if (static_cast<int>(rows.size()) != n_out)
        return make_error("cuda forward_sample: " + std::to_string(rows.size()) +
                          " sampling rows for " + std::to_string(n_out) + " logits rows");
    int n_pen = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
        const model::RowSampling& r = rows[i];
        if (r.penalty_ids.size() != r.penalty_counts.size())
            return make_error("cuda forward_sample: row " + std::to_string(i) + " has " +
                              std::to_string(r.penalty_ids.size()) + " penalty ids but " +
                              std::to_string(r.penalty_counts.size()) + " counts");
        for (int32_t id : r.penalty_ids)
            if (id < 0 || id >= cfg_.n_vocab)
                return make_error("cuda forward_sample: row " + std::to_string(i) +
                                  " penalty id " + std::to_string(id) + " out of range [0, " +
                                  std::to_string(cfg_.n_vocab) + ")");
        if (!(r.uniform >= 0.0 && r.uniform < 1.0))
            return make_error("cuda forward_sample: row " + std::to_string(i) + " uniform " +
                              std::to_string(r.uniform) + " outside [0, 1)");
        n_pen += static_cast<int>(r.penalty_ids.size());
    }
    if (!sample_) sample_ = std::make_shared<SampleState>();
    SampleState& st = *sample_;
    if (auto r = st.reserve(std::max(n_out, 1), n_pen); !r) return r.error();

    // Stage the rows' settings with the constants the CPU sampler derives (same host libm).
    auto* prm = reinterpret_cast<SampleRowParams*>(st.host);
    auto* ids = reinterpret_cast<int32_t*>(st.host + st.ids_off());
    auto* cnt = reinterpret_cast<int32_t*>(st.host + st.counts_off());
    int off = 0;
    for (int i = 0; i < n_out; ++i) {
        const model::RowSampling& r = rows[i];
        SampleRowParams p =
            sample_row_params(r.temperature, r.top_k, r.top_p, r.min_p, r.repeat_penalty,
                              r.presence_penalty, r.frequency_penalty, r.uniform);
        const bool any = r.repeat_penalty != 1.0f || r.presence_penalty != 0.0f ||
                         r.frequency_penalty != 0.0f;
        p.pen_off = off;
        p.pen_n = any ? static_cast<int32_t>(r.penalty_ids.size()) : 0;
        for (int j = 0; j < p.pen_n; ++j) {
            ids[off + j] = r.penalty_ids[j];
            cnt[off + j] = r.penalty_counts[j];
        }
        off += p.pen_n;
        prm[i] = p;
    }
    if (n_out > 0) {
        // Params, then both id arrays in one copy (the arrays sit at fixed offsets).
        CU_TRY("sampling params", cudaMemcpyAsync(st.dev, st.host, st.bytes(),
                                                  cudaMemcpyHostToDevice, stream_));
    }
    // The sampler runs inside run(), after the step's kernels and before its one sync.
    after_step_ = [&](int rows_out) -> cudaError_t {
        if (rows_out != n_out) return cudaErrorInvalidValue;
        if (rows_out == 0) return cudaSuccess;
        sample_rows(logits_, n_out, cfg_.n_vocab, reinterpret_cast<const SampleRowParams*>(st.dev),
                    reinterpret_cast<const int32_t*>(st.dev + st.ids_off()),
                    reinterpret_cast<const int32_t*>(st.dev + st.counts_off()), st.orig, st.out_d,
                    want_logprob, stream_);
        ++launches_;  // (not in the evidence tally: the runtime has no sampling op yet)
        if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
        return cudaMemcpyAsync(st.out_h, st.out_d, n_out * sizeof(SampleOut),
                               cudaMemcpyDeviceToHost, stream_);
    };
    auto r = run(batch, nullptr, nullptr);
    after_step_ = nullptr;
    if (!r) return r.error();
    for (int i = 0; i < n_out; ++i) {
        out[i].id = st.out_h[i].token;
        out[i].used_uniform = st.out_h[i].used != 0;
        out[i].logprob = st.out_h[i].logprob;
    }
    return {};
}

}  // namespace runner_detail
}  // namespace zinc::cuda
