// zinc/engine/embedding_step.cpp — one embedding step: pack jobs, take KV blocks, run
// forward_embed, pool the finished jobs.
#include "engine/embedding_step.h"

#include <algorithm>
#include <map>
#include <string>

#include "model/pooling.h"

namespace zinc::engine {

namespace {

void release_blocks(EmbeddingJob& job, BlockManager& bm) {
    for (int32_t b : job.blocks) bm.release(b);
    job.blocks.clear();
}

// Hold blocks for positions [0, n_pos); false (nothing kept from this call) when they run out.
bool hold_blocks(EmbeddingJob& job, BlockManager& bm, int32_t n_pos) {
    const size_t need = static_cast<size_t>((n_pos + bm.block_size() - 1) / bm.block_size());
    const size_t had = job.blocks.size();
    while (job.blocks.size() < need) {
        const int32_t b = bm.allocate();
        if (b < 0) {
            while (job.blocks.size() > had) {
                bm.release(job.blocks.back());
                job.blocks.pop_back();
            }
            return false;
        }
        job.blocks.push_back(b);
    }
    return true;
}

}  // namespace

void fail_embedding(EmbeddingJob& job, BlockManager& bm, const std::string& error) {
    release_blocks(job, bm);
    EmbeddingResult r;
    r.error = error;
    r.n_tokens = static_cast<int32_t>(job.params.tokens.size());
    job.sink(std::move(r));
}

EmbeddingStepResult run_embedding_step(std::deque<EmbeddingJob>& jobs, model::Runner& runner,
                                       BlockManager& bm, SchedulingPolicy& policy,
                                       const EmbeddingStepOptions& opts) {
    struct Planned {
        EmbeddingJob* job;
        int32_t n;  // rows this step
    };
    std::vector<Planned> plan;
    EmbeddingStepResult out;
    int32_t rows = 0;
    std::map<std::string, int32_t> allowance;  // per tenant, what is left of it this step
    for (EmbeddingJob& job : jobs) {
        if (static_cast<int32_t>(plan.size()) == opts.max_seqs || rows == opts.max_rows) break;
        const int32_t left = static_cast<int32_t>(job.params.tokens.size()) - job.n_done;
        int32_t n = std::min(left, opts.max_rows - rows);
        if (opts.bidirectional && n < left) break;  // whole, in one step, or wait for the next
        auto [a, fresh] = allowance.try_emplace(job.params.tenant, 0);
        if (fresh) a->second = policy.embedding_allowance(job.params.tenant);
        if (a->second <= 0) {  // its tenant's bucket is empty: later jobs of others may run
            out.held_back = true;
            continue;
        }
        if (!opts.bidirectional) n = std::min(n, a->second);
        if (!hold_blocks(job, bm, job.n_done + n)) break;
        a->second -= n;
        plan.push_back({&job, n});
        rows += n;
    }
    if (plan.empty()) return out;
    for (const Planned& p : plan) policy.on_embedding_served(p.job->params.tenant, p.n);

    std::vector<int32_t> tokens;
    std::vector<model::BatchSeq> seqs;
    tokens.reserve(static_cast<size_t>(rows));
    for (const Planned& p : plan) {
        model::BatchSeq s;
        s.row0 = static_cast<int32_t>(tokens.size());
        s.n_tokens = p.n;
        s.pos0 = p.job->n_done;
        s.block_table = p.job->blocks;
        s.want_logits = false;
        const auto& t = p.job->params.tokens;
        tokens.insert(tokens.end(), t.begin() + p.job->n_done, t.begin() + p.job->n_done + p.n);
        seqs.push_back(s);
    }
    std::vector<float> hidden(static_cast<size_t>(rows) * static_cast<size_t>(opts.n_embd));
    const Result<void> r = runner.forward_embed(model::Batch{tokens, seqs}, hidden.data());
    for (size_t i = 0; i < plan.size(); ++i) {
        EmbeddingJob& job = *plan[i].job;
        if (!r) {
            fail_embedding(job, bm, r.error().message);
            job.n_done = -1;  // delivered
            continue;
        }
        const float* src = hidden.data() + static_cast<size_t>(seqs[i].row0) * opts.n_embd;
        job.hidden.insert(job.hidden.end(), src,
                          src + static_cast<size_t>(plan[i].n) * opts.n_embd);
        job.n_done += plan[i].n;
        if (job.n_done < static_cast<int32_t>(job.params.tokens.size())) continue;
        EmbeddingResult res;
        res.n_tokens = job.n_done;
        res.embedding =
            model::pool_normalized(job.hidden.data(), job.n_done, opts.n_embd, job.params.pooling);
        release_blocks(job, bm);
        job.sink(std::move(res));
        job.n_done = -1;  // delivered
    }
    std::erase_if(jobs, [](const EmbeddingJob& j) { return j.n_done < 0; });
    out.rows = rows;
    return out;
}

}  // namespace zinc::engine
