// zinc/backend/cpu/matmul.cpp — packed-activation matmul over quantized weight rows.
#include "backend/cpu/matmul.h"

#include <algorithm>
#include <cstdlib>

#include "quant/quant.h"
#include "util/check.h"

namespace zinc::cpu {
namespace {

// Rows per work block: enough rows that the block's weights (a few KiB to tens of KiB) are
// reused from L1/L2 by all tokens of the chunk, few enough that two threads balance well.
int64_t rows_per_block(const MatView& w, int n_tokens) {
    if (n_tokens == 1) return 32;
    const int64_t target_bytes = 16 * 1024;
    const int64_t rb = target_bytes / static_cast<int64_t>(std::max<size_t>(w.row_bytes, 1));
    return std::clamp<int64_t>(rb, 4, 64);
}

}  // namespace

void MatmulScratch::Free::operator()(uint8_t* p) const {
    std::free(p);
}

MatmulScratch::MatmulScratch() {
    const char* e = std::getenv("ZINC_MATMUL_MULTI");
    use_multi_ = !(e && e[0] == '0');
    const char* t = std::getenv("ZINC_MATMUL_TILED");
    use_tiled_ = use_multi_ && !(t && t[0] == '0');
}
MatmulScratch::~MatmulScratch() = default;

void MatmulScratch::reserve(int n_types, size_t bytes_per_type) {
    ZINC_CHECK(n_types >= 1 && n_types <= kMaxTypes);
    if (bytes_per_type > cap_) {
        cap_ = (bytes_per_type + 63) / 64 * 64;
        for (auto& b : bufs_) b.reset();
    }
    for (int i = 0; i < n_types; ++i) {
        if (!bufs_[i]) {
            void* p = std::aligned_alloc(64, cap_);
            ZINC_CHECK(p != nullptr);
            bufs_[i].reset(static_cast<uint8_t*>(p));
        }
    }
}

void matmul(ThreadPool& pool, MatmulScratch& scratch, std::span<const MatmulJob> jobs,
            const float* x, int n_tokens, int64_t ldx) {
    ZINC_CHECK(!jobs.empty() && jobs.size() <= 8 && n_tokens > 0);
    const int64_t k = jobs[0].w->n_cols;

    // Distinct activation packings needed by the jobs, and which one each job uses.
    quant::GgmlType types[MatmulScratch::kMaxTypes];
    int n_types = 0;
    int job_type[8];
    for (size_t j = 0; j < jobs.size(); ++j) {
        ZINC_CHECK(jobs[j].w->n_cols == k);
        ZINC_CHECK(jobs[j].ldy >= jobs[j].w->n_rows);
        const quant::GgmlType vt = quant::type_traits(jobs[j].w->type).vec_dot_type;
        int found = -1;
        for (int i = 0; i < n_types; ++i) {
            if (types[i] == vt) found = i;
        }
        if (found < 0) {
            ZINC_CHECK(n_types < MatmulScratch::kMaxTypes);
            types[n_types] = vt;
            found = n_types++;
        }
        job_type[j] = found;
    }
    size_t packed_row[MatmulScratch::kMaxTypes];
    size_t need = 0;
    for (int i = 0; i < n_types; ++i) {
        packed_row[i] = quant::row_size(types[i], k);
        need = std::max(need, packed_row[i] * static_cast<size_t>(n_tokens));
    }
    scratch.reserve(n_types, need);

    // Work blocks: job j contributes ceil(n_rows / rb_j) blocks.
    int64_t rb[8];
    int64_t block_start[9];
    block_start[0] = 0;
    for (size_t j = 0; j < jobs.size(); ++j) {
        rb[j] = rows_per_block(*jobs[j].w, n_tokens);
        block_start[j + 1] = block_start[j] + (jobs[j].w->n_rows + rb[j] - 1) / rb[j];
    }
    const int64_t n_blocks = block_start[jobs.size()];

    // 1. Pack activations: (type, token) pairs; split across the pool when there are many (its own
    // job: parts of a job may not wait for each other), inline for a decode step.
    const int64_t n_pack = static_cast<int64_t>(n_types) * n_tokens;
    const bool pack_in_job = n_pack > 2 && pool.n_threads() > 1;
    auto pack = [&](int64_t p) {
        const int ti = static_cast<int>(p / n_tokens);
        const int64_t t = p % n_tokens;
        quant::quantize_row(types[ti], x + t * ldx, scratch.buffer(ti) + t * packed_row[ti], k);
    };
    if (!pack_in_job) {
        for (int64_t p = 0; p < n_pack; ++p) pack(p);
    }

    if (pack_in_job) {
        pool.run([&](int ith, int nth) {
            for (int64_t p = ith; p < n_pack; p += nth) pack(p);
        });
    }

    pool.run([&](int ith, int nth) {
        // 2. Row blocks: each part takes a contiguous range of the blocks of all jobs, so each
        // core streams its weights sequentially (decode is memory-bound and the prefetchers
        // like long runs). A part whose thread is late is run by the caller (ThreadPool).
        const Range range = split_range(n_blocks, ith, nth);
        size_t j = 0;
        for (int64_t b = range.begin; b < range.end; ++b) {
            while (b >= block_start[j + 1]) ++j;
            const MatmulJob& job = jobs[j];
            const MatView& w = *job.w;
            const int64_t r0 = (b - block_start[j]) * rb[j];
            const int64_t r1 = std::min(r0 + rb[j], w.n_rows);
            const uint8_t* a = scratch.buffer(job_type[j]);
            const size_t a_row = packed_row[job_type[j]];
            if (n_tokens == 1 || !scratch.use_multi()) {
                for (int t = 0; t < n_tokens; ++t) {
                    const uint8_t* at = a + static_cast<size_t>(t) * a_row;
                    float* yt = job.y + t * job.ldy;
                    for (int64_t r = r0; r < r1; ++r) {
                        float v = quant::vec_dot(w.type, k, w.data + r * w.row_bytes, at);
                        if (job.bias) v += job.bias[r];
                        yt[r] = v;
                    }
                }
                continue;
            }
            if (scratch.use_tiled() && quant::gemm_tile_is_tiled(w.type)) {
                // Register-tiled GEMM over the block's rows and a chunk of tokens: the chunk's
                // packed activations (kChunk x a_row bytes) and the block's weights (~16 KiB)
                // stay in L1/L2 while the micro-kernel walks them in tiles.
                constexpr int kChunk = 32;
                for (int t0 = 0; t0 < n_tokens; t0 += kChunk) {
                    const int nt = std::min(kChunk, n_tokens - t0);
                    float* yt = job.y + t0 * job.ldy;
                    quant::gemm_tile(w.type, k, w.data + r0 * w.row_bytes, w.row_bytes,
                                     static_cast<int>(r1 - r0),
                                     a + static_cast<size_t>(t0) * a_row, a_row, nt, yt + r0,
                                     static_cast<size_t>(job.ldy));
                    if (job.bias) {
                        for (int i = 0; i < nt; ++i) {
                            for (int64_t r = r0; r < r1; ++r) yt[i * job.ldy + r] += job.bias[r];
                        }
                    }
                }
                continue;
            }
            // Token tiles of kTile rows: the tile's packed activations stay in L1 while every
            // weight row of the block is multiplied with them (each weight block is unpacked
            // once per tile by vec_dot_multi).
            constexpr int kTile = 8;
            float tmp[kTile];
            for (int t0 = 0; t0 < n_tokens; t0 += kTile) {
                const int nt = std::min(kTile, n_tokens - t0);
                const uint8_t* at = a + static_cast<size_t>(t0) * a_row;
                for (int64_t r = r0; r < r1; ++r) {
                    quant::vec_dot_multi(w.type, k, w.data + r * w.row_bytes, at, a_row, nt, tmp);
                    const float bias_r = job.bias ? job.bias[r] : 0.0f;
                    for (int i = 0; i < nt; ++i) job.y[(t0 + i) * job.ldy + r] = tmp[i] + bias_r;
                }
            }
        }
    });
}

void matmul(ThreadPool& pool, MatmulScratch& scratch, const MatView& w, const float* x,
            int n_tokens, int64_t ldx, float* y, int64_t ldy, const float* bias) {
    const MatmulJob job{&w, y, ldy, bias};
    matmul(pool, scratch, std::span<const MatmulJob>(&job, 1), x, n_tokens, ldx);
}

}  // namespace zinc::cpu
