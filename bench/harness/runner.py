"""bench/run's orchestration: locate or build both engines, describe the machine and the model,
then run the phases (micro, scenarios, load, prefix) one engine at a time on reusable servers,
saving the raw JSON after each phase, and finally write the markdown report and the plots.

Server phases alternate the engine order block by block (scenario by scenario, concurrency level
by concurrency level), restarting each server per block, so slow drifts in machine load hit both
engines alike; each block starts with a warm-up request.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

from . import engines, fairness, load, machine, micro, progress, report, scenarios

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
PHASES = ("micro", "scenarios", "load", "prefix")


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="bench/run", description="zinc vs llama.cpp: micro"
                                 "benchmarks, server scenarios, load sweep, shared prefix")
    ap.add_argument("--target", choices=("cpu", "cuda"), required=True)
    ap.add_argument("--quick", action="store_true", help="a smoke test of the harness (~1-2 min)")
    ap.add_argument("--full", action="store_true", help="also the 4k/16k depth microbenchmarks")
    ap.add_argument("--model", default=str(DEFAULT_MODEL))
    ap.add_argument("--phases", nargs="+", choices=PHASES, default=list(PHASES))
    ap.add_argument("--engines", nargs="+", choices=("zinc", "llama.cpp"),
                    default=["zinc", "llama.cpp"])
    ap.add_argument("--out", help="output folder (default docs/bench/<target>, or "
                    "bench/out/quick-<target> with --quick)")
    ap.add_argument("--threads", type=int, help="CPU threads for both engines (default: all "
                    "cores on cpu, the engines' default on cuda)")
    ap.add_argument("--slots", type=int, help="parallel sequences (default 16 cpu, 64 cuda)")
    ap.add_argument("--ctx", type=int, help="context per sequence (default min(model, 8192))")
    ap.add_argument("--concurrency", type=int, nargs="+", help="load sweep levels")
    ap.add_argument("--load-prompt-tokens", type=int, help="load sweep prompt length (approx.)")
    ap.add_argument("--load-output-tokens", type=int, help="load sweep max_tokens (ignore_eos)")
    ap.add_argument("--prefix-tokens", type=int, help="shared prefix length (approx.)")
    ap.add_argument("--runs", type=int, help="measured runs per scenario (default 5)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--rounds", type=int, help="microbenchmark rounds (default 3)")
    ap.add_argument("--nice", type=int, default=0, help="niceness of both engines (negative "
                    "needs root; shields both from other work on a shared machine)")
    ap.add_argument("--zinc", help="zinc binary (default: build it in build-bench/)")
    ap.add_argument("--zinc-build-dir", default=str(ROOT / "build-bench"))
    ap.add_argument("--llama-bin-dir", help="folder with llama-server and llama-bench "
                    "(default build-peer/build[-cuda]/bin, built when missing)")
    ap.add_argument("--no-build", action="store_true", help="never build; use what is there")
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--zinc-args", default="", help="extra args for zinc serve/bench (e.g. the "
                    "CUDA tier's device flag), space-separated")
    ap.add_argument("--zinc-serve-args", default="", help="extra args for zinc serve only")
    ap.add_argument("--zinc-bench-args", default="", help="extra args for zinc bench only")
    ap.add_argument("--llama-args", default="", help="extra args for llama-server/llama-bench")
    a = ap.parse_args(argv)
    q, cuda = a.quick, a.target == "cuda"
    a.threads = a.threads if a.threads is not None else (0 if cuda else os.cpu_count())
    a.slots = a.slots or (4 if q else (64 if cuda else 16))
    a.concurrency = a.concurrency or ([1, 2] if q else ([1, 2, 4, 8, 16, 32, 64] if cuda
                                                        else [1, 2, 4, 8, 16]))
    # On the 2-core CPU machine a 1024-token prompt takes ~2 s to prefill, so the sweep would
    # measure prefill alone; 256 tokens there keeps decode batching in view. GPU: 1024.
    a.load_prompt_tokens = a.load_prompt_tokens or (64 if q else (1024 if cuda else 256))
    a.load_output_tokens = a.load_output_tokens or (16 if q else 128)
    a.prefix_tokens = a.prefix_tokens or (256 if q else 1024)
    a.runs = a.runs or (2 if q else 5)
    a.rounds = a.rounds or (1 if q else 3)
    a.out = Path(a.out or (ROOT / "bench" / "out" / f"quick-{a.target}" if q
                           else ROOT / "docs" / "bench" / a.target))
    return a


class Run:
    """State of one bench/run invocation: the results dict and where it is saved."""

    def __init__(self, a):
        self.a = a
        self.a.out.mkdir(parents=True, exist_ok=True)
        # Server logs stay out of git (bench/out/ is ignored), also when --out is in docs/.
        self.logs = ROOT / "bench" / "out" / "logs" / self.a.out.name
        self.res = {"args": {k: (str(v) if isinstance(v, Path) else v)
                             for k, v in vars(a).items()},
                    "command": "bench/run " + " ".join(sys.argv[1:]),
                    "host": machine.host_info(), "engines": {}, "fairness": {}, "phases": {}}

    def save(self):
        self.res["host"]["load_avg_end"] = machine.load_avg()
        self.res["host"]["uptime_end"] = machine.uptime_line()
        (self.a.out / "results.json").write_text(json.dumps(self.res, indent=1) + "\n")


def locate(a, prog):
    """Find or build both engines; returns {'zinc': ZincSpec|None, 'llama.cpp': LlamaSpec|None}
    and the micro binaries."""
    specs = {}
    if "zinc" in a.engines:
        zinc = Path(a.zinc) if a.zinc else None
        if zinc is None:
            if not a.no_build:
                engines.build_zinc(a.zinc_build_dir, a.jobs, prog.log, cuda=a.target == "cuda")
            zinc = engines.find_zinc([a.zinc_build_dir, ROOT / "build"])
        if zinc is None or not zinc.exists():
            raise SystemExit("bench/run: no zinc binary (build it, or pass --zinc PATH)")
        specs["zinc"] = engines.ZincSpec("zinc", zinc, zinc, a.target)
    if "llama.cpp" in a.engines:
        bindir = Path(a.llama_bin_dir) if a.llama_bin_dir else engines.llama_bin_dir(a.target)
        if not (bindir / "llama-server").exists() and not a.no_build and not a.llama_bin_dir:
            engines.build_llama(a.target, a.jobs, prog.log)
        if not (bindir / "llama-server").exists():
            raise SystemExit(f"bench/run: {bindir}/llama-server missing "
                             "(scripts/build-llama-cpp [--cuda])")
        specs["llama.cpp"] = engines.LlamaSpec("llama.cpp", bindir / "llama-server",
                                               bindir / "llama-bench", a.target)
    return specs


def count_steps(a, server_engines, micro_engines):
    n = 0
    depths = depths_for(a, None)
    if "micro" in a.phases:
        n += (len(depths) + (1 if a.full else 0)) * a.rounds * len(micro_engines)
    if "scenarios" in a.phases:
        n += 5 * len(server_engines)
    if "load" in a.phases:
        n += len(a.concurrency) * len(server_engines)
    if "prefix" in a.phases:
        n += 2 * len(server_engines)
    return n


def depths_for(a, mi):
    if not a.full:
        return [0]
    ctx = (mi or {}).get("n_ctx_train") or 0
    return [0] + [d for d in (4096, 16384) if mi is None or d + a.load_prompt_tokens <= ctx]


def renice_self(nice):
    """Give this client the engines' niceness too (its own process and its session's autogroup),
    so that with --nice the client is shielded from background work as much as the servers."""
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(nice))
    except OSError:
        pass
    try:
        os.nice(nice)
    except OSError:
        pass


def main(argv=None):
    a = parse_args(argv if argv is not None else sys.argv[1:])
    if a.nice:
        renice_self(a.nice)
    run = Run(a)
    prog0 = progress.Progress(0, enabled=False)
    specs = locate(a, prog0)
    mi = machine.model_info(a.model)
    a.ctx = a.ctx or min(mi.get("n_ctx_train") or 8192, 8192)
    if a.quick:
        a.ctx = min(a.ctx, 2048)
    run.res["args"]["ctx"] = a.ctx
    run.res["model"] = mi
    run.res["bandwidth"] = machine.measure_copy_bandwidth(a.target)
    server_engines, notes = [], []
    for name, spec in specs.items():
        info = {"binary": str(spec.server_bin), "version": spec.version()}
        if name == "zinc":
            info["serve_available"] = spec.has_serve()
            if not info["serve_available"]:
                notes.append("zinc has no `serve` subcommand in this build: server phases ran "
                             "for llama.cpp only")
        if name != "zinc" or info["serve_available"]:
            server_engines.append(name)
        run.res["engines"][name] = info
    micro_bins = {"zinc": specs["zinc"].bench_bin if "zinc" in specs else None,
                  "llama.cpp": specs["llama.cpp"].bench_bin if "llama.cpp" in specs else None}
    micro_engines = [e for e, b in micro_bins.items() if b]
    prog = progress.Progress(count_steps(a, server_engines, micro_engines))
    for ln in prog0.lines:
        prog.lines.append(ln)
    run.res["notes"] = notes
    for n in notes:
        prog.log(n)
    prog.log(f"model {Path(a.model).name} sha256 {mi['sha256'][:16]}..., ctx/seq {a.ctx}, "
             f"slots {a.slots}, threads {a.threads or 'default'}, out {a.out}")
    prog.log(f"machine: {run.res['host']['uptime']}")
    zextra, lextra = a.zinc_args.split(), a.llama_args.split()
    zserve, zbench = zextra + a.zinc_serve_args.split(), zextra + a.zinc_bench_args.split()
    try:
        if "micro" in a.phases and micro_engines:
            p, n = (64, 16) if a.quick else (512, 128)
            mc = micro.run(
                micro_bins, a.model, p, n, depths_for(a, mi), a.rounds, a.threads, a.target,
                a.nice, prog, zbench, lextra, zinc_env=zinc_env(a.target))
            if a.full:
                # A long prefill, since `zinc bench` has no depth option: ppL from an empty cache
                # (L = 4096, or half the context) shows the attention cost the depth rows would.
                long_p = min(4096, a.ctx // 2)
                ml = micro.run(micro_bins, a.model, long_p, 0, [0], a.rounds, a.threads,
                               a.target, a.nice, prog, zbench, lextra,
                               zinc_env=zinc_env(a.target))
                mc["rows"] += [r for r in ml["rows"] if r["test"].startswith("pp")]
                mc["samples"] += ml["samples"]
            run.res["phases"]["micro"] = mc
            run.save()
        ctx = PhaseContext(a, specs, server_engines, mi, run, prog, zserve, lextra)
        if "scenarios" in a.phases and server_engines:
            run.res["phases"]["scenarios"] = ctx.scenarios_phase()
            run.save()
        if "load" in a.phases and server_engines:
            run.res["phases"]["load"] = ctx.load_phase()
            run.save()
        if "prefix" in a.phases and server_engines:
            run.res["phases"]["prefix"] = ctx.prefix_phase()
            run.save()
    finally:
        run.res["progress_log"] = prog.lines
        prog.close()
        run.save()
    report.write(run.res, a.out)
    print((a.out / "results.md").read_text())
    print(f"bench/run: wrote {a.out}/results.json, results.md and plots", file=sys.stderr)


class PhaseContext:
    """Runs the server phases; holds what they share (specs, the chosen long-context prompt)."""

    def __init__(self, a, specs, server_engines, mi, run, prog, zextra, lextra):
        self.a, self.specs, self.names, self.mi = a, specs, server_engines, mi
        self.run, self.prog, self.zextra, self.lextra = run, prog, zextra, lextra
        self.model_name = Path(a.model).name
        self.long_prompt = None
        self.n_starts = 0

    def server(self, name, prefix_cache=True, tag=""):
        spec = self.specs[name]
        port = engines.free_port()
        argv = spec.server_argv(self.a.model, port, self.a.ctx, self.a.slots, self.a.threads,
                                prefix_cache=prefix_cache)
        argv += self.zextra if name == "zinc" else self.lextra
        self.n_starts += 1
        log = self.run.logs / f"{name.replace('.', '')}-{self.n_starts:03d}{tag}.log"
        env = zinc_env(self.a.target) if name == "zinc" else None
        srv = engines.Server(name, argv, port, log, env=env, nice=self.a.nice).start()
        actual_ctx = spec.actual_ctx_per_seq(srv.log_text(), self.a.ctx)
        info = self.run.res["engines"][name]
        info["server_argv" if prefix_cache else "server_argv_no_prefix_cache"] = argv
        info["ctx_per_seq"] = actual_ctx
        info["slots"] = self.a.slots
        info["model_sha256"] = machine.sha256_file(self.a.model)
        info["evidence"] = srv.evidence()
        info["health"] = srv.health
        self.check_shape()
        return srv

    def check_shape(self):
        e = self.run.res["engines"]
        if "zinc" in e and "llama.cpp" in e and "ctx_per_seq" in e["zinc"] \
                and "ctx_per_seq" in e["llama.cpp"]:
            self.run.res["fairness"]["same_model"] = fairness.same_model(e["zinc"], e["llama.cpp"])
            self.run.res["fairness"]["same_shape"] = fairness.same_shape(e["zinc"], e["llama.cpp"])

    def load_tag(self):
        return f"load {os.getloadavg()[0]:.2f}"

    def scenarios_phase(self):
        a = self.a
        out = {"warmup": a.warmup, "runs": a.runs, "scenarios": []}
        for k, scen in enumerate(scenarios.load_scenarios(a.quick)):
            entry = {"name": scen["name"], "max_tokens": scen["max_tokens"], "engines": {},
                     "order": []}
            order = self.names if k % 2 == 0 else list(reversed(self.names))
            for name in order:
                try:
                    res = self.scenario_block(name, scen, out)
                except RuntimeError as e:
                    res = {"error": str(e)[:1000], "warmup": [], "runs": [],
                           "summary": scenarios.summarize_runs([])}
                    self.prog.log(f"{scen['name']} {name}: FAILED: {str(e)[:300]}")
                entry["engines"][name] = res
                entry["order"].append(name)
                s = res["summary"]
                errs = [m["error"] for m in res["runs"] if m["error"]]
                if errs:
                    self.prog.log(f"{scen['name']} {name}: {len(errs)} failed runs: "
                                  f"{errs[0][:300]}")
                self.prog.step(f"{scen['name']} {name}: TTFT {fmt_ms(s['ttft_s']['median'])}, "
                               f"decode {fmt(s['decode_tps']['median'])} t/s, tokens "
                               f"{s['completion_tokens']}, used {s['n_used']}/{s['n_runs']} "
                               f"({self.load_tag()})")
            if len(entry["engines"]) == 2:
                z, l = entry["engines"]["zinc"]["summary"], entry["engines"]["llama.cpp"]["summary"]
                tok = fairness.same_tokens(z["completion_tokens"], l["completion_tokens"])
                entry["same_tokens"] = tok
                entry["same_prompt_tokens"] = {
                    "ok": z["prompt_tokens"] == l["prompt_tokens"],
                    "why": f"prompt tokens {z['prompt_tokens']} vs {l['prompt_tokens']}"}
                entry["score"] = fairness.phase_score(z["e2e_s"]["median"],
                                                      l["e2e_s"]["median"], tok)
            out["scenarios"].append(entry)
        if len(self.names) == 2:
            sc = out["scenarios"]
            # a scenario counts when both generated the same tokens and both have a median
            # (not every run flagged by the quality checks)
            matched = [e for e in sc if e.get("same_tokens", {}).get("ok")
                       and all(e["engines"][n]["summary"]["e2e_s"]["median"] is not None
                               for n in ("zinc", "llama.cpp"))]
            tz = sum(e["engines"]["zinc"]["summary"]["e2e_s"]["median"] or 0 for e in matched)
            tl = sum(e["engines"]["llama.cpp"]["summary"]["e2e_s"]["median"] or 0
                     for e in matched)
            out["overall"] = {
                "all_matched": len(matched) == len(sc), "n_matched": len(matched),
                "score": (tl / tz) if (len(matched) == len(sc) and tz) else None,
                "score_matched_only": (tl / tz) if tz else None,
                "why": "" if len(matched) == len(sc) else
                "token counts differ or every run was flagged in: " + ", ".join(
                    e["name"] for e in sc if e not in matched)}
        return out

    def scenario_block(self, name, scen, out):
        a = self.a
        with self.server(name, prefix_cache=False) as srv:
            prompt = scen["text"]
            if scen.get("long"):
                if self.long_prompt is None:
                    self.long_prompt = scenarios.fit_long_context(
                        scen, a.ctx, srv.base_url, token_budget=1500 if a.quick else None)
                    out["long_context"] = self.long_prompt[1]
                prompt = self.long_prompt[0]
            load_before = os.getloadavg()[0]
            model = srv.model_id or self.model_name
            res = scenarios.run_scenario(
                srv.base_url, model, scen, prompt, a.warmup, a.runs,
                extra_body=None if name == "zinc" else {"cache_prompt": False})
            res["load_avg_1m_before"] = load_before
            res["evidence"] = srv.evidence()
        return res

    def load_block(self, name, filler, c, n_req, k, first_id):
        a = self.a
        with self.server(name) as srv:
            model = srv.model_id or self.model_name
            load.run_level(srv.base_url, model, filler, 1, 1, a.load_output_tokens,
                           first_id=90000 + k)  # warm-up
            lb = os.getloadavg()[0]
            res = load.run_level(srv.base_url, model, filler, c, n_req, a.load_output_tokens,
                                 first_id=first_id)
            res["load_avg_1m_before"] = lb
            res["health_after"] = srv.fetch_health()
            res["evidence"] = srv.evidence()
        return res

    def load_phase(self):
        a = self.a
        handbook = (scenarios.SCEN_DIR / "long_context.txt").read_text()
        filler = load.filler_text(handbook, int(a.load_prompt_tokens * 3.9))
        out = {"prompt_tokens_target": a.load_prompt_tokens, "max_tokens": a.load_output_tokens,
               "slo": {"ttft_s": 0.5, "tpot_s": 0.05}, "levels": []}
        next_id = 0
        for k, c in enumerate(a.concurrency):
            n_req = max(2 * c, 4) if a.quick else max(2 * c, 8)
            level = {"concurrency": c, "engines": {}, "order": []}
            order = self.names if k % 2 == 0 else list(reversed(self.names))
            for name in order:
                try:
                    res = self.load_block(name, filler, c, n_req, k, next_id)
                except RuntimeError as e:
                    res = {"error": str(e)[:1000], "concurrency": c, "requests": [],
                           "summary": load.summarize_level([], 0.0, a.load_output_tokens)}
                    self.prog.log(f"load c={c} {name}: FAILED: {str(e)[:300]}")
                level["engines"][name] = res
                level["order"].append(name)
                s = res["summary"]
                if s["errors"]:
                    self.prog.log(f"load c={c} {name}: {s['n_requests'] - s['n_ok']} failed: "
                                  f"{s['errors'][0][:300]}")
                self.prog.step(f"load c={c} {name}: {s['output_tok_per_s']:.1f} out tok/s, TTFT "
                               f"p50 {fmt_ms(s['ttft_s']['p50'])} p99 {fmt_ms(s['ttft_s']['p99'])}"
                               f", TPOT p50 {fmt_ms(s['tpot_s']['p50'])}, tokens "
                               f"{s['completion_tokens_all']} ({self.load_tag()})")
            next_id += n_req
            if len(level["engines"]) == 2:
                z, l = level["engines"]["zinc"]["summary"], level["engines"]["llama.cpp"]["summary"]
                same = (z["all_full_length"] and l["all_full_length"]
                        and z["prompt_tokens_all"] == l["prompt_tokens_all"])
                level["same_tokens"] = {"ok": same, "why": "" if same else
                                        f"prompt tokens {z['prompt_tokens_all']} vs "
                                        f"{l['prompt_tokens_all']}, generated "
                                        f"{z['completion_tokens_all']} vs "
                                        f"{l['completion_tokens_all']}"}
                level["ratio_output_tok_per_s"] = (z["output_tok_per_s"] / l["output_tok_per_s"]
                                                   if l["output_tok_per_s"] else None)
            out["levels"].append(level)
        return out

    def prefix_phase(self):
        a = self.a
        handbook = (scenarios.SCEN_DIR / "long_context.txt").read_text()
        prefix = "Reference handbook:\n\n" + load.filler_text(handbook, int(a.prefix_tokens * 3.9))
        n_req = 3 if a.quick else 8
        max_tokens = 8 if a.quick else 16
        out = {"prefix_tokens_target": a.prefix_tokens, "n_requests": n_req,
               "max_tokens": max_tokens, "engines": {}}
        for k, name in enumerate(self.names):
            res = {}
            modes = (("on", True), ("off", False))
            if k % 2 == 1:
                modes = tuple(reversed(modes))
            for mode, on in modes:
                try:
                    with self.server(name, prefix_cache=on, tag=f"-prefix-{mode}") as srv:
                        r = load.run_prefix(srv.base_url, srv.model_id or self.model_name,
                                            prefix, n_req,
                                            max_tokens,
                                            cache_prompt=None if name == "zinc" else on)
                        r["health_after"] = srv.fetch_health()
                        r["evidence"] = srv.evidence()
                except RuntimeError as e:
                    r = {"error": str(e)[:500], "summary": None}
                res[mode] = r
                med = ((r.get("summary") or {}).get("ttft_s") or {}).get("median")
                self.prog.step(f"prefix {name} cache {mode}: TTFT median {fmt_ms(med)}"
                               f" ({self.load_tag()})")
            on_m = ((res["on"].get("summary") or {}).get("ttft_s") or {}).get("median")
            off_m = ((res["off"].get("summary") or {}).get("ttft_s") or {}).get("median")
            res["ttft_ratio_cached_over_uncached"] = (on_m / off_m) if on_m and off_m else None
            out["engines"][name] = res
        return out


def zinc_env(target):
    """zinc's environment: ZINC_TIER=<target> unless the caller set ZINC_TIER, so that a cuda run
    fails loudly instead of quietly serving from the CPU tier (docs/runtime.md)."""
    return dict(os.environ, ZINC_TIER=os.environ.get("ZINC_TIER", target))


def fmt(x):
    return "-" if x is None else f"{x:.1f}"


def fmt_ms(x):
    return "-" if x is None else f"{x * 1000:.0f} ms"


if __name__ == "__main__":
    t0 = time.time()
    main()
