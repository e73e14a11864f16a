// tests/unit/engine/block_manager_test.cpp — BlockManager and PrefixCache: the free list, ref
// counts, copy-on-write, registration, LRU eviction order and miss reasons, and a randomised
// sequence of operations against an independent model of who owns which block, with every
// invariant checked after each operation.
#include "engine/block_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

namespace ze = zinc::engine;

namespace {

std::vector<int32_t> toks(int32_t a, int bs) {
    std::vector<int32_t> t(static_cast<size_t>(bs));
    for (int i = 0; i < bs; ++i) t[i] = a * 100 + i;
    return t;
}

std::vector<int32_t> owners_of(const std::vector<std::vector<int32_t>>& tables, int n) {
    std::vector<int32_t> o(static_cast<size_t>(n), 0);
    for (const auto& t : tables)
        for (int32_t b : t) ++o[b];
    return o;
}

}  // namespace

TEST(BlockManager, AllocatesEveryBlockOnceThenFails) {
    ze::BlockManager bm(8, 4, true);
    std::set<int32_t> got;
    for (int i = 0; i < 8; ++i) {
        const int32_t b = bm.allocate();
        ASSERT_GE(b, 0);
        EXPECT_TRUE(got.insert(b).second);
        EXPECT_EQ(bm.ref_count(b), 1);
    }
    EXPECT_EQ(bm.allocate(), -1);
    EXPECT_EQ(bm.n_used(), 8);
    EXPECT_EQ(bm.n_available(), 0);
    for (int32_t b : got) bm.release(b);
    EXPECT_EQ(bm.n_free(), 8);
    EXPECT_EQ(bm.n_used(), 0);
    bm.check_invariants(std::vector<int32_t>(8, 0));
}

TEST(BlockManager, CopyOnWriteOnlyWhenShared) {
    ze::BlockManager bm(4, 4, true);
    std::vector<std::pair<int32_t, int32_t>> copies;
    auto copy = [&](int32_t s, int32_t d) { copies.emplace_back(s, d); };
    const int32_t a = bm.allocate();
    EXPECT_EQ(bm.make_writable(a, copy), a);  // sole owner, not indexed: no copy
    EXPECT_TRUE(copies.empty());
    bm.retain(a);  // a second owner
    const int32_t b = bm.make_writable(a, copy);
    ASSERT_GE(b, 0);
    EXPECT_NE(b, a);
    ASSERT_EQ(copies.size(), 1u);
    EXPECT_EQ(copies[0], std::make_pair(a, b));
    EXPECT_EQ(bm.ref_count(a), 1);
    EXPECT_EQ(bm.ref_count(b), 1);
    // Indexed block with one owner: copied too (an indexed block's content never changes); the
    // original stays indexed and becomes cached when released.
    const auto t = toks(1, 4);
    const uint64_t h = ze::chain_hash(ze::kRootHash, t);
    ASSERT_TRUE(bm.register_full(a, h, ze::kRootHash, t));
    const int32_t a2 = bm.make_writable(a, copy);
    ASSERT_GE(a2, 0);
    EXPECT_NE(a2, a);
    ASSERT_EQ(copies.size(), 2u);
    EXPECT_EQ(copies[1], std::make_pair(a, a2));
    EXPECT_EQ(bm.ref_count(a), 0);
    EXPECT_TRUE(bm.cache().is_idle(a));
    EXPECT_EQ(bm.cache().lookup(h, ze::kRootHash, t), a);
    EXPECT_FALSE(bm.cache().is_registered(a2));
    bm.retain(a);  // back from the cache
    // No block left for a copy: -1, nothing changes.
    bm.retain(a);
    const int32_t c = bm.allocate();
    ASSERT_GE(c, 0);
    EXPECT_EQ(bm.allocate(), -1);
    EXPECT_EQ(bm.make_writable(a, copy), -1);
    EXPECT_EQ(bm.ref_count(a), 2);
    EXPECT_EQ(copies.size(), 2u);
    bm.check_invariants(std::vector<int32_t>{});
}

TEST(BlockManager, CachedBlocksAreReusedThenEvictedLeastRecentFirst) {
    ze::BlockManager bm(4, 2, true);
    std::vector<int32_t> blk;
    std::vector<uint64_t> h;
    uint64_t parent = ze::kRootHash;
    for (int i = 0; i < 3; ++i) {
        blk.push_back(bm.allocate());
        const auto t = toks(i, 2);
        h.push_back(ze::chain_hash(parent, t));
        ASSERT_TRUE(bm.register_full(blk[i], h[i], parent, t));
        parent = h[i];
    }
    // The same content under another block is not registered twice.
    const int32_t dup = bm.allocate();
    EXPECT_FALSE(bm.register_full(dup, h[0], ze::kRootHash, toks(0, 2)));
    bm.release(dup);
    // Release order 2, 0, 1: LRU order is 2, 0, 1.
    bm.release(blk[2]);
    bm.release(blk[0]);
    bm.release(blk[1]);
    EXPECT_EQ(bm.n_cached(), 3);
    EXPECT_EQ(bm.n_free(), 1);
    EXPECT_EQ(bm.cache().lookup(h[1], h[0], toks(1, 2)), blk[1]);
    EXPECT_EQ(bm.cache().lookup(h[1], h[0], toks(9, 2)), -1);           // same hash, other tokens
    EXPECT_EQ(bm.cache().lookup(h[1], ze::kRootHash, toks(1, 2)), -1);  // other parent
    // Take block 0 back from the cache: it is no longer evictable.
    bm.retain(blk[0]);
    EXPECT_EQ(bm.ref_count(blk[0]), 1);
    EXPECT_EQ(bm.n_cached(), 2);
    // Allocation: the free block first, then evictions in LRU order (2, then 1).
    EXPECT_EQ(bm.allocate(), dup);
    EXPECT_EQ(bm.allocate(), blk[2]);
    EXPECT_TRUE(bm.cache().was_evicted(h[2]));
    EXPECT_FALSE(bm.cache().contains(h[2]));
    EXPECT_EQ(bm.allocate(), blk[1]);
    EXPECT_EQ(bm.allocate(), -1);
    EXPECT_TRUE(bm.cache().contains(h[0]));
    EXPECT_FALSE(bm.cache().was_evicted(h[0]));
    bm.check_invariants(std::vector<int32_t>(4, 1));
}

TEST(BlockManager, DisabledCacheNeverKeepsBlocks) {
    ze::BlockManager bm(2, 2, false);
    const int32_t a = bm.allocate();
    const auto t = toks(0, 2);
    EXPECT_FALSE(bm.register_full(a, ze::chain_hash(ze::kRootHash, t), ze::kRootHash, t));
    bm.release(a);
    EXPECT_EQ(bm.n_free(), 2);
    EXPECT_EQ(bm.n_cached(), 0);
    bm.check_invariants(std::vector<int32_t>(2, 0));
}

TEST(PrefixCache, ChainHashDependsOnParentTokensAndOrder) {
    const std::vector<int32_t> a = {1, 2, 3, 4}, b = {1, 2, 4, 3};
    EXPECT_EQ(ze::chain_hash(7, a), ze::chain_hash(7, a));
    EXPECT_NE(ze::chain_hash(7, a), ze::chain_hash(7, b));
    EXPECT_NE(ze::chain_hash(7, a), ze::chain_hash(8, a));
    EXPECT_NE(ze::chain_hash(7, std::vector<int32_t>{0}),
              ze::chain_hash(7, std::vector<int32_t>{0, 0}));
    // No collisions among many nearby inputs.
    std::set<uint64_t> seen;
    for (int32_t x = 0; x < 2000; ++x) {
        EXPECT_TRUE(
            seen.insert(ze::chain_hash(ze::kRootHash, std::vector<int32_t>{x, x + 1})).second);
    }
}

// Random operations against a model of owners: each "sequence" is a list of block ids it holds.
TEST(BlockManager, RandomisedOperationsKeepInvariants) {
    for (const bool cache_on : {true, false}) {
        for (unsigned seed = 1; seed <= 20; ++seed) {
            std::mt19937 rng(seed);
            const int n = 1 + static_cast<int>(rng() % 24), bs = 2;
            ze::BlockManager bm(n, bs, cache_on);
            std::vector<std::vector<int32_t>> seqs(5);
            std::vector<std::pair<uint64_t, std::vector<int32_t>>> known;  // hashes registered once
            auto pick_seq = [&]() -> std::vector<int32_t>& { return seqs[rng() % seqs.size()]; };
            for (int step = 0; step < 400; ++step) {
                switch (rng() % 7) {
                    case 0:
                    case 1: {  // allocate
                        const int32_t b = bm.allocate();
                        if (b < 0) {
                            EXPECT_EQ(bm.n_available(), 0);
                        } else {
                            pick_seq().push_back(b);
                        }
                        break;
                    }
                    case 2: {  // share a block another sequence holds
                        auto& from = pick_seq();
                        if (from.empty()) break;
                        const int32_t b = from[rng() % from.size()];
                        bm.retain(b);
                        pick_seq().push_back(b);
                        break;
                    }
                    case 3: {  // release
                        auto& s = pick_seq();
                        if (s.empty()) break;
                        const size_t i = rng() % s.size();
                        bm.release(s[i]);
                        s.erase(s.begin() + static_cast<ptrdiff_t>(i));
                        break;
                    }
                    case 4: {  // register a held block under one of a few contents
                        auto& s = pick_seq();
                        if (s.empty()) break;
                        const auto t = toks(static_cast<int32_t>(rng() % 6), bs);
                        const uint64_t h = ze::chain_hash(ze::kRootHash, t);
                        bm.register_full(s[rng() % s.size()], h, ze::kRootHash, t);
                        known.emplace_back(h, t);
                        break;
                    }
                    case 5: {  // copy-on-write before a write
                        auto& s = pick_seq();
                        if (s.empty()) break;
                        const size_t i = rng() % s.size();
                        const int32_t old = s[i];
                        const bool copy = bm.ref_count(old) > 1 || bm.cache().is_registered(old);
                        const int32_t nb = bm.make_writable(old, [](int32_t, int32_t) {});
                        if (nb < 0) {
                            EXPECT_TRUE(copy);
                            EXPECT_EQ(bm.n_available(), 0);
                            break;
                        }
                        EXPECT_EQ(nb != old, copy);
                        s[i] = nb;
                        EXPECT_EQ(bm.ref_count(nb), 1);
                        EXPECT_FALSE(bm.cache().is_registered(nb));
                        break;
                    }
                    case 6: {  // a prompt hit: take a cached block by content
                        if (known.empty()) break;
                        const auto& [h, t] = known[rng() % known.size()];
                        const int32_t b = bm.cache().lookup(h, ze::kRootHash, t);
                        if (b < 0) break;
                        bm.retain(b);
                        pick_seq().push_back(b);
                        break;
                    }
                }
                bm.check_invariants(owners_of(seqs, n));
            }
            for (auto& s : seqs) {
                for (int32_t b : s) bm.release(b);
                s.clear();
            }
            bm.check_invariants(owners_of(seqs, n));
            EXPECT_EQ(bm.n_used(), 0);  // all requests ended: every block free or cached
            EXPECT_EQ(bm.n_free() + bm.n_cached(), n);
            if (!cache_on) {
                EXPECT_EQ(bm.n_cached(), 0);
            }
        }
    }
}
