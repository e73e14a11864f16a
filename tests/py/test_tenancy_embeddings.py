"""Embeddings under `zinc serve --tenants FILE` (docs/server.md, "Tenants" and "Embeddings"): an
embedding request's input tokens are its tenant's prompt tokens, in /v1/usage, the per-tenant
/metrics, the SQLite ledger and its tokens_per_day quota, and the prefill token bucket that paces
them in the engine; another tenant's counters do not move. On SmolLM2 (a decoder: causal
embeddings, mean pooling), with token-id inputs so the counts are known exactly.
"""
import time

import pytest

from server_harness import MODEL_ID
from test_server_tenancy import start, usage


def embed(s, key, inputs):
    return s.client(api_key=key).embeddings.create(model=MODEL_ID, input=inputs,
                                                   encoding_format="float")


def ids(n, first=100):
    return [first + k for k in range(n)]


def metric(s, name, labels):
    for line in s.get("/metrics").text.splitlines():
        if line.startswith(name + "{" + labels + "}"):
            return float(line.split()[-1])
    raise AssertionError(f"{name}{{{labels}}} missing")


def test_embedding_tokens_are_the_tenants_prompt_tokens(tmp_path):
    tenants = [{"id": "rag", "key": "key-rag", "quotas": {"tokens_per_day": 100000}},
               {"id": "chat", "key": "key-chat"}]
    s, _ = start(tmp_path, tenants, "--parallel", 2, "-c", "512", ledger="usage.sqlite")
    try:
        before, other = usage(s, "key-rag").json(), usage(s, "key-chat").json()
        rows0 = metric(s, "zinc_tenant_served_rows_total", 'tenant="rag",kind="prefill"')
        r = embed(s, "key-rag", [ids(7), ids(5, 300)])
        assert r.usage.prompt_tokens == 12 and len(r.data) == 2
        after = usage(s, "key-rag").json()
        assert after["requests"] == before["requests"] + 1
        assert after["prompt_tokens"] == before["prompt_tokens"] + 12
        assert after["completion_tokens"] == before["completion_tokens"]
        assert after["ledger"]["day_tokens"] == before["ledger"]["day_tokens"] + 12
        assert after["ledger"]["month_tokens"] == before["ledger"]["month_tokens"] + 12
        # The engine served them as the tenant's prefill rows.
        assert after["scheduler"]["prefill_rows"] >= 12
        assert metric(s, "zinc_tenant_served_rows_total", 'tenant="rag",kind="prefill"') == rows0 + 12
        assert metric(s, "zinc_tenant_tokens_total", 'tenant="rag",kind="prompt"') == \
            after["prompt_tokens"]
        # A string input counts the tokens the response reports.
        r = embed(s, "key-rag", "The cat sat on the mat.")
        assert usage(s, "key-rag").json()["prompt_tokens"] == after["prompt_tokens"] + \
            r.usage.prompt_tokens
        # Nothing moved for the other tenant.
        o = usage(s, "key-chat").json()
        assert (o["requests"], o["prompt_tokens"]) == (other["requests"], other["prompt_tokens"])
        # Without a key of a tenant: 401.
        assert s.post("/v1/embeddings", {"input": [ids(3)]}).status == 401
    finally:
        s.close()


def test_tokens_per_day_counts_embeddings(tmp_path):
    tenants = [{"id": "rag", "key": "key-rag", "quotas": {"tokens_per_day": 30}},
               {"id": "chat", "key": "key-chat"}]
    s, _ = start(tmp_path, tenants, "--parallel", 2, "-c", "512", ledger="usage.sqlite")
    try:
        assert embed(s, "key-rag", [ids(20)]).usage.prompt_tokens == 20
        hdr = {"Authorization": "Bearer key-rag"}
        r = s.post("/v1/embeddings", {"model": MODEL_ID, "input": [ids(6), ids(5)]}, headers=hdr)
        assert r.status == 429, r.text  # 20 in the ledger + 11 > 30
        err = r.json()["error"]
        assert err["param"] == "tokens_per_day" and "embedding input tokens" in err["message"]
        assert int(r.headers["retry-after"]) >= 1
        # A completion is charged against the same ledger: its prompt + max_tokens no longer fit.
        r = s.post("/v1/completions", {"model": MODEL_ID, "prompt": "hi", "max_tokens": 10},
                   headers=hdr)
        assert r.status == 429 and r.json()["error"]["param"] == "tokens_per_day", r.text
        assert embed(s, "key-rag", [ids(10)]).usage.prompt_tokens == 10  # 30: still within
        # The other tenant is served meanwhile, against its own row of the ledger.
        r = s.post("/v1/embeddings", {"model": MODEL_ID, "input": [ids(26)]},
                   headers={"Authorization": "Bearer key-chat"})
        assert r.status == 200, r.text
        u = usage(s, "key-rag").json()
        assert u["ledger"]["day_tokens"] == 30
        assert u["rejections"]["tokens_per_day"] == 2
        assert usage(s, "key-chat").json()["ledger"]["day_tokens"] == 26
    finally:
        s.close()


def test_max_context_counts_embedding_inputs(tmp_path):
    s, _ = start(tmp_path, [{"id": "rag", "key": "key-rag", "quotas": {"max_context": 16}}],
                 "--parallel", 2, "-c", "512")
    try:
        r = s.post("/v1/embeddings", {"model": MODEL_ID, "input": [ids(4), ids(17)]},
                   headers={"Authorization": "Bearer key-rag"})
        assert r.status == 429, r.text
        assert r.json()["error"]["param"] == "max_context"
        assert embed(s, "key-rag", [ids(16)]).usage.prompt_tokens == 16
    finally:
        s.close()


def test_prefill_bucket_paces_embeddings(tmp_path):
    # 20 prompt tokens a second, a bucket of 10: 8 inputs of 50 tokens (400) need at least
    # (400 - 10) / 20 = 19.5 s; the unlimited tenant embeds the same in far less (a loaded
    # 2-core CI machine: ~5 s, so the pacing stays well above the machine's own time).
    tenants = [{"id": "slow", "key": "key-slow",
                "quotas": {"prefill_tokens_per_s": 20, "burst_s": 0.5}},
               {"id": "fast", "key": "key-fast"}]
    s, _ = start(tmp_path, tenants, "--parallel", 2, "-c", "512")
    try:
        inputs = [ids(50, 100 + 60 * k) for k in range(8)]
        t0 = time.monotonic()
        fast = embed(s, "key-fast", inputs)
        t_fast = time.monotonic() - t0
        t0 = time.monotonic()
        slow = embed(s, "key-slow", inputs)
        t_slow = time.monotonic() - t0
        assert slow.usage.prompt_tokens == fast.usage.prompt_tokens == 400
        if t_fast > 12.0:
            pytest.skip(f"this machine embeds 400 tokens in {t_fast:.1f} s: too slow to tell")
        assert t_slow >= 17.5, (t_slow, t_fast)
        assert t_slow < 45, t_slow  # paced, not stalled
        # Same vectors: pacing changes when rows run, not what they compute.
        for a, b in zip(fast.data, slow.data):
            assert max(abs(x - y) for x, y in zip(a.embedding, b.embedding)) < 1e-5
    finally:
        s.close()
