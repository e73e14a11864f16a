"""bench/tenancy.py (docs/benchmarks.md, "Tenancy"): its checks on synthetic data (each one must
reject what it exists to reject), then one end-to-end run within a short budget on the real
`zinc serve` (SmolLM2) against a fake FIFO llama-server (a one-slot queue written here), so CI
checks that every phase runs and lands in the JSON, the markdown and the plots."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from server_harness import SMOL, SOURCE, ZINC

sys.path.insert(0, str(SOURCE / "bench"))
from harness import tenancy_load as tl  # noqa: E402


def cum(rates, dt=1.0):
    """Cumulative samples [(t, {tenant: rows})] from per-step rates [{tenant: rows/s}]."""
    out, tot = [(0.0, {})], {}
    for i, r in enumerate(rates):
        for k, v in r.items():
            tot[k] = tot.get(k, 0.0) + v * dt
        out.append(((i + 1) * dt, dict(tot)))
    return out


def test_windows_and_split_check():
    good = cum([{"w1": 100, "w2": 200}] * 30)
    wins = tl.windows(good, "w1", "w2", 10)
    assert len(wins) == 3 and all(abs(w["ratio"] - 2) < 1e-9 for w in wins)
    assert tl.split_check(wins, 2.0, 0.10)["ok"]
    # One window at 1.7 (15 % off) fails the 10 % bound.
    bad = cum([{"w1": 100, "w2": 200}] * 20 + [{"w1": 100, "w2": 170}] * 10)
    chk = tl.split_check(tl.windows(bad, "w1", "w2", 10), 2.0, 0.10)
    assert not chk["ok"] and abs(chk["worst"] - 1.7) < 1e-9
    # A tenant served nothing in a window: not ok; no windows at all: not ok.
    assert not tl.split_check(tl.windows(cum([{"w2": 5}] * 10), "w1", "w2", 10), 2, 0.1)["ok"]
    assert not tl.split_check([], 2, 0.1)["ok"]


def test_windows_interpolate_between_uneven_samples():
    s = [(0.0, {"a": 0, "b": 0}), (4.0, {"a": 40, "b": 80}), (20.0, {"a": 200, "b": 400})]
    wins = tl.windows(s, "a", "b", 10)
    assert [round(w["a"]) for w in wins] == [100, 100]
    assert [round(w["b"]) for w in wins] == [200, 200]


def test_service_gap_is_the_largest_over_any_interval():
    # a leads by 50 after 5 s, then b catches up and leads by 30: the gap over [5, 15] is 80.
    s = cum([{"a": 20, "b": 10}] * 5 + [{"a": 10, "b": 18}] * 10)
    assert tl.service_gap(s, "a", "b") == pytest.approx(130 - 50, abs=1e-9)
    assert tl.service_gap(cum([{"a": 5, "b": 5}] * 10), "a", "b") == 0


def test_ttft_summary_counts_a_cut_request_apart_from_failures():
    import importlib.util
    spec = importlib.util.spec_from_file_location("tenancy_script", SOURCE / "bench" / "tenancy.py")
    ten = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ten)
    ok = {"status": 200, "ttft_s": 0.02, "cut": False, "error": None}
    cut = {"status": 0, "ttft_s": None, "cut": True, "error": None}
    bad = {"status": 500, "ttft_s": None, "cut": False, "error": "boom"}
    broke = {"status": 200, "ttft_s": 0.03, "cut": False, "error": "stream ended early"}
    s = ten.ttft_summary([ok, ok, cut, bad, broke])
    assert (s["n"], s["failed"], s["cut"]) == (3, 2, 1), s
    assert ten.ttft_summary([ok, cut])["failed"] == 0


def test_quota_check():
    ok = {"status": 200}
    r429 = {"status": 429, "retry_after": "1", "error": {"param": "max_concurrent"}}
    assert tl.quota_check([ok] * 3 + [r429] * 6, 3, "max_concurrent")["exact"]
    assert not tl.quota_check([ok] * 4 + [r429] * 5, 3, "max_concurrent")["exact"]
    no_retry = dict(r429, retry_after=None)
    assert not tl.quota_check([ok] * 3 + [r429] * 5 + [no_retry], 3, "max_concurrent")["exact"]
    wrong = dict(r429, error={"param": "max_queued"})
    assert not tl.quota_check([ok] * 3 + [wrong] * 6, 3, "max_concurrent")["exact"]
    assert not tl.quota_check([ok] * 3 + [{"status": 500}] * 6, 3, "max_concurrent")["exact"]


def test_served_rows_sums_prefill_and_decode():
    m = textwrap.dedent("""\
        # TYPE zinc_tenant_served_rows_total counter
        zinc_tenant_served_rows_total{tenant="w1",kind="prefill"} 30
        zinc_tenant_served_rows_total{tenant="w1",kind="decode"} 12
        zinc_tenant_served_rows_total{tenant="w2",kind="decode"} 7
        zinc_tenant_requests_total{tenant="w1"} 3
        """)
    assert tl.served_rows(m) == {"w1": 42.0, "w2": 7.0}


def test_step_composition_from_engine_counters():
    m0 = textwrap.dedent("""\
        # TYPE zinc_engine_steps_total counter
        zinc_engine_steps_total 100
        zinc_step_rows_total{kind="decode"} 300
        zinc_step_rows_total{kind="prefill"} 50
        zinc_steps_by_composition_total{kind="decode_only"} 90
        zinc_steps_by_composition_total{kind="prefill_only"} 2
        zinc_steps_by_composition_total{kind="mixed"} 8
        zinc_step_duration_seconds_sum 2.5
        zinc_slots_busy 4
        zinc_queue_depth 12
        zinc_tenant_served_rows_total{tenant="w1",kind="decode"} 7
        """)
    m1 = (m0.replace("steps_total 100", "steps_total 150")
          .replace('"decode"} 300', '"decode"} 500').replace('"prefill"} 50', '"prefill"} 100')
          .replace('"decode_only"} 90', '"decode_only"} 130')
          .replace('"mixed"} 8', '"mixed"} 18').replace("sum 2.5", "sum 3.5")
          .replace("slots_busy 4", "slots_busy 2"))
    e0, e1 = tl.engine_counters(m0), tl.engine_counters(m1)
    assert e0["steps"] == 100 and e0["decode_rows"] == 300 and "w1" not in str(e0)
    c = tl.step_composition(e0, e1, 2.0, [e0, e1])
    assert c["steps"] == 50 and c["steps_per_s"] == 25
    assert c["decode_rows_per_step"] == 4 and c["prefill_rows_per_step"] == 1
    assert c["step_ms"] == pytest.approx(20) and c["busy"] == pytest.approx(0.5)
    assert c["share_decode_only"] == pytest.approx(0.8) and c["share_mixed"] == pytest.approx(0.2)
    assert c["mean_slots_busy"] == 3 and c["mean_queue_depth"] == 12
    # A server without the series (or no time between snapshots): no composition.
    assert tl.step_composition({}, e1, 2.0) is None and tl.step_composition(e0, e1, 0) is None


def test_ab_throughput_alternating_rounds():
    def r(e, i, tok_s, s=10.0):
        return {"engine": e, "round": i, "seconds": s, "output_tok_s": tok_s,
                "steps": {"busy": 1.0}, "server_cpu_ms_per_token": 5.0}
    # The machine slows down in round 1 for both: each pair is 1.0, the whole 1.0.
    d = tl.ab_throughput([r("t", 0, 100), r("f", 0, 100), r("f", 1, 50), r("t", 1, 50)],
                         "t", "f", 0.05)
    assert d["ratio"] == pytest.approx(1.0) and d["within"]
    assert d["pair_ratios"] == [pytest.approx(1.0)] * 2
    assert d["a_steps"]["busy"] == 1.0 and d["b_steps"]["server_cpu_ms_per_token"] == 5.0
    # t slower by 10 %: outside 5 %; rounds of unequal length weigh by their seconds.
    d = tl.ab_throughput([r("t", 0, 90), r("f", 0, 100)], "t", "f", 0.05)
    assert d["ratio"] == pytest.approx(0.9) and not d["within"]
    d = tl.ab_throughput([r("t", 0, 100, 30), r("t", 1, 40, 10), r("f", 0, 85, 40)],
                         "t", "f", 0.05)
    assert d["a_tok_s"] == pytest.approx(85) and d["within"]


# A FIFO llama-server stand-in: -np slots served first come, first served; each request waits
# for a slot, then 40 ms "prefill" and 5 ms a token; streamed like llama-server.
FAKE_LLAMA = r'''
import asyncio, json, sys
from aiohttp import web

a = sys.argv
port = int(a[a.index("--port") + 1])
slots = asyncio.Semaphore(int(a[a.index("-np") + 1]))

async def health(req):
    return web.json_response({"status": "ok"})

async def models(req):
    return web.json_response({"object": "list", "data": [{"id": "fake-model"}]})

async def complete(req):
    body = await req.json()
    chat = req.path.endswith("chat/completions")
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(req)
    async with slots:
        await asyncio.sleep(0.04)
        for i in range(int(body.get("max_tokens", 16))):
            await asyncio.sleep(0.005)
            c = {"index": 0, "delta": {"content": f"w{i} "}} if chat else {"index": 0, "text": "w "}
            await resp.write(b"data: " + json.dumps({"choices": [c]}).encode() + b"\n\n")
    await resp.write(b"data: [DONE]\n\n")
    return resp

app = web.Application()
app.router.add_get("/health", health)
app.router.add_get("/v1/models", models)
app.router.add_post("/v1/completions", complete)
app.router.add_post("/v1/chat/completions", complete)
web.run_app(app, host="127.0.0.1", port=port, print=None)
'''


def test_end_to_end_short_budget(tmp_path):
    if not ZINC.exists():
        pytest.skip(f"{ZINC} not built")
    if not SMOL.exists():
        pytest.skip(f"{SMOL} missing (scripts/fetch-models)")
    pytest.importorskip("aiohttp")
    pytest.importorskip("matplotlib")
    fake = tmp_path / "llama-server"
    fake.write_text(f"#!{sys.executable}\n" + FAKE_LLAMA)
    fake.chmod(0o755)
    out = tmp_path / "out"
    cmd = [sys.executable, str(SOURCE / "bench" / "tenancy.py"), "--zinc", str(ZINC),
           "--llama-server", str(fake), "-m", str(SMOL), "--threads", "2",
           "--engines", "tenants,llama", "--budget-s", "40", "--parallel", "2", "--ctx", "512",
           "--batch-sentences", "4", "--batch-out", "24", "--fair-out", "4", "--n-inter", "3",
           "--think-s", "0.05", "--window-s", "2", "--warm-s", "0.5", "--quota", "2",
           "--logs", str(tmp_path / "logs"), "--out", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    res = json.loads((out / "tenancy.json").read_text())
    print((out / "tenancy.md").read_text())  # shown when an assertion below fails
    for eng in ("tenants", "llama"):
        a = res["a"][eng]
        assert a["idle"]["n"] >= 1 and a["flood"]["n"] >= 1, a
        assert a["idle"]["failed"] == 0 and a["flood"]["failed"] == 0, a
    assert "--tenants" in res["commands"]["tenants"]
    assert res["commands"]["llama"][0] == str(fake)
    b = res["b12"]
    assert b["requests_done"]["w1"] > 0 and b["requests_done"]["w2"] > 0
    assert b["windows"] and b["errors"] == 0, {k: v for k, v in b.items() if k != "samples"}
    assert res["beq"]["gap_rows"] is not None and res["beq"]["vtc_bound_rows"] > 0
    c = res["c"]
    assert c["sent"] == 6 and c["exact"], c  # quota 2, burst 3x
    assert c["probe_failed"] == 0 and c["probe_during_burst"]["n"] >= 1
    assert res["d"]["tenants_tok_s"] > 0 and res["d"]["fcfs_tok_s"] > 0
    assert [r["engine"] for r in res["d_rounds"]] == ["tenants", "fcfs", "fcfs", "tenants"]
    assert all(r["steps"]["steps"] > 0 and r["errors"] == 0 for r in res["d_rounds"])
    assert res["d"]["a_steps"]["decode_rows_per_step"] > 0
    md = (out / "tenancy.md").read_text()
    assert "p99 flood / idle" in md and "quota burst" in md and "VTC bound" in md
    for png in ("served.png", "ttft.png"):
        assert (out / png).stat().st_size > 1000
