"""Tenants under `zinc serve --tenants FILE` (docs/server.md, "Tenants"), with the real openai
client: the key names the tenant (never the `user` field), each quota refused with 429 +
Retry-After + the quota's name while other tenants are served, the SQLite usage ledger (exact
under concurrency, persistent across a restart), SIGHUP reload (a bad file keeps the old one,
in-flight requests survive), tenant-isolated prefix caching with sharing groups, decode token
buckets, interactive preempting batch with identical output, /v1/usage and per-tenant /metrics.
"""
import hashlib
import signal
import threading
import time
from pathlib import Path

import pytest

from server_harness import MODEL_ID, Server


def digest(key):
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def toml_config(tenants, ledger=None):
    out = []
    if ledger:
        out += ["[ledger]", f'path = "{ledger}"', ""]
    for t in tenants:
        out.append("[[tenant]]")
        for k, v in t.items():
            if k in ("quotas", "key"):
                continue
            out.append(f"{k} = " + (f'"{v}"' if isinstance(v, str) else str(v).lower()
                                     if isinstance(v, bool) else str(v)))
        out.append(f'api_keys = ["{digest(t["key"])}"]')
        if t.get("quotas"):
            out.append("[tenant.quotas]")
            for k, v in t["quotas"].items():
                out.append(f"{k} = {v}")
        out.append("")
    return "\n".join(out)


def start(tmp_path, tenants, *args, ledger=None, name="tenants.toml"):
    cfg = tmp_path / name
    cfg.write_text(toml_config(tenants, ledger))
    return Server("--tenants", cfg, *args), cfg


def complete(s, key, prompt="Say hi.", max_tokens=4, **kw):
    return s.client(api_key=key).completions.create(model=MODEL_ID, prompt=prompt,
                                                    max_tokens=max_tokens, temperature=0, **kw)


def usage(s, key, tenant=None):
    r = s.get("/v1/usage" + (f"/{tenant}" if tenant else ""),
              headers={"Authorization": f"Bearer {key}"})
    return r


def quota_error(s, key, body):
    body = dict({"model": MODEL_ID, "temperature": 0}, **body)
    r = s.post("/v1/completions", body, headers={"Authorization": f"Bearer {key}"})
    assert r.status == 429, (r.status, r.text)
    assert int(r.headers["retry-after"]) >= 1
    err = r.json()["error"]
    assert err["code"] == "quota_exceeded" and err["type"] == "rate_limit_error"
    return err


BASIC = [
    {"id": "alice", "key": "key-alice", "class": "interactive", "admin": True},
    {"id": "bob", "key": "key-bob", "quotas": {"max_context": 64, "max_kv_blocks": 6}},
    {"id": "carol", "key": "key-carol", "quotas": {"max_concurrent": 1, "max_queued": 0}},
]


@pytest.fixture(scope="module")
def basic(tmp_path_factory):
    s, _ = start(tmp_path_factory.mktemp("basic"), BASIC, "--parallel", 4, "-c", "512")
    yield s
    assert s.stop() == 0, s.stderr()
    s.close()


def test_key_names_the_tenant_not_the_user_field(basic):
    before = usage(basic, "key-bob").json()["requests"]
    assert usage(basic, "key-alice").json()["requests"] == 0
    r = complete(basic, "key-bob", user="alice")
    assert r.usage.completion_tokens == 4
    # The request's evidence names the tenant and class it ran as.
    assert r.model_extra["zinc"]["evidence"]["tenant"] == {"id": "bob", "class": "standard"}
    r = complete(basic, "key-alice")
    assert r.model_extra["zinc"]["evidence"]["tenant"] == {"id": "alice", "class": "interactive"}
    assert usage(basic, "key-bob").json()["requests"] == before + 1
    u = usage(basic, "key-alice", "bob").json()  # admin reads another tenant
    assert u["tenant"] == "bob" and u["requests"] == before + 1
    assert usage(basic, "key-bob", "alice").status == 403  # not an admin
    import openai
    with pytest.raises(openai.AuthenticationError):
        complete(basic, "key-nobody")
    assert basic.post("/v1/completions", {"prompt": "x"}).status == 401


def test_max_context_and_kv_blocks_are_429_with_the_quota_name(basic):
    err = quota_error(basic, "key-bob", {"prompt": "word " * 80, "max_tokens": 4})
    assert err["param"] == "max_context" and "max_context" in err["message"]
    # A short prompt whose max_tokens takes it over the limit.
    err = quota_error(basic, "key-bob", {"prompt": "hi", "max_tokens": 64})
    assert err["param"] == "max_context"
    # Another tenant is served the same request meanwhile.
    r = complete(basic, "key-alice", prompt="word " * 80, max_tokens=2)
    assert r.usage.completion_tokens == 2
    rej = usage(basic, "key-bob").json()["rejections"]
    assert rej["max_context"] >= 2


def test_max_kv_blocks_429(tmp_path):
    s, _ = start(tmp_path, [{"id": "t", "key": "k", "quotas": {"max_kv_blocks": 2}}],
                 "--parallel", 2, "-c", "512")
    try:
        err = quota_error(s, "k", {"prompt": "hi", "max_tokens": 40})  # 3 blocks of 16
        assert err["param"] == "max_kv_blocks"
        assert complete(s, "k", max_tokens=8).usage.completion_tokens == 8  # 1 block fits
    finally:
        assert s.stop() == 0, s.stderr()
        s.close()


def test_max_concurrent_with_no_queue_is_429_while_others_run(basic):
    done = {}

    def long_run():
        done["r"] = complete(basic, "key-carol", max_tokens=120, extra_body={"ignore_eos": True})

    th = threading.Thread(target=long_run)
    th.start()
    deadline = time.monotonic() + 30
    while usage(basic, "key-carol").json()["in_flight_sequences"] == 0:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    err = quota_error(basic, "key-carol", {"prompt": "hi", "max_tokens": 2})
    assert err["param"] == "max_concurrent"
    assert complete(basic, "key-bob", max_tokens=2).usage.completion_tokens == 2
    th.join()
    assert done["r"].usage.completion_tokens == 120


def test_per_tenant_metrics(basic):
    m = basic.get("/metrics").text
    assert 'zinc_tenant_requests_total{tenant="bob"}' in m
    assert 'zinc_tenant_rejections_total{tenant="bob",quota="max_context"}' in m
    assert 'zinc_tenant_virtual_counter{tenant="alice"}' in m
    assert 'zinc_tenant_tokens_total{tenant="carol",kind="completion"}' in m


def test_ledger_exact_under_concurrency_and_survives_restart(tmp_path):
    ledger = tmp_path / "usage.sqlite"
    tenants = [{"id": "d", "key": "kd", "quotas": {"tokens_per_day": 100000}},
               {"id": "e", "key": "ke", "quotas": {"tokens_per_month": 100000}}]
    s, cfg = start(tmp_path, tenants, "--parallel", 4, "-c", "256", ledger=ledger)
    total = {"d": 0}
    try:
        lock = threading.Lock()

        def one(i):
            r = complete(s, "kd", prompt=f"Count to {i}.", max_tokens=3 + i % 3)
            with lock:
                total["d"] += r.usage.total_tokens

        ths = [threading.Thread(target=one, args=(i,)) for i in range(12)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        u = usage(s, "kd").json()
        assert u["ledger"]["day_tokens"] == total["d"], u
        assert u["ledger"]["month_tokens"] == total["d"]
    finally:
        assert s.stop() == 0, s.stderr()
        s.close()
    # Restart on the same ledger: the day's usage is still there, and counts against the quota.
    tenants[0]["quotas"]["tokens_per_day"] = total["d"] + 10
    cfg.write_text(toml_config(tenants, ledger))
    s = Server("--tenants", cfg, "--parallel", 2, "-c", "256")
    try:
        assert usage(s, "kd").json()["ledger"]["day_tokens"] == total["d"]
        err = quota_error(s, "kd", {"prompt": "Say hi.", "max_tokens": 16})
        assert err["param"] == "tokens_per_day"
        assert complete(s, "ke").usage.completion_tokens == 4  # e is unaffected
    finally:
        assert s.stop() == 0, s.stderr()
        s.close()


def test_sighup_reload_keeps_in_flight_and_refuses_a_bad_file(tmp_path):
    tenants = [{"id": "a", "key": "ka"}]
    s, cfg = start(tmp_path, tenants, "--parallel", 2, "-c", "512")
    try:
        out = {}

        def long_run():
            out["r"] = complete(s, "ka", max_tokens=80, extra_body={"ignore_eos": True})

        th = threading.Thread(target=long_run)
        th.start()
        time.sleep(0.3)
        cfg.write_text(toml_config(tenants + [{"id": "b", "key": "kb"}]))
        s.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "reloaded" not in s.stderr():
            assert time.monotonic() < deadline, s.stderr()
            time.sleep(0.05)
        assert complete(s, "kb").usage.completion_tokens == 4
        # A malformed file: refused with file:line:column and why; the old config stays.
        cfg.write_text(toml_config(tenants) + '\n[[tenant]]\nid = "c"\nclass = "urgent"\n')
        s.proc.send_signal(signal.SIGHUP)
        while "previous tenants config stays" not in s.stderr():
            assert time.monotonic() < deadline, s.stderr()
            time.sleep(0.05)
        assert f"{cfg}:" in s.stderr() and "class 'urgent'" in s.stderr()
        line = [l for l in s.stderr().splitlines() if "urgent" in l][0]
        assert f"{cfg}:" + str(len(toml_config(tenants).splitlines()) + 4) in line, line
        assert complete(s, "kb").usage.completion_tokens == 4
        th.join()
        assert out["r"].usage.completion_tokens == 80
    finally:
        assert s.stop() == 0, s.stderr()
        s.close()


def test_malformed_file_at_start_is_refused_with_line(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[[tenant]]\nid = "a"\napi_keys = ["plaintext-key"]\n')
    import subprocess
    from server_harness import SMOL, ZINC
    p = subprocess.run([str(ZINC), "serve", "-m", str(SMOL), "--port", "0", "--tenants",
                        str(cfg)], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert f"{cfg}:3:" in p.stderr and "stored hashed" in p.stderr, p.stderr


def cached(r):
    return r.usage.prompt_tokens_details.cached_tokens


def test_prefix_cache_is_isolated_per_tenant_unless_grouped(tmp_path):
    tenants = [{"id": "a", "key": "ka"}, {"id": "b", "key": "kb"},
               {"id": "c", "key": "kc", "cache_group": "team"},
               {"id": "d", "key": "kd", "cache_group": "team"}]
    s, _ = start(tmp_path, tenants, "--parallel", 2, "-c", "512")
    try:
        prompt = "The quick brown fox jumps over the lazy dog. " * 8
        assert cached(complete(s, "ka", prompt=prompt, max_tokens=1)) == 0
        assert cached(complete(s, "ka", prompt=prompt, max_tokens=1)) > 0  # own cache hits
        assert cached(complete(s, "kb", prompt=prompt, max_tokens=1)) == 0  # isolated
        assert cached(complete(s, "kc", prompt=prompt, max_tokens=1)) == 0
        assert cached(complete(s, "kd", prompt=prompt, max_tokens=1)) > 0  # shared group
    finally:
        assert s.stop() == 0, s.stderr()
        s.close()


def test_decode_token_bucket_paces_a_tenant(tmp_path):
    tenants = [{"id": "slow", "key": "ks", "quotas": {"decode_tokens_per_s": 4, "burst_s": 0.25}},
               {"id": "fast", "key": "kf"}]
    s, _ = start(tmp_path, tenants, "--parallel", 2, "-c", "256")
    try:
        t0 = time.monotonic()
        r = complete(s, "ks", max_tokens=21, extra_body={"ignore_eos": True})
        slow = time.monotonic() - t0
        assert r.usage.completion_tokens == 21
        assert slow >= 20 / 4 - 1.0, slow  # 20 decode tokens at 4/s (bucket of 1 to start)
        t0 = time.monotonic()
        complete(s, "kf", max_tokens=21, extra_body={"ignore_eos": True})
        fast = time.monotonic() - t0
        print(f"21 tokens: paced tenant (4 tok/s) {slow:.2f} s, unpaced {fast:.2f} s")
    finally:
        assert s.stop() == 0, s.stderr()
        s.close()


def test_interactive_preempts_batch_and_batch_output_is_unchanged(tmp_path):
    tenants = [{"id": "bat", "key": "kb", "class": "batch"},
               {"id": "int", "key": "ki", "class": "interactive"}]
    s, _ = start(tmp_path, tenants, "--parallel", 1, "-c", "512")
    try:
        prompt = "Write a long story about a lighthouse keeper."
        alone = complete(s, "kb", prompt=prompt, max_tokens=200,
                         extra_body={"ignore_eos": True}).choices[0].text
        out = {}

        def batch():
            out["b"] = complete(s, "kb", prompt=prompt, max_tokens=200,
                                extra_body={"ignore_eos": True})
            out["b_end"] = time.monotonic()

        th = threading.Thread(target=batch)
        th.start()
        time.sleep(0.5)
        r = complete(s, "ki", prompt="Say hi.", max_tokens=3)
        out["i_end"] = time.monotonic()
        th.join()
        assert r.usage.completion_tokens == 3
        assert out["i_end"] < out["b_end"], "the interactive request waited for the batch one"
        assert out["b"].choices[0].text == alone
        m = s.get("/metrics").text
        q = [l for l in m.splitlines() if l.startswith("zinc_preemptions_qos_total ")]
        assert q and float(q[0].split()[-1]) >= 1, q
    finally:
        assert s.stop() == 0, s.stderr()
        s.close()


def test_another_tenants_bad_and_cancelled_requests_change_nothing(basic):
    prompt = "List three colours."
    before = complete(basic, "key-alice", prompt=prompt, max_tokens=12).choices[0].text
    served_before = usage(basic, "key-alice").json()["requests"]
    # bob: malformed JSON, a wrong type, and a stream abandoned mid-way.
    r = basic.post("/v1/completions", data=b"{not json", headers={"Authorization": "Bearer key-bob"})
    assert r.status == 400
    r = basic.post("/v1/completions", {"model": MODEL_ID, "prompt": "x", "max_tokens": "many"},
                   headers={"Authorization": "Bearer key-bob"})
    assert r.status == 400
    stream = basic.client(api_key="key-bob").completions.create(
        model=MODEL_ID, prompt="Tell a long tale.", max_tokens=50, stream=True,
        extra_body={"ignore_eos": True})
    next(iter(stream))
    stream.close()
    after = complete(basic, "key-alice", prompt=prompt, max_tokens=12).choices[0].text
    assert after == before
    assert usage(basic, "key-alice").json()["requests"] == served_before + 1
    assert usage(basic, "key-alice").json()["rejections"] == {}
