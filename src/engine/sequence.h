// zinc/engine/sequence.h — one request as the scheduler and the step loop see it: its tokens,
// its block table, how much of it is in the KV cache, and its sampler.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/drafter.h"
#include "engine/engine.h"
#include "engine/grammar_matcher.h"
#include "engine/prefix_cache.h"
#include "engine/sampler.h"

namespace zinc::engine {

enum class SeqState { Waiting, Running, Finished };

struct Sequence {
    Sequence(RequestId id_, uint64_t arrival_, RequestParams params_, EventSink sink_)
        : id(id_),
          arrival(arrival_),
          params(std::move(params_)),
          sink(std::move(sink_)),
          tokens(params.prompt),
          n_prompt(static_cast<int32_t>(params.prompt.size())),
          hash_root(params.cache_namespace.empty() ? kRootHash
                                                   : namespace_root(params.cache_namespace)),
          sampler(params.sampling) {
        if (params.grammar) grammar = std::make_unique<GrammarMatcher>(params.grammar);
    }

    RequestId id;
    uint64_t arrival;  // submission order (FCFS key)
    RequestParams params;
    EventSink sink;

    std::vector<int32_t> tokens;  // prompt, then every generated token
    int32_t n_prompt;
    /// Positions [0, n_computed) have their K/V in the blocks of `blocks`.
    int32_t n_computed = 0;
    /// Block table: physical block of positions [i * block_size, (i + 1) * block_size).
    std::vector<int32_t> blocks;
    /// Chained hash of full blocks 0, 1, ... of `tokens` (computed lazily, kept across
    /// preemption: it depends only on the tokens).
    std::vector<uint64_t> block_hashes;
    /// Full blocks of `blocks` already offered to the prefix cache.
    int32_t n_blocks_registered = 0;
    /// Parent hash of block 0: kRootHash, or one per cache namespace (RequestParams), so blocks
    /// of different namespaces never match.
    uint64_t hash_root;
    /// Recurrent (hybrid) models: the Runner state slot this sequence holds while Running (-1
    /// otherwise); given at admission, returned at preemption and removal (engine/scheduler.h).
    int32_t state_slot = -1;
    /// Scheduler only: the step number it was last planned in (one entry per step).
    uint64_t planned_step = 0;

    SeqState state = SeqState::Waiting;
    bool admitted_once = false;
    Usage usage;
    runtime::RequestEvidence evidence;  // accumulated per step when the engine has step evidence
    Sampler sampler;
    /// The grammar constraining its tokens (RequestParams::grammar), advanced per sampled token.
    std::unique_ptr<GrammarMatcher> grammar;
    /// Speculative decoding: this step's draft (tokens after the pending one; the engine fills
    /// it before each schedule(), the scheduler may run fewer: ScheduledSeq::n_draft) and the
    /// adaptive draft length.
    std::vector<int32_t> draft;
    DraftLength draft_len;

    int32_t n_generated() const { return static_cast<int32_t>(tokens.size()) - n_prompt; }
    /// Tokens still to run through the model before the next sample.
    int32_t n_pending() const { return static_cast<int32_t>(tokens.size()) - n_computed; }
    /// Running with only its last sampled token to compute: a decode row.
    bool is_decode() const { return n_pending() == 1 && n_generated() > 0; }
};

}  // namespace zinc::engine
