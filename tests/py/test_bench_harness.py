"""bench/run's harness (bench/harness/): statistics against numpy, the quality checks, the
fairness rules, the streaming client's timings against a server whose timing we control, and one
end-to-end `bench/run --quick` over fake engines (a fake `zinc`, `llama-server` and `llama-bench`
written into a temporary folder), which checks the orchestration, the fairness verdicts, the
exclusion of flagged outputs, the evidence line, the JSON, the markdown and the plots without
needing real servers (those are benchmarked by `make bench`, not by the test suite)."""
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(os.environ.get("ZINC_SOURCE_DIR", Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(ROOT / "bench"))

from harness import fairness, load, quality, scenarios, stats  # noqa: E402


# ---------------------------------------------------------------- statistics

def test_percentile_matches_numpy():
    rng = np.random.default_rng(1)
    for n in (1, 2, 3, 10, 101):
        xs = list(rng.exponential(size=n))
        for p in (0, 1, 50, 90, 99, 100):
            assert stats.percentile(xs, p) == pytest.approx(float(np.percentile(xs, p)))
    assert stats.percentile([], 50) is None


def test_summarize_and_tpot():
    s = stats.summarize([3, 1, 2, None])
    assert s["n"] == 3 and s["median"] == 2 and s["mean"] == 2 and s["sd"] == pytest.approx(1.0)
    assert stats.summarize([])["median"] is None
    assert stats.tpot(1.0, 0.2, 9) == pytest.approx(0.1)
    assert stats.tpot(1.0, 0.2, 1) is None


def test_goodput_counts_only_requests_meeting_both_slos():
    reqs = [{"ok": True, "ttft_s": 0.1, "tpot_s": 0.01, "completion_tokens": 10},   # good
            {"ok": True, "ttft_s": 0.6, "tpot_s": 0.01, "completion_tokens": 10},   # TTFT miss
            {"ok": True, "ttft_s": 0.1, "tpot_s": 0.06, "completion_tokens": 10},   # TPOT miss
            {"ok": True, "ttft_s": 0.5, "tpot_s": 0.05, "completion_tokens": 10},   # at the edge
            {"ok": False, "ttft_s": None, "tpot_s": None, "completion_tokens": 0}]
    g = stats.goodput(reqs, duration_s=2.0)
    assert g["good_requests"] == 2 and g["ok_requests"] == 4
    assert g["share"] == pytest.approx(0.5)
    assert g["req_per_s"] == pytest.approx(1.0) and g["tok_per_s"] == pytest.approx(10.0)


# ---------------------------------------------------------------- quality checks

GOOD = ("Basil, thyme and rosemary all like four hours of afternoon sun. Water basil every day "
        "or two in summer, thyme and rosemary only when the top of the soil is dry, about twice "
        "a week. Use pots with drainage holes and pinch off basil flowers to keep it bushy.")


def test_quality_passes_normal_text_and_our_prompts():
    assert quality.check(GOOD) == []
    for s in scenarios.load_scenarios():
        if not s.get("long"):  # the handbook is made from templates: repetitive by design
            assert quality.check(s["text"]) == [], s["name"]


def test_quality_flags():
    assert quality.check("") == ["empty"]
    assert quality.check("  \n ") == ["empty"]
    assert quality.check("I am a helpful assistant. " * 10) == ["loop"]
    assert quality.check("Answer: " + "=" * 100) == ["loop"]           # no spaces: tail period
    assert quality.check("The result is 12121212121212121212") == ["loop"]
    # few words, but the same line again and again (seen from SmolLM2 at temperature 0)
    assert quality.check("Incident: 2018-02-22 12:14:14.14.14.00\n\n" + "Demonstration: "
                         "2018-02-22 12:14:14.14.14.00\n\n" * 2 + "Demonstration: 2018") \
        == ["loop"]
    assert quality.check(GOOD + "<|im_end|>") == ["control-token:<|im_end|>"]
    f = quality.check("<|im_start|>assistant\nhi")
    assert "control-token:<|im_start|>" in f
    # a short answer, code with repeated boilerplate, and a list with repeated structure but
    # different content pass
    code = "".join(f"def f{i}(data):\n    return {{\n        \"median\": median(data),\n"
                   f"        \"count\": len(data) + {i},\n    }}\n\n" for i in range(3))
    assert quality.check(code) == []
    assert quality.check("Paris.") == []
    assert quality.check("\n".join(f"{i}. Step {i}: configure item {i * 7}" for i in range(12))) \
        == []


# ---------------------------------------------------------------- fairness

def test_fairness_rules():
    a = {"model_sha256": "ab", "ctx_per_seq": 8192, "slots": 16}
    assert fairness.same_model(a, dict(a))["ok"]
    assert not fairness.same_model(a, dict(a, model_sha256="cd"))["ok"]
    assert not fairness.same_model({}, {})["ok"]
    assert fairness.same_shape(a, dict(a))["ok"]
    bad = fairness.same_shape(a, dict(a, ctx_per_seq=4096))
    assert not bad["ok"] and "ctx_per_seq" in bad["why"]
    tok = fairness.same_tokens([96, 96], [96, 80])
    assert not tok["ok"] and "run 1" in tok["why"]
    assert fairness.phase_score(2.0, 3.0, tok)["score"] is None
    ok = fairness.same_tokens([96, 96], [96, 96])
    assert fairness.phase_score(2.0, 3.0, ok)["score"] == pytest.approx(1.5)
    order = fairness.engine_order(["zinc", "llama.cpp"], 3)
    assert [o for _, o in order] == [["zinc", "llama.cpp"], ["llama.cpp", "zinc"],
                                      ["zinc", "llama.cpp"]]


# ---------------------------------------------------------------- fake engines

FAKE_SERVER = r'''
import asyncio, json, os, sys, time
from aiohttp import web

def arg(flag, default=None):
    a = sys.argv
    return a[a.index(flag) + 1] if flag in a else default

TTFT = float(os.environ.get("FAKE_TTFT_S", "0.02"))
ITL = float(os.environ.get("FAKE_ITL_S", "0.004"))
LOOP = os.environ.get("FAKE_LOOP") == "1"
NATURAL = int(os.environ.get("FAKE_NATURAL_LEN", "0"))  # stops here unless ignore_eos
CACHE = "--no-prefix-cache" not in sys.argv and "--cache-ram" not in sys.argv
seen = set()

async def health(req):
    body = {"status": "ok"}
    if os.environ.get("FAKE_DEVICE_MEMORY") == "1":
        body["device_memory"] = {"weight_bytes": 3 << 30, "kv_bytes": 1 << 30,
                                 "scratch_bytes": 1 << 28, "total_bytes": (4 << 30) + (1 << 28)}
    return web.json_response(body)

async def tokenize(req):
    body = await req.json()
    return web.json_response({"tokens": list(range(len(body["content"].split())))})

async def models(req):
    return web.json_response({"object": "list", "data": [{"id": "fake-model"}]})

async def complete(req):
    body = await req.json()
    if body.get("model") not in ("fake-model", "m"):
        return web.json_response({"error": {"message": "model_not_found"}}, status=404)
    chat = req.path.endswith("chat/completions")
    prompt = body["messages"][-1]["content"] if chat else body["prompt"]
    n_prompt = len(prompt.split())
    n = int(body.get("max_tokens", 16))
    if NATURAL and (not body.get("ignore_eos") or os.environ.get("FAKE_DROP_IGNORE_EOS")):
        n = min(n, NATURAL)
    seed = body.get("seed")
    key = prompt[:200]
    cached = CACHE and body.get("cache_prompt", True) and key in seen
    seen.add(key)
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(req)
    await asyncio.sleep(TTFT / 10 if cached else TTFT)
    for i in range(n):
        if i:
            await asyncio.sleep(ITL)
        text = "again " if LOOP else f"s{seed}w{i} "
        ch = {"choices": [{"index": 0, "delta": {"content": text}} if chat else
                          {"index": 0, "text": text}]}
        if i == n - 1:
            ch["choices"][0]["finish_reason"] = "length"
        await resp.write(b"data: " + json.dumps(ch).encode() + b"\n\n")
    fin = {"choices": [], "usage": {"prompt_tokens": n_prompt, "completion_tokens": n,
                                    "total_tokens": n_prompt + n}}
    await resp.write(b"data: " + json.dumps(fin).encode() + b"\n\ndata: [DONE]\n\n")
    return resp

def main():
    print(os.environ.get("FAKE_BANNER", ""), flush=True)
    c, np_ = arg("-c"), arg("-np")
    if c and np_:
        print(f"srv load_model: initializing, n_slots = {np_}, n_ctx_slot = {int(c) // int(np_)}",
              flush=True)
    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/tokenize", tokenize)
    app.router.add_post("/v1/chat/completions", complete)
    app.router.add_post("/v1/completions", complete)
    web.run_app(app, host="127.0.0.1", port=int(arg("--port")), print=None)

main()
'''

FAKE_BENCH_JSON = r'''
def bench_json(argv, tps_pp, tps_tg, zinc=False):
    import json, os
    def arg(f, d):
        return argv[argv.index(f) + 1] if f in argv else d
    p, n, r = int(arg("-p", 512)), int(arg("-n", 128)), int(arg("-r", 1))
    d = int(arg("--n-depth", arg("-d", 0)))
    extra = {}
    if zinc:  # zinc bench --json's memory fields (the CUDA tier's; null on the CPU)
        extra = {"n_ctx": p + n + d, "device_memory": None if os.environ.get(
            "FAKE_DEVICE_MEMORY") != "1" else {"weight_bytes": 3 << 30, "kv_bytes": 1 << 20,
                                               "scratch_bytes": 1 << 26,
                                               "total_bytes": (3 << 30) + (1 << 20) + (1 << 26)}}
    out = []
    slow = 1.0 / (1.0 + d / 4096.0)  # deeper KV: slower, as on a real engine
    if p:
        out.append(dict(extra, n_prompt=p, n_gen=0, n_depth=d, avg_ts=tps_pp * slow,
                        samples_ts=[tps_pp * slow] * r))
    if n:
        out.append(dict(extra, n_prompt=0, n_gen=n, n_depth=d, avg_ts=tps_tg * slow,
                        samples_ts=[tps_tg * slow] * r))
    print(json.dumps(out))
'''


def write_fakes(d: Path):
    d.mkdir(parents=True, exist_ok=True)
    (d / "fake_server.py").write_text(FAKE_SERVER)
    (d / "fake_bench.py").write_text(FAKE_BENCH_JSON)
    py = sys.executable
    zinc = textwrap.dedent(f'''\
        #!{py}
        import os, sys
        sys.path.insert(0, {str(d)!r})
        a = sys.argv[1:]
        if a == ["--version"]:
            print("zinc 0.0.0-fake (commit fake)"); sys.exit(0)
        if a[:1] == ["synth"]:  # a stand-in file for the 8B-shape models
            import shutil
            shutil.copy(a[a.index("--vocab-from") + 1], a[a.index("-o") + 1]); sys.exit(0)
        if a[:1] == ["serve"]:
            if os.environ.get("FAKE_ZINC_CRASH") == "1" and "--help" not in a:
                print("zinc: CUDA error: out of memory (fake)", flush=True); sys.exit(1)
            if os.environ.get("FAKE_ZINC_NATURAL"):
                os.environ["FAKE_NATURAL_LEN"] = os.environ["FAKE_ZINC_NATURAL"]
                os.environ["FAKE_DROP_IGNORE_EOS"] = "1"  # a server that ignores ignore_eos
            if "--help" in a:
                print("--host --port --parallel --context --threads --no-prefix-cache"); sys.exit(0)
            os.environ["FAKE_BANNER"] = ("evidence: tier=fake-cpu kernels=none fallbacks=0 "
                                         "ZINC_TIER=" + os.environ.get("ZINC_TIER", "unset"))
            sys.argv = ["fake"] + a[1:]
            exec(open({str(d / "fake_server.py")!r}).read())
            sys.exit(0)
        if a[:1] == ["bench"]:
            if "--help" in a:
                print("-m -p -n -r -t --json --n-depth"); sys.exit(0)
            from fake_bench import bench_json
            bench_json(a, 600.0, 300.0, zinc=True); sys.exit(0)
        sys.exit(2)
        ''')
    server = textwrap.dedent(f'''\
        #!{py}
        import os, sys
        if sys.argv[1:] == ["--version"]:
            print("version: 0 (build 0, commit fake)", file=sys.stderr); sys.exit(0)
        os.environ["FAKE_BANNER"] = "\\n".join([
            "system_info: n_threads = 2 | CPU : AVX2 = 1 |",
            "load_tensors:        CUDA0 model buffer size =  3072.00 MiB",
            "llama_kv_cache:      CUDA0 KV buffer size =  1024.00 MiB",
            "llama_context:      CUDA0 compute buffer size =   256.00 MiB"])
        os.environ["FAKE_TTFT_S"] = "0.04"
        exec(open({str(d / "fake_server.py")!r}).read())
        ''')
    lbench = textwrap.dedent(f'''\
        #!{py}
        import sys
        sys.path.insert(0, {str(d)!r})
        from fake_bench import bench_json
        bench_json(sys.argv[1:], 500.0, 200.0)
        ''')
    for name, text in (("zinc", zinc), ("llama-server", server), ("llama-bench", lbench)):
        (d / name).write_text(text)
        (d / name).chmod(0o755)
    return d


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def fake_server(tmp_path):
    d = write_fakes(tmp_path / "fakes")
    port = free_port()
    env = dict(os.environ, FAKE_TTFT_S="0.05", FAKE_ITL_S="0.01")
    p = subprocess.Popen([sys.executable, str(d / "fake_server.py"), "--port", str(port)],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.05)
    yield url
    p.terminate()
    p.wait(timeout=10)


def test_client_timings_against_a_server_with_known_delays(fake_server):
    # The fake waits 50 ms before the first token, then 10 ms between tokens, 20 tokens.
    lv = load.run_level(fake_server, "m", "some filler words here", concurrency=4, n_requests=8,
                        max_tokens=20)
    s = lv["summary"]
    assert s["n_ok"] == 8 and s["all_full_length"] and s["completion_tokens_all"] == [20]
    assert 0.045 <= s["ttft_s"]["p50"] < 0.2
    assert 0.009 <= s["itl_s"]["p50"] < 0.05
    assert 0.009 <= s["tpot_s"]["p50"] < 0.05
    # 8 requests x 20 tokens, 4 at a time, each ~0.05 + 19 x 0.01 s: about 0.5 s in all
    assert s["output_tokens"] == 160
    assert 160 / 2.0 < s["output_tok_per_s"] < 160 / 0.4
    assert s["goodput"]["good_requests"] == 8  # TTFT ~50 ms, TPOT ~10 ms: inside both SLOs
    assert all(r["flags"] == [] for r in lv["requests"])


def test_long_context_fits_the_budget(fake_server):
    scen = [s for s in scenarios.load_scenarios() if s.get("long")][0]
    prompt, info = scenarios.fit_long_context(scen, 2048, fake_server)
    budget = 2048 - scen["max_tokens"] - scenarios.TEMPLATE_MARGIN
    assert info["count_method"] == "tokenize"
    assert len(prompt.split()) == info["counted_tokens"] <= budget
    secs = scenarios.long_sections(scen["text"])
    one_more = scen["intro"] + "\n\n".join(secs[:info["sections"] + 1]) + scen["question"]
    assert len(one_more.split()) > budget  # the largest number of whole sections that fits
    assert prompt.endswith(scen["question"])


def test_bench_run_quick_end_to_end_on_fake_engines(tmp_path):
    d = write_fakes(tmp_path / "fakes")
    out = tmp_path / "out"
    model = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not model.exists():
        pytest.skip(f"{model} missing (scripts/fetch-models)")
    cmd = [sys.executable, str(ROOT / "bench" / "run"), "--target", "cpu", "--quick",
           "--no-build", "--zinc", str(d / "zinc"), "--llama-bin-dir", str(d), "--out", str(out),
           "--model", str(model), "--concurrency", "1", "8", "--runs", "2"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=170,
                       env=dict(os.environ, FAKE_ITL_S="0.002"))
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads((out / "results.json").read_text())
    assert res["fairness"]["same_model"]["ok"] and res["fairness"]["same_shape"]["ok"]
    assert res["engines"]["zinc"]["ctx_per_seq"] == res["engines"]["llama.cpp"]["ctx_per_seq"]
    # the evidence line is kept, and zinc was asked for the target's tier
    assert any("tier=fake-cpu" in x and "ZINC_TIER=cpu" in x
               for x in res["engines"]["zinc"]["evidence"])
    mc = res["phases"]["micro"]["rows"]
    assert mc[0]["ratio_median"] == pytest.approx(600 / 500)
    assert mc[1]["ratio_median"] == pytest.approx(300 / 200)
    sc = res["phases"]["scenarios"]
    assert len(sc["scenarios"]) == 5
    for e in sc["scenarios"]:
        assert e["same_tokens"]["ok"] and e["score"]["score"] is not None
        assert e["engines"]["zinc"]["summary"]["n_used"] == 2
    # orders alternate scenario by scenario
    assert sc["scenarios"][0]["order"] == list(reversed(sc["scenarios"][1]["order"]))
    assert sc["overall"]["all_matched"] and sc["overall"]["score"] > 0
    lv = {x["concurrency"]: x for x in res["phases"]["load"]["levels"]}
    assert set(lv) == {1, 8}
    assert lv[8]["same_tokens"]["ok"] and lv[8]["ratio_output_tok_per_s"] > 0
    px = res["phases"]["prefix"]["engines"]
    # the fake answers a cached prefix 10x sooner; the harness must see the difference
    assert px["zinc"]["ttft_ratio_cached_over_uncached"] < 0.7
    md = (out / "results.md").read_text()
    for h in ("## Targets", "## Microbenchmarks", "## Scenarios", "## Load sweep",
              "## Shared prefix", "concurrency 8"):
        assert h in md
    for png in ("scenarios.png", "load.png"):
        assert (out / png).stat().st_size > 5000


def test_flagged_outputs_are_excluded(tmp_path):
    """A server whose every output loops: all runs are flagged, none is used in the medians."""
    d = write_fakes(tmp_path / "fakes")
    port = free_port()
    p = subprocess.Popen([sys.executable, str(d / "fake_server.py"), "--port", str(port)],
                         env=dict(os.environ, FAKE_LOOP="1"), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.05)
        scen = scenarios.load_scenarios(quick=False)[0]
        res = scenarios.run_scenario(url, "m", scen, scen["text"], warmup=0, runs=3)
        s = res["summary"]
        assert s["n_runs"] == 3 and s["n_used"] == 0
        assert all(f == ["loop"] for f in s["flagged"])
        assert s["e2e_s"]["median"] is None
    finally:
        p.terminate()
        p.wait(timeout=10)


# ---------------------------------------------------------------- GGUF header, budget

def test_gguf_header_matches_the_gguf_package():
    gguf = pytest.importorskip("gguf")
    from harness import gguf_header, machine
    # the size table against gguf-py's (every type it lists)
    for tid, (per_block, block_bytes) in gguf_header.GGML_TYPES.items():
        assert gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(tid)] == (per_block, block_bytes)
    # the header of a real file (SmolLM2 only: gguf-py parses big vocabularies slowly)
    models = [ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"]
    if not models[0].exists():
        pytest.skip("no models (scripts/fetch-models)")
    for p in models:
        r = gguf.GGUFReader(str(p))
        h = gguf_header.read_header(p)
        assert [t.name for t in r.tensors] == [t["name"] for t in h["tensors"]], p.name
        assert [int(t.n_bytes) for t in r.tensors] == [t["n_bytes"] for t in h["tensors"]]
        arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
        assert h["kv"]["general.architecture"] == arch
        n_layer = int(r.fields[f"{arch}.block_count"].parts[-1][0])
        assert machine.model_info(p)["n_layer"] == n_layer
    with pytest.raises(gguf_header.GGUFHeaderError):
        gguf_header.read_header(ROOT / "bench" / "scenarios" / "scenarios.json")


def test_budget_shares_roll_over_and_skips_are_recorded():
    from harness import budget
    now = [0.0]
    b = budget.Budget(100.0, reserve_s=10.0, clock=lambda: now[0])
    b.plan({"micro": 1.0, "scenarios": 1.0, "load": 2.0})
    assert b.start_phase("micro") == pytest.approx(90 / 4)
    now[0] = 5.0  # micro used 5 s of its 22.5: the rest rolls over
    assert b.start_phase("scenarios") == pytest.approx(85 / 3)
    assert b.fits(20.0) and not b.fits(30.0) and b.fits_total(80.0)
    assert b.estimate("x", 7.0) == 7.0
    b.record("x", 3.0)
    b.record("x", 4.0)
    assert b.estimate("x", 7.0) == 4.0  # the slowest measured
    now[0] = 80.0
    assert b.start_phase("load") == pytest.approx(10.0)
    b.skip("load concurrency 64", est_s=40.0)
    assert b.skipped == [{"phase": "load", "what": "load concurrency 64",
                          "why": "budget: needs ~40 s, 10 s left of this phase's share"}]
    unlimited = budget.Budget(None)
    unlimited.plan({"micro": 1.0})
    assert unlimited.start_phase("micro") == float("inf") and unlimited.fits(1e9)


def test_scenario_requests_are_equal_work(fake_server):
    """ignore_eos and per-run seeds reach the server; a server that stops at its natural end
    without ignore_eos generates fewer tokens, and the same-tokens rule then withholds the
    score."""
    scen = dict(scenarios.load_scenarios()[0], max_tokens=12)
    req, seed_base = scenarios.request_settings()
    assert req["ignore_eos"] is True and req["temperature"] > 0 and seed_base > 0
    res = scenarios.run_scenario(fake_server, "m", scen, scen["text"], warmup=1, runs=3,
                                 request=req, seed_base=seed_base)
    assert res["seeds"] == [seed_base + i for i in range(4)]
    assert [m["text"].split()[0] for m in res["runs"]] == \
        [f"s{seed_base + i}w0" for i in range(1, 4)]
    assert res["summary"]["completion_tokens"] == [12, 12, 12] and res["summary"]["full_length"]
    from harness import phases
    short = [dict(m, completion_tokens=5) for m in res["runs"]]
    entry = {"max_tokens": 12, "engines": {
        "zinc": {"summary": scenarios.summarize_runs(short, 12)},
        "llama.cpp": {"summary": res["summary"]}}}
    phases.PhaseContext.score_entry(entry)
    assert entry["score"]["score"] is None
    assert "ignore_eos not honoured" in entry["score"]["why"] and "zinc" in entry["score"]["why"]
    entry["engines"]["zinc"]["summary"] = res["summary"]
    phases.PhaseContext.score_entry(entry)
    assert entry["score"]["score"] == pytest.approx(1.0, rel=0.5)


def run_bench(tmp_path, extra, env=None, timeout=150):
    d = write_fakes(tmp_path / "fakes")
    out = tmp_path / "out"
    model = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not model.exists():
        pytest.skip(f"{model} missing (scripts/fetch-models)")
    cmd = [sys.executable, str(ROOT / "bench" / "run"), "--target", "cpu", "--quick",
           "--no-build", "--zinc", str(d / "zinc"), "--llama-bin-dir", str(d), "--out", str(out),
           "--model", str(model)] + extra
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, FAKE_ITL_S="0.002", **(env or {})))
    return p, out


def test_one_engine_crashing_keeps_the_other_results(tmp_path):
    p, out = run_bench(tmp_path, ["--phases", "scenarios", "load", "--concurrency", "1", "2",
                                  "--runs", "1"], env={"FAKE_ZINC_CRASH": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads((out / "results.json").read_text())
    sc = res["phases"]["scenarios"]["scenarios"]
    assert len(sc) == 5
    for e in sc:
        assert "error" in e["engines"]["zinc"]
        assert e["engines"]["llama.cpp"]["summary"]["n_used"] == 1
        assert e["score"]["score"] is None
    # after two failed starts zinc is not started again: later blocks say why at once
    assert "exited (1)" in sc[0]["engines"]["zinc"]["error"]
    assert "failed to start 2 times" in sc[4]["engines"]["zinc"]["error"]
    for lv in res["phases"]["load"]["levels"]:
        assert "error" in lv["engines"]["zinc"]
        assert lv["engines"]["llama.cpp"]["summary"]["n_ok"] >= 4
    md = (out / "results.md").read_text()
    assert "FAILED" in md and "## Load sweep" in md
    assert "==== bench/run summary (cpu) ====" in p.stdout


def test_device_run_in_one_call_within_its_budget(tmp_path):
    """bench/device-run all over fake engines (a fake `zinc synth` makes the 8B stand-ins): the
    8B Q4_K_M file is the model of every phase, Q4_0 and SmolLM2 are micro rows, one server per
    engine per phase; the files land in $OUT, the summary comes last, device memory of both
    engines is in the table, and what the budget did not allow is reported as skipped or cut,
    within the budget."""
    d = write_fakes(tmp_path / "fakes")
    model = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not model.exists():
        pytest.skip(f"{model} missing (scripts/fetch-models)")
    out = tmp_path / "device-out"
    zm = tmp_path / "zm"
    budget = 60
    t0 = time.monotonic()
    p = subprocess.run(
        [str(ROOT / "bench" / "device-run"), "all", "--budget-s", str(budget),
         "--concurrency", "1", "4", "64", "--runs", "2", "--load-output-tokens", "16",
         "--ctx", "2048", "--rounds", "2"],
        capture_output=True, text=True, timeout=budget + 60,
        env=dict(os.environ, OUT=str(out), ZINC=str(d / "zinc"), PEER_DIR=str(d), ZM_DIR=str(zm),
                 VOCAB=str(model), FAKE_ITL_S="0.001", FAKE_DEVICE_MEMORY="1"))
    wall = time.monotonic() - t0
    made = [(zm / f"llama3-8b.{t}.gguf").exists() for t in ("q4_k_m", "q4_0")]
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert wall < budget + 15
    for f in ("results.json", "results.md", "bench.log", "scenarios.png"):
        assert (out / f).stat().st_size > 0, f
    assert len(list(out.iterdir())) <= 8  # the device tool brings back at most 8 files
    res = json.loads((out / "results.json").read_text())
    a = res["args"]
    assert a["target"] == "cuda" and a["full"] and a["reuse_servers"]
    assert (a["load_slots"], a["load_ctx"], a["load_prompt_tokens"]) == (64, 2048, 1024)
    assert res["budget"]["used_s"] <= budget
    # every microbenchmark model, scenario and level either ran for both engines or is named
    # as skipped or cut
    skipped = " ".join(x["what"] for x in res["budget"]["skipped"])
    assert all(made), p.stdout[-2000:]
    assert Path(res["model"]["path"]).name == "llama3-8b.q4_k_m.gguf"  # the headline model
    assert set(res["phases"].get("micro_models", {})) == \
        {"llama3-8b.q4_0.gguf", "SmolLM2-135M-Instruct.Q4_1.gguf"}
    rows = {(r["test"], r["depth"]) for r in res["phases"]["micro"]["rows"]}
    for want in (("pp512", 0), ("tg128", 0), ("pp4096", 0), ("tg128", 4096), ("tg128", 16384)):
        assert want in rows or "micro main" in skipped, (want, rows)
    for key, sec in res["phases"]["micro_models"].items():
        assert {r["test"] for r in sec["rows"]} == {"pp512", "tg128"}, key
    var = res["phases"].get("micro_variants", {})  # both zinc modes beside the default
    assert set(var) == {"ZINC_EXACT=0", "ZINC_EXACT=1"} or "micro main" in skipped, var
    for sec in var.values():
        for r in sec["rows"]:
            assert r["zinc"]["n"] and r["llama.cpp"]["n"] and r["ratio_median"] > 0
    mem = {(m["phase"], m["engine"]) for m in res.get("device_memory", [])}
    assert {("load", "zinc"), ("load", "llama.cpp")} <= mem, mem
    for m in res["device_memory"]:
        if m["phase"] == "load":
            assert m["reported"]["kv_bytes"] == 1 << 30 and m["slots"] == 64
    md = (out / "results.md").read_text()
    assert "## Device memory" in md and "second row: launch-bound" in md
    assert "Scaling (output tok/s as clients grow)" in md
    sc = res["phases"]["scenarios"]["scenarios"]
    for e in sc:
        assert e.get("skipped") or set(e["engines"]) == {"zinc", "llama.cpp"}
    assert any(not e.get("skipped") for e in sc)  # 60 s is enough for some of everything
    levels = [lv["concurrency"] for lv in res["phases"].get("load", {}).get("levels", [])]
    for c in (1, 4, 64):
        assert c in levels or f"load concurrency {c}" in skipped
    assert 1 in levels
    tail = p.stdout.rstrip().splitlines()
    summary_at = max(i for i, ln in enumerate(tail) if "bench/run summary (cuda)" in ln)
    assert len(tail) - summary_at < 60  # the short table is the end of the output
    assert any(ln.startswith("scenario ") for ln in tail[summary_at:])


def test_report_regenerates_and_publishes_a_docs_section(tmp_path):
    from harness import publish
    p, out = run_bench(tmp_path, ["--phases", "micro", "scenarios", "--runs", "1"])
    assert p.returncode == 0, p.stderr[-3000:]
    (out / "results.md").unlink()
    docs = tmp_path / "docs" / "benchmarks.md"
    docs.parent.mkdir()
    docs.write_text("# Benchmarks\n\nprose before\n\n<!-- bench:cpu:begin -->\nold table\n"
                    "<!-- bench:cpu:end -->\n\nprose after\n")
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "report"),
                        str(out / "results.json"), "--docs", str(docs)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert (out / "results.md").exists() and "bench/run summary (cpu)" in r.stdout
    text = docs.read_text()
    assert "old table" not in text and "prose before" in text and "prose after" in text
    assert text.count("<!-- bench:cpu:begin -->") == 1
    rel = os.path.relpath(out, docs.parent)
    assert f"]({rel}/scenarios.png)" in text and "#### Scenarios" in text
    assert "sha256" in text and "None" not in text
    with pytest.raises(ValueError):
        publish.replace_section("no markers here", "cuda", ["x"])


# ---------------------------------------------------------------- the GPU run's machinery

def test_load_requests_per_level_and_the_scaling_check():
    assert [load.requests_for(c) for c in (1, 2, 4, 8, 16, 32, 64)] == [4, 4, 8, 16, 16, 32, 64]
    assert load.requests_for(64, quick=True) == 128

    def level(c, tps, err=None):
        return {"concurrency": c, "engines": {"zinc": {"error": err, "summary": {
            "n_ok": 0 if err else 4, "output_tok_per_s": tps}}}}
    rising = [level(1, 100), level(2, 190), level(4, 188), level(8, 400)]  # -1 %: noise
    sc = load.scaling(rising, "zinc")
    assert not sc["ever_falls"] and sc["levels"] == [1, 2, 4, 8] and sc["peak"] == (8, 400)
    assert len(sc["falls"]) == 1 and sc["falls"][0]["drop_pct"] == pytest.approx(100 * 2 / 190)
    falling = [level(8, 400), level(32, 272), level(16, 390), level(64, 0, err="boom")]
    sc = load.scaling(falling, "zinc")  # sorted by concurrency; the failed level left out
    assert sc["ever_falls"] and sc["levels"] == [8, 16, 32]
    assert [(f["from"], f["to"]) for f in sc["falls"]] == [(8, 16), (16, 32)]
    assert load.scaling(falling, "llama.cpp")["levels"] == []


def test_device_memory_from_llama_logs_and_zinc():
    from harness import memory
    log = ("load_tensors:        CUDA0 model buffer size =  4403.49 MiB\n"
           "load_tensors:   CPU_Mapped model buffer size =   250.00 MiB\n"
           "llama_kv_cache:      CUDA0 KV buffer size = 16384.00 MiB\n"
           "llama_context:      CUDA0 compute buffer size =   560.00 MiB\n"
           "llama_context:  CUDA_Host compute buffer size =    40.00 MiB\n"
           "llama_kv_cache:      CUDA0 KV buffer size = 16384.00 MiB\n")  # repeated: once
    m = memory.llama_log_memory(log)
    assert m["weight_bytes"] == int(4403.49 * (1 << 20))  # the host-side buffers are not counted
    assert m["kv_bytes"] == 16384 << 20 and m["scratch_bytes"] == 560 << 20
    assert m["total_bytes"] == m["weight_bytes"] + m["kv_bytes"] + m["scratch_bytes"]
    assert memory.llama_log_memory("no buffers here") is None
    dm = {"weight_bytes": 1, "kv_bytes": 2, "scratch_bytes": 3, "total_bytes": 6}
    assert memory.zinc_memory(health={"device_memory": dm}) == dm
    assert memory.zinc_memory(health={"device_memory": None}) is None  # the CPU tier
    assert memory.zinc_memory(bench_results=[{"device_memory": None}, {"device_memory": dm}]) == dm
    res = {"device_memory": [memory.entry("zinc", "load", 64, 2048, dm, {"bytes": 7 << 30})]}
    table = "\n".join(memory.memory_table(res))
    assert "| load | zinc | 64 x 2048 |" in table and "| 7.00 |" in table


def test_second_row_labels_and_issue14_targets():
    from harness import report, report_gpu
    small, big = {"tensor_bytes": 100 << 20}, {"tensor_bytes": 4 << 30}
    assert report_gpu.is_second_row(small) and not report_gpu.is_second_row(big)
    assert report_gpu.row_label("SmolLM2.gguf", small).endswith("(second row: launch-bound)")

    def row(test, z, l, depth=0):
        return {"test": test, "depth": depth, "zinc": {"n": 1, "median": z},
                "llama.cpp": {"n": 1, "median": l}, "ratio_median": z / l}
    secs = [("llama3-8b.q4_k_m.gguf", dict(big, n_layer=32, n_head_kv=8, head_dim_k=128,
                                           head_dim_v=128, has_output_weight=False),
             {"rows": [row("pp512", 13000, 9400), row("pp4096", 9000, 9600),
                       row("tg128", 420, 278), row("tg128", 300, 250, depth=4096)]}),
            ("SmolLM2.gguf", small, {"rows": [row("tg128", 1900, 950)]})]
    res = {"args": {"target": "cuda"}, "bandwidth": {"bytes_per_s": 4.3e12},
           "model": dict(big, path="/tmp/zm/llama3-8b.q4_k_m.gguf"),
           "phases": {"load": {"levels": [
               {"concurrency": 32, "ratio_output_tok_per_s": 2.6, "same_tokens": {"ok": True},
                "engines": {"zinc": {"summary": {"tpot_s": {"p99": 0.025}}}}},
               {"concurrency": 64, "ratio_output_tok_per_s": 2.0, "same_tokens": {"ok": True},
                "engines": {"zinc": {"summary": {"tpot_s": {"p99": 0.04}}}}}],
               "scaling": {"zinc": {"levels": [1, 64], "falls": [], "ever_falls": False}}}}}
    text = "\n".join(report_gpu.targets(res, secs, report.pct_bound))
    assert "pp512 8B Q4_K_M >= 1.3x llama.cpp: 1.38x: met" in text
    assert "pp4096 8B Q4_K_M >= 1.0x llama.cpp: 0.94x: NOT met" in text
    assert "tg128 8B Q4_K_M >= 1.5x llama.cpp" in text and "1.51x" in text
    assert "at KV depth 4096: zinc 300.0 t/s" in text
    assert "(second row) tg128 SmolLM2 >= 2x llama.cpp: 2.00x: met" in text
    assert "32 clients >= 2.5x llama.cpp's output tok/s with TPOT p99 <= 30 ms: 2.60x" in text
    assert "64 clients >= 3.0x llama.cpp's output tok/s: 2.00x, TPOT p99 40 ms: NOT met" in text
    assert "never falls from 1 to 64 clients: met" in text
    res["model"] = dict(small, path="SmolLM2.gguf")  # server phases on the small model
    assert "(second row, no conclusion)" in "\n".join(report_gpu.load_targets(res))


def test_zinc_variant_needs_a_zinc_setting(capsys):
    from harness import runner
    a = runner.parse_args(["--target", "cuda", "--zinc-variant", "ZINC_EXACT=0"])
    assert a.zinc_variant == ["ZINC_EXACT=0"]
    for bad in ("EXACT=0", "ZINC_EXACT", "ZINC_=1"):
        with pytest.raises(SystemExit):
            runner.parse_args(["--target", "cuda", "--zinc-variant", bad])
        assert "expected ZINC_NAME=VALUE" in capsys.readouterr().err


def test_pack_lays_out_calls_under_the_limit(tmp_path):
    from harness import pack
    mib = 1 << 20
    take, err = pack.plan(10 * mib, {".gpu-p1": 9 * mib, ".gpu-bench": 20 * mib}, 98 * mib)
    assert err is None and sum(take.values()) == 98 * mib
    room = 64 * mib - pack.MARGIN - 10 * mib
    assert take[".gpu-p1"] == room - 9 * mib and take[".gpu-p2"] == room
    assert ".gpu-p3" not in take  # the rest fits beside zinc in the benchmark's own call
    take, err = pack.plan(10 * mib, {".gpu-p1": 40 * mib, ".gpu-bench": 20 * mib}, 98 * mib)
    assert err is None
    assert take[".gpu-p3"] == 98 * mib - (room - 40 * mib) - room - (room - 20 * mib)
    _, err = pack.plan(10 * mib, {".gpu-bench": 40 * mib}, 200 * mib)
    assert "fit the calls" in err
    _, err = pack.plan(60 * mib, {".gpu-p1": 9 * mib}, 1)
    assert "over the limit" in err


def test_pack_and_stash_join_the_pieces(tmp_path):
    """bench/device-run pack in a scratch repository (a 60 MiB working tree leaves ~2 MiB a
    call, so a 5 MiB stand-in model travels in three pieces), then `stash` joins them into one
    sha256-checked file."""
    import shutil
    root = tmp_path / "repo"
    (root / "bench" / "harness").mkdir(parents=True)
    shutil.copy(ROOT / "bench" / "device-run", root / "bench" / "device-run")
    shutil.copy(ROOT / "bench" / "harness" / "pack.py", root / "bench" / "harness" / "pack.py")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "filler.bin").write_bytes(os.urandom(60 * (1 << 20)))  # the "working tree"
    (root / ".gpu" / "bin").mkdir(parents=True)
    (root / ".gpu" / "bin" / "zinc").write_text("#!/bin/sh\n")
    (root / ".gpu" / "llama-src.tar.gz").write_bytes(os.urandom(200_000))
    model = root / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    model.parent.mkdir()
    model.write_bytes(os.urandom(5 * (1 << 20)))
    (root / ".gitignore").write_text("/models/\n/.gpu/\n")
    p = subprocess.run([str(root / "bench" / "device-run"), "pack"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    untracked = subprocess.run(["git", "ls-files", "-o", "--exclude-standard"], cwd=root,
                               capture_output=True, text=True).stdout
    assert ".gpu-" not in untracked  # ignored: they travel only when carried
    parts = sorted(root.glob(".gpu-*/SmolLM2-135M-Instruct.Q4_1.gguf.part*"))
    assert len(parts) == 3 and "--wait-peer" in p.stdout, p.stdout
    for ln in p.stdout.splitlines():
        if ln.strip().startswith("carry ["):
            assert float(ln.split(":")[1].split()[0]) < 64, ln
    env = dict(os.environ, PIECES_DIR=str(tmp_path / "pieces"), ZM_DIR=str(tmp_path / "zm"),
               PEER_UNPACK=str(tmp_path / "peer"), PEER_BUILD_DIR=str(tmp_path / "lbuild"))
    (root / ".gpu-p1" / "llama-src.tar.gz").unlink()  # no peer build in a test
    q = subprocess.run([str(root / "bench" / "device-run"), "stash"], capture_output=True,
                       text=True, timeout=60, env=env)
    assert "joined" in q.stdout and "sha256 ok" in q.stdout, q.stdout + q.stderr
    assert (tmp_path / "zm" / model.name).read_bytes() == model.read_bytes()
