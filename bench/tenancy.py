#!/usr/bin/env python3
"""Multi-tenant scheduling on a live `zinc serve` against llama.cpp's FIFO `llama-server`, same
model and slots, in one run (docs/benchmarks.md, "Tenancy"; issue 16, item 6). Phases:

(a) isolation: an interactive tenant sends one short streamed chat at a time (think time
    --think-s), on the idle server and while a batch tenant floods 2 x slots closed-loop long
    streamed completions; TTFT p50/p99 idle and under the flood and the p99 ratio, for each of
    zinc --tenants, zinc --tenants --no-class-prefill (prefill chunks not class-aware), zinc FCFS
    (no --tenants) and llama-server.
(b) fair share: tenants of weight 1 and 2 with --fair-clients (2 x slots) closed-loop clients
    each, so both stay backlogged (the fewest sequences in flight per tenant is reported); zinc_tenant_served_rows_total scraped every second: rows per --window-s window
    and its w2 / w1 ratio (target 2, within 10 %); then two equal-weight tenants: the largest
    service gap over any interval against VTC's bound, slots x (prompt + max_tokens) + one step
    budget (as tests/unit/engine/tenant_policy_test.cpp).
(c) quota burst: tenant `q` (max_concurrent Q, max_queued 0) sends 3 x Q short-prompt requests
    of --batch-out tokens at once: exactly Q served, the rest 429 naming max_concurrent with
    Retry-After, while tenant `probe` keeps sending short chats (all served; TTFT beside its
    idle TTFT).
(d) throughput: output tokens/s of (b)'s 1:2 load on zinc --tenants against the same load on
    zinc FCFS, both servers up at once and measured in alternating rounds (ABBA: --d-rounds
    pairs), so that a shared machine's swings fall on both alike; with each round the engine's
    step composition (rows per step, busy share) and the server's CPU per output token.
Each phase's time is a fraction of --budget-s. Writes OUT/tenancy.json, OUT/tenancy.md,
OUT/served.png (per-tenant rows over time), OUT/ttft.png (TTFT distributions). Usage:
  bench/tenancy.py --zinc build/zinc --llama-server build-peer/build/bin/llama-server \\
      -m models/SmolLM2-135M-Instruct.Q4_1.gguf --threads 2 --budget-s 600 --out docs/bench/tenancy
  bench/tenancy.py --preset h200-8b --zinc ... --llama-server ... -m llama3-8b.q4_k_m.gguf
"""
import argparse
import hashlib
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import tenancy_load as tl  # noqa: E402
from harness.engines import Server, free_port  # noqa: E402

PRESETS = {
    # The 2-core build machine, SmolLM2-135M: 4 slots, ~400-token batch prompts, short outputs.
    "cpu": {"parallel": 4, "ctx": 1024, "batch_sentences": 30, "batch_out": 32, "fair_out": 16,
            "max_batch_tokens": 512, "n_inter": 24, "think_s": 0.3, "budget_s": 600, "gpu": False},
    # One H200, Llama-3-8B Q4_K_M: 32 slots, ~1000-token batch prompts, 128 out; the phases take
    # ~1.0 x 160 s, the six server starts (8B loads; (d) holds two at once) the rest of a ~230 s
    # device call.
    "h200-8b": {"parallel": 32, "ctx": 2048, "batch_sentences": 90, "batch_out": 128,
                "fair_out": 32, "max_batch_tokens": 512, "n_inter": 40, "think_s": 0.1,
                "budget_s": 160, "gpu": True},
}
SENTENCE = "The quick brown fox jumps over the lazy dog near the river bank. "
ENGINES_A = ("tenants", "noguard", "noclass", "fcfs", "llama")
MODEL = {"id": "m"}  # the id the running server lists first (GET /v1/models)


def digest(k):
    return "sha256:" + hashlib.sha256(k.encode()).hexdigest()


def tenants_toml(quota):
    t = [("inter", "interactive", 1, ""), ("batch", "batch", 1, ""), ("w1", "standard", 1, ""),
         ("w2", "standard", 2, ""), ("e1", "standard", 1, ""), ("e2", "standard", 1, ""),
         ("probe", "interactive", 1, ""),
         ("q", "standard", 1, f"[tenant.quotas]\nmax_concurrent = {quota}\nmax_queued = 0\n")]
    return "".join(f'[[tenant]]\nid = "{i}"\nclass = "{c}"\nweight = {w}\n'
                   f'api_keys = ["{digest("k-" + i)}"]\n{extra}\n' for i, c, w, extra in t)


def zinc_argv(a, port, tenants_file, class_aware=True, guard=True):
    cmd = [a.zinc, "serve", "-m", a.model, "--host", "127.0.0.1", "--port", str(port),
           "--alias", "m", "--parallel", str(a.parallel), "-c", str(a.ctx),
           "--max-batch-tokens", str(a.max_batch_tokens), "--max-queue", "1024"]
    if a.threads:
        cmd += ["-t", str(a.threads)]
    if tenants_file:
        cmd += ["--tenants", str(tenants_file)]
    if not class_aware:
        cmd += ["--no-class-prefill"]
    if not guard:
        cmd += ["--interactive-guard", "0"]
    return cmd + a.zinc_arg


def llama_argv(a, port):
    cmd = [a.llama_server, "-m", a.model, "--host", "127.0.0.1", "--port", str(port),
           "-c", str(a.ctx * a.parallel), "-np", str(a.parallel), "-b", str(a.max_batch_tokens),
           "--jinja", "--no-webui"]
    if a.gpu:
        cmd += ["-ngl", "999"]
    if a.threads:
        cmd += ["-t", str(a.threads), "-tb", str(a.threads)]
    return cmd + a.llama_arg


def chat(i, max_tokens=8):
    return {"model": MODEL["id"], "max_tokens": max_tokens, "temperature": 0,
            "messages": [{"role": "user", "content": f"Say hello number {i}."}]}


def long_completion(a):
    filler = SENTENCE * a.batch_sentences
    return lambda i: {"model": MODEL["id"], "prompt": f"Request {i}. {filler}",
                      "max_tokens": a.batch_out, "temperature": 0, "ignore_eos": True}


def short_completion(a):
    return lambda i: {"model": MODEL["id"], "prompt": f"Note {i}: write about the sea.",
                      "max_tokens": a.fair_out, "temperature": 0, "ignore_eos": True}


def interactive(url, key, seconds, a, stop_at_n=True):
    """Sequential short chats for `seconds` (at most n_inter): their results."""
    out, t_end, i = [], time.monotonic() + seconds, 0
    while time.monotonic() < t_end and (not stop_at_n or len(out) < a.n_inter):
        i += 1
        out.append(tl.post_stream(url, key, "/v1/chat/completions", chat(i)))
        time.sleep(a.think_s)
    return out


def failed(r):
    """A request that failed: not a 200, or an error mid-stream; one the phase's end cut (even
    before its response headers arrived: status 0) is not a failure."""
    return not r["cut"] and (r["status"] != 200 or r["error"] is not None)


def ttft_summary(rs):
    """TTFT samples of the requests that answered; `failed` counts real failures (failed()), `cut`
    the requests the phase's end interrupted (neither a sample nor a failure)."""
    xs = [r["ttft_s"] for r in rs if r["status"] == 200 and r["ttft_s"] is not None]
    return {"n": len(xs), "failed": sum(1 for r in rs if failed(r)),
            "cut": sum(1 for r in rs if r["cut"]), "p50": tl.pct(xs, 0.5),
            "p99": tl.pct(xs, 0.99), "samples": xs}


def phase_a(url, keys, a, t_idle, t_flood):
    idle = interactive(url, keys["inter"], t_idle, a)
    flood = tl.Loop(url, keys["batch"], "/v1/completions", long_completion(a),
                    2 * a.parallel).start()
    time.sleep(min(a.warm_s, t_flood / 4))
    t0 = time.monotonic()
    busy = interactive(url, keys["inter"], t_flood, a)
    t1 = time.monotonic()
    flood.stop()
    done = [r for r in flood.results if r["status"] == 200 and not r["cut"]]
    res = {"idle": ttft_summary(idle), "flood": ttft_summary(busy),
           "batch_requests_done": len(done), "flood_s": t1 - t0,
           # the batch tenant's output tokens/s while the interactive one was measured
           "batch_tok_s": flood.tokens_between(t0, t1) / (t1 - t0) if t1 > t0 else None,
           "batch_errors": sum(1 for r in flood.results if failed(r))}
    i, f = res["idle"]["p99"], res["flood"]["p99"]
    res["ratio_p99"] = f / i if i and f else None
    return res


def phase_fair(url, names, a, seconds, scrape, tenants=True, pid=None):
    """Closed-loop clients for two tenants; /metrics sampled every second (on every server, so
    that (d) compares like with like): rows per tenant (zinc --tenants), the engine's step
    composition over the measured interval, and output tokens/s counted on the client."""
    loops = [tl.Loop(url, f"k-{n}", "/v1/completions", short_completion(a),
                     a.fair_clients).start() for n in names]
    time.sleep(min(a.warm_s, seconds / 4))
    sc = tl.Scraper(scrape).start()
    cpu0 = tl.proc_cpu_seconds(pid) if pid else None
    t0 = time.monotonic()
    time.sleep(seconds)
    t1 = time.monotonic()
    cpu1 = tl.proc_cpu_seconds(pid) if pid else None
    sc.stop()
    tokens = sum(lp.tokens_between(t0, t1) for lp in loops)
    for lp in loops:
        lp.stop()
    per = {n: [r for r in lp.results if r["status"] == 200 and not r["cut"]
               and t0 <= r["t_send"] + r["e2e_s"] < t1] for n, lp in zip(names, loops)}
    res = {"seconds": t1 - t0, "output_tok_s": tokens / (t1 - t0),
           "requests_done": {n: len(v) for n, v in per.items()},
           "errors": sum(1 for lp in loops for r in lp.results if failed(r))}
    if len(sc.engine) >= 2:
        (ta, ea), (tb, eb) = sc.engine[0], sc.engine[-1]
        res["steps"] = tl.step_composition(ea, eb, tb - ta, [e for _, e in sc.engine])
    if cpu0 is not None and cpu1 is not None:
        res["server_cpu_s"] = cpu1 - cpu0
        res["server_cpu_ms_per_token"] = 1e3 * (cpu1 - cpu0) / tokens if tokens else None
    if tenants:
        res["samples"] = [(t - t0, r) for t, r in sc.samples]
        # Backlogged means more in flight than it can run: the fewest seen while measured.
        res["min_in_flight"] = {n: min((f.get(n, 0) for _, f in sc.in_flight), default=None)
                                for n in names}
        # Sequences of other tenants (an earlier phase's leftovers) in flight meanwhile: most.
        res["others_in_flight"] = max((sum(v for k, v in f.items() if k not in names)
                                       for _, f in sc.in_flight), default=None)
    return res


def phase_d(st, sf, a, seconds):
    """(b)'s 1:2 load on the tenants server st and on the FCFS server sf, both up, in
    a.d_rounds pairs of rounds of seconds / (2 d_rounds) each, the order alternating (A B, B A,
    ...): [{engine, round, loadavg, phase_fair's result}]."""
    for s, key in ((st, "k-probe"), (sf, "k-anon")):
        tl.post_stream(s.base_url, key, "/v1/chat/completions", chat(0))
    t_round = seconds / (2 * a.d_rounds)
    rounds = []
    for r in range(a.d_rounds):
        order = [("tenants", st, ["w1", "w2"]), ("fcfs", sf, ["anon", "anon2"])]
        for name, s, names in (order if r % 2 == 0 else order[::-1]):
            x = phase_fair(s.base_url, names, a, t_round, s.metrics_text,
                           tenants=name == "tenants", pid=s.proc.pid)
            x.pop("samples", None)
            rounds.append(dict(x, engine=name, round=r, loadavg=_loadavg()))
    return rounds


def phase_c(url, a):
    """The quota burst: 3 x quota requests of tenant q at once, probes of tenant `probe`."""
    import threading

    q = a.quota
    probe_idle = interactive(url, "k-probe", 10, argparse.Namespace(n_inter=4, think_s=0.05))
    results, lock = [], threading.Lock()
    go = threading.Event()

    def one(i):
        go.wait()
        body = dict(short_completion(a)(10_000 + i), max_tokens=a.batch_out)
        r = tl.post_stream(url, "k-q", "/v1/completions", body)
        with lock:
            results.append(r)

    ths = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(3 * q)]
    for t in ths:
        t.start()
    go.set()
    probes = interactive(url, "k-probe", 3 * a.think_s + 2, argparse.Namespace(
        n_inter=a.n_inter, think_s=a.think_s))
    for t in ths:
        t.join(600)
    res = tl.quota_check(results, q, "max_concurrent")
    res.update({"quota": q, "probe_idle": ttft_summary(probe_idle),
                "probe_during_burst": ttft_summary(probes),
                "probe_failed": sum(1 for r in probes if r["status"] != 200),
                "error_example": next((r["error"] for r in results if r["status"] == 429), None),
                "retry_after_example": next((r["retry_after"] for r in results
                                             if r["status"] == 429), None)})
    return res


def run(a):
    t_start = time.monotonic()
    B = a.budget_s
    engines = [e for e in a.engines.split(",") if e]
    for e in engines:
        if e not in ENGINES_A:
            sys.exit(f"tenancy.py: --engines: unknown '{e}' (expected {', '.join(ENGINES_A)})")
    if "llama" in engines and not a.llama_server:
        sys.exit("tenancy.py: --engines has llama but no --llama-server was given")
    t_idle, t_flood = a.frac_idle * B, a.frac_flood * B
    t_fair, t_eq = a.frac_fair * B, a.frac_eq * B
    cfg = Path(tempfile.mkdtemp(prefix="zinc-tenancy-")) / "tenants.toml"
    cfg.write_text(tenants_toml(a.quota))
    logs = Path(a.logs)
    keys_t = {"inter": "k-inter", "batch": "k-batch"}
    keys_f = {"inter": "k-anon", "batch": "k-anon"}  # FCFS: any key, one tenant
    res = {"args": vars(a), "machine": {"host": platform.node(), "cpus": _cpus(),
                                        "loadavg_start": _loadavg()},
           "a": {}, "commands": {}}

    def server(name, argv):
        res["commands"][name] = argv
        return Server(name, argv, argv[argv.index("--port") + 1], logs / f"{name}.log").start()

    for name in ENGINES_A:
        need = name in engines or (name == "tenants")
        if not need:
            continue
        port = free_port()
        if name == "llama":
            argv = llama_argv(a, port)
        else:
            argv = zinc_argv(a, port, cfg if name in ("tenants", "noguard", "noclass") else None,
                             class_aware=name != "noclass", guard=name != "noguard")
        with server(name, argv) as s:
            MODEL["id"] = s.model_id or "m"
            # One unmeasured chat first (as bench/run's warm-up): a server's first request
            # pays one-time costs (llama-server: ~4 s here) that are no part of idle TTFT.
            tl.post_stream(s.base_url, "k-probe" if name != "fcfs" else "k-anon",
                           "/v1/chat/completions", chat(0))
            keys = keys_t if name in ("tenants", "noguard", "noclass") else keys_f
            if name in engines:
                print(f"[{time.monotonic() - t_start:6.1f}s] (a) {name}", flush=True)
                res["a"][name] = phase_a(s.base_url, keys, a, t_idle, t_flood)
            if name == "tenants" and a.fair:
                print(f"[{time.monotonic() - t_start:6.1f}s] (b) 1:2 and equal", flush=True)
                res["b12"] = phase_fair(s.base_url, ["w1", "w2"], a, t_fair, s.metrics_text,
                                       pid=s.proc.pid)
                res["beq"] = phase_fair(s.base_url, ["e1", "e2"], a, t_eq, s.metrics_text)
            if name == "tenants" and a.quota > 0:
                print(f"[{time.monotonic() - t_start:6.1f}s] (c) quota burst", flush=True)
                res["c"] = phase_c(s.base_url, a)
    if a.fair:
        print(f"[{time.monotonic() - t_start:6.1f}s] (d) tenants vs FCFS, alternating", flush=True)
        with server("d_tenants", zinc_argv(a, free_port(), cfg)) as st, \
                server("d_fcfs", zinc_argv(a, free_port(), None)) as sf:
            res["d_rounds"] = phase_d(st, sf, a, a.frac_d * B)
    res["machine"]["loadavg_end"] = _loadavg()
    res["elapsed_s"] = time.monotonic() - t_start
    analyse(res, a)
    return res


def analyse(res, a):
    if "b12" in res:
        s = [(t, r) for t, r in res["b12"].get("samples", [])]
        wins = tl.windows(s, "w1", "w2", a.window_s)
        res["b12"]["windows"] = wins
        res["b12"]["split"] = tl.split_check(wins, 2.0, 0.10)
        sa, sb = sum(w["a"] for w in wins), sum(w["b"] for w in wins)
        res["b12"]["whole_ratio"] = sb / sa if sa else None
        done = res["b12"]["requests_done"]
        res["b12"]["requests_per_window"] = sum(done.values()) * a.window_s / res["b12"]["seconds"]
    if "beq" in res:
        s = res["beq"].get("samples", [])
        gap = tl.service_gap(s, "e1", "e2")
        prompt_rows = 16 + a.fair_out  # the short prompt (~12 tokens) rounded up, plus outputs
        bound = a.parallel * prompt_rows + a.max_batch_tokens
        res["beq"]["gap_rows"], res["beq"]["vtc_bound_rows"] = gap, bound
        res["beq"]["within_bound"] = gap is not None and gap <= bound
        wins = tl.windows(s, "e1", "e2", a.window_s)
        res["beq"]["windows"] = wins
    if res.get("d_rounds"):
        d = tl.ab_throughput(res["d_rounds"], "tenants", "fcfs", 0.05)
        d.update(tenants_tok_s=d["a_tok_s"], fcfs_tok_s=d["b_tok_s"], within_5pct=d["within"])
        res["d"] = d


def _loadavg():
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return None


def _cpus():
    try:
        return int(subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip())
    except (OSError, ValueError):
        return None


def _f(x, nd=2):
    return "—" if x is None else f"{x:.{nd}f}"


def markdown(res, a):
    L = [f"Model `{Path(a.model).name}`, {a.parallel} slots, -c {a.ctx} per sequence, "
         f"--max-batch-tokens {a.max_batch_tokens}, budget {a.budget_s:.0f} s (ran "
         f"{res['elapsed_s']:.0f} s); machine {res['machine']['host']} ({res['machine']['cpus']} "
         f"CPUs, load average {res['machine']['loadavg_start']} at the start, "
         f"{res['machine']['loadavg_end']} at the end).", ""]
    if res["a"]:
        names = {"tenants": "zinc --tenants", "noguard": "zinc --tenants --interactive-guard 0",
                 "noclass": "zinc --tenants --no-class-prefill",
                 "fcfs": "zinc FCFS", "llama": "llama.cpp llama-server (FIFO)"}
        cols = [k for k in ENGINES_A if k in res["a"]]
        L += ["(a) interactive TTFT, idle vs under the batch flood (s):", "",
              "| | " + " | ".join(names[c] for c in cols) + " |",
              "| --- |" + " ---: |" * len(cols)]
        for k, lab in (("p50", "p50"), ("p99", "p99")):
            for ph in ("idle", "flood"):
                L.append(f"| TTFT {lab} {ph} | " + " | ".join(
                    _f(res["a"][c][ph][k]) for c in cols) + " |")
        L.append("| **p99 flood / idle** | " + " | ".join(
            f"**{_f(res['a'][c]['ratio_p99'])}**" for c in cols) + " |")
        L.append("| samples idle / flood | " + " | ".join(
            f"{res['a'][c]['idle']['n']} / {res['a'][c]['flood']['n']}" for c in cols) + " |")
        L.append("| batch requests finished in the flood | " + " | ".join(
            str(res["a"][c]["batch_requests_done"]) for c in cols) + " |")
        L.append("| batch output tok/s while measured | " + " | ".join(
            _f(res["a"][c].get("batch_tok_s"), 1) for c in cols) + " |")
        L.append("")
    if "b12" in res:
        b = res["b12"]
        sp = b["split"]
        L += [f"(b) weights 1:2, {a.fair_clients} closed-loop clients each (fewest in flight "
              f"while measured: {b.get('min_in_flight')}), {a.fair_out} tokens out: "
              f"{b['requests_done']['w1']} + {b['requests_done']['w2']} requests finished in "
              f"{b['seconds']:.0f} s "
              f"({b['requests_per_window']:.1f} a {a.window_s:.0f} s window). Rows served "
              f"(prefill + decode) per window, w2 / w1 (target 2.00 ± 10 %): "
              f"{'all within' if sp['ok'] else 'NOT all within'} ({sp['n']} windows, worst "
              f"{_f(sp['worst'])}; over all windows together {_f(b['whole_ratio'])}).", "",
              "| window | w1 rows | w2 rows | w2 / w1 |",
              "| --- | ---: | ---: | ---: |"]
        for i, w in enumerate(b["windows"]):
            L.append(f"| {i} | {w['a']:.0f} | {w['b']:.0f} | {_f(w['ratio'])} |")
        L.append("")
    if "beq" in res:
        e = res["beq"]
        L += [f"(b) equal weights: largest service gap over any interval {_f(e['gap_rows'], 0)} "
              f"rows, VTC bound {e['vtc_bound_rows']} rows (slots x (16 + {a.fair_out}) + "
              f"{a.max_batch_tokens}): {'within' if e['within_bound'] else 'NOT within'}; "
              f"requests finished {e['requests_done']['e1']} + {e['requests_done']['e2']}.", ""]
    if "c" in res:
        c = res["c"]
        L += [f"(c) quota burst: tenant q (max_concurrent {c['quota']}, max_queued 0) sent "
              f"{c['sent']} at once: {c['served']} served, {c['refused_429']} refused with 429 "
              f"({c['named_quota']} naming `max_concurrent`, {c['with_retry_after']} with "
              f"Retry-After, e.g. `{c['retry_after_example']}`), {c['other']} other "
              f"{c['other_errors'] or ''}: "
              f"{'exact' if c['exact'] else 'NOT exact'}. Tenant probe meanwhile: "
              f"{c['probe_during_burst']['n']} chats served, {c['probe_failed']} failed, TTFT p50 "
              f"{_f(c['probe_during_burst']['p50'])} s (idle {_f(c['probe_idle']['p50'])} s).", ""]
    if "d" in res:
        d = res["d"]
        L += [f"(d) throughput of (b)'s 1:2 load, both servers up, {a.d_rounds} pairs of "
              f"alternating rounds: zinc --tenants {_f(d['a_tok_s'], 1)} tok/s, zinc FCFS "
              f"{_f(d['b_tok_s'], 1)} tok/s: ratio {_f(d['ratio'], 3)} "
              f"({'within' if d['within'] else 'NOT within'} 5 %); ratio per pair of rounds "
              f"{', '.join(_f(x, 3) for x in d['pair_ratios'])}.", ""]
        comp = [("zinc --tenants", d["a_steps"]), ("zinc FCFS", d["b_steps"])]
        if all(c for _, c in comp):
            L += ["Step composition over the measured rounds (engine /metrics, mean of rounds):",
                  "", "| | " + " | ".join(n for n, _ in comp) + " |", "| --- |" + " ---: |" * 2]
            for key, lab, nd in (("steps_per_s", "steps / s", 1), ("step_ms", "step, ms", 1),
                                 ("busy", "time in steps (busy)", 2),
                                 ("decode_rows_per_step", "decode rows / step", 2),
                                 ("prefill_rows_per_step", "prefill rows / step", 2),
                                 ("share_decode_only", "steps decode only", 2),
                                 ("share_mixed", "steps mixed", 2),
                                 ("share_prefill_only", "steps prefill only", 2),
                                 ("mean_slots_busy", "slots busy (mean of samples)", 2),
                                 ("mean_queue_depth", "queue depth (mean)", 1),
                                 ("preemptions", "preemptions", 0),
                                 ("server_cpu_ms_per_token", "server CPU ms / output token", 1)):
                L.append(f"| {lab} | " + " | ".join(_f(c.get(key), nd) for _, c in comp) + " |")
            L.append("")
    return "\n".join(L)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="cpu")
    ap.add_argument("--zinc", default="build/zinc")
    ap.add_argument("--llama-server", default="")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--engines", default=",".join(ENGINES_A),
                    help="engines for (a), comma-separated: " + ", ".join(ENGINES_A))
    ap.add_argument("--no-fair", dest="fair", action="store_false", help="skip (b) and (d)")
    ap.add_argument("--window-s", type=float, default=10)
    ap.add_argument("--warm-s", type=float, default=3)
    ap.add_argument("--frac-idle", type=float, default=0.03)
    ap.add_argument("--frac-flood", type=float, default=0.09)
    ap.add_argument("--frac-fair", type=float, default=0.14)
    ap.add_argument("--frac-eq", type=float, default=0.08)
    ap.add_argument("--frac-d", type=float, default=0.2,
                    help="(d): measured time of both servers together, a fraction of the budget")
    ap.add_argument("--d-rounds", type=int, default=2,
                    help="(d): pairs of alternating rounds (tenants, FCFS / FCFS, tenants, ...)")
    ap.add_argument("--zinc-arg", action="append", default=[], help="extra zinc serve argument")
    ap.add_argument("--llama-arg", action="append", default=[], help="extra llama-server argument")
    ap.add_argument("--logs", default="bench/out/logs/tenancy")
    ap.add_argument("--out", default="")
    for k in ("parallel", "ctx", "batch_sentences", "batch_out", "fair_out", "max_batch_tokens",
              "n_inter"):
        ap.add_argument("--" + k.replace("_", "-"), type=int, default=None)
    ap.add_argument("--think-s", type=float, default=None)
    ap.add_argument("--fair-clients", type=int, default=None,
                    help="closed-loop clients per tenant in (b) and (d) (default 2 x slots)")
    ap.add_argument("--budget-s", type=float, default=None)
    ap.add_argument("--quota", type=int, default=None,
                    help="max_concurrent of tenant q for (c); 0 skips (c) (default min(5, slots))")
    a = ap.parse_args(argv)
    for k, v in PRESETS[a.preset].items():
        if getattr(a, k, None) is None:
            setattr(a, k, v)
    if a.fair_clients is None:
        a.fair_clients = 2 * a.parallel
    if a.quota is None:
        a.quota = min(5, a.parallel)
    res = run(a)
    md = markdown(res, a)
    print(md)
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "tenancy.json").write_text(json.dumps(res, indent=1, default=str))
        (out / "tenancy.md").write_text(md + "\n")
        try:
            from harness import tenancy_plots
        except ImportError as e:  # results first: the plots are optional
            print(f"tenancy.py: no plots ({e})", file=sys.stderr)
        else:
            tenancy_plots.plot(res, out)
    return res


if __name__ == "__main__":
    main()
