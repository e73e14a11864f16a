"""bench/run's orchestration: locate or build both engines, describe the machine and the model,
then run the phases (micro, scenarios, load, prefix, and with --full the deep-KV microbenchmarks)
one engine at a time on reusable servers (phases.py), within an optional time budget
(--budget-s, budget.py), saving the raw JSON after every block, and finally write the markdown
report and the plots, and print a short summary table last.

A SIGTERM (the GPU machine's per-command limit, `timeout`) ends the run through the same path
as a normal finish: servers stopped, JSON saved, report written.
"""
import argparse
import json
import os
import signal
import sys
from pathlib import Path

from . import budget as budget_mod
from . import engines, machine, memory, micro, phases, progress, report, served, stats

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
PHASES = ("micro", "scenarios", "load", "prefix")
# Shares of the time budget (budget.py); "depths" is --full's deep-KV micro phase, run last.
PHASE_WEIGHTS = {"micro": 3.0, "scenarios": 2.5, "load": 3.0, "prefix": 0.5, "depths": 1.0}
# The GPU run on an 8B model (bench/device-run): pp512/tg128 of three files take ~60 s, the
# load sweep to 64 clients the most; the depth rows (a 16k-token fill per process) last.
GPU_PHASE_WEIGHTS = {"micro": 1.5, "scenarios": 2.5, "load": 3.5, "prefix": 0.5, "depths": 2.0}


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
    ap.add_argument("--load-slots", type=int, help="slots of the load sweep's servers (default "
                    "--slots)")
    ap.add_argument("--load-ctx", type=int, help="context per sequence of the load sweep's "
                    "servers (default --ctx)")
    ap.add_argument("--reuse-servers", action="store_true", help="one server per engine per "
                    "phase (one engine at a time, the first alternating by phase) instead of a "
                    "fresh server per scenario / level: the GPU run on an 8B model")
    ap.add_argument("--load-prompt-tokens", type=int, help="load sweep prompt length (approx.)")
    ap.add_argument("--load-output-tokens", type=int, help="load sweep max_tokens (ignore_eos)")
    ap.add_argument("--prefix-tokens", type=int, help="shared prefix length (approx.)")
    ap.add_argument("--runs", type=int, help="measured runs per scenario (default 5)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--rounds", type=int, help="microbenchmark rounds (default 3)")
    ap.add_argument("--micro-reps", type=int, default=1, help="timed repetitions inside each "
                    "bench process (-r of both tools; default 1: one process a sample)")
    ap.add_argument("--micro-depths", type=int, nargs="*", help="with --full: KV depths of the "
                    "decode-at-depth rows of the main model (default 4096 16384 where its "
                    "trained context allows; given: run even beyond it)")
    ap.add_argument("--zinc-variant", nargs="*", default=[], metavar="ZINC_X=V",
                    help="more zinc rows for the main model's pp/tg at depth 0, each with this "
                    "environment (e.g. ZINC_EXACT=0 ZINC_EXACT=1: both modes beside the default)")
    ap.add_argument("--copy-bw-bin", help="a program printing the device's copy bandwidth "
                    "(tests/cuda/bench_runner: `--copy-bw`), used when PyTorch is missing")
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
    ap.add_argument("--micro-models", nargs="*", default=[], help="more GGUF files for the "
                    "microbenchmarks only (the GPU run: the 8B-shape synthetic models)")
    ap.add_argument("--budget-s", type=float, help="wall-clock budget of the whole run: work "
                    "that does not fit is skipped (or runs cut) and reported as such")
    ap.add_argument("--scenario-temp", type=float, help="scenario temperature (default: "
                    "bench/scenarios/scenarios.json's; 0: greedy)")
    a = ap.parse_args(argv)
    a.missing = []
    for v in a.zinc_variant:
        k, eq, _ = v.partition("=")
        if not (eq and k.startswith("ZINC_") and k[5:].replace("_", "").isalnum()):
            ap.error(f"--zinc-variant {v!r}: expected ZINC_NAME=VALUE (e.g. ZINC_EXACT=0)")
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
    a.load_slots = a.load_slots or a.slots
    a.load_ctx = a.load_ctx or None  # --ctx's value once the model is known
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
                    "host": machine.host_info(), "engines": {}, "fairness": {}, "phases": {},
                    # zinc's switches (ZINC_EXACT, ZINC_CUDA_GRAPH, ...) as this run had them
                    "zinc_env": {k: v for k, v in os.environ.items() if k.startswith("ZINC_")}}

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
            prog.log(f"zinc: no binary ({zinc or 'none found'}; build it, or pass --zinc PATH); "
                     "running without it")
            a.missing.append(f"zinc missing: {zinc or 'no binary found'}")
        else:
            specs["zinc"] = engines.ZincSpec("zinc", zinc, zinc, a.target)
    if "llama.cpp" in a.engines:
        bindir = Path(a.llama_bin_dir) if a.llama_bin_dir else engines.llama_bin_dir(a.target)
        if not (bindir / "llama-server").exists() and not a.no_build and not a.llama_bin_dir:
            engines.build_llama(a.target, a.jobs, prog.log)
        srv, bench = bindir / "llama-server", bindir / "llama-bench"
        if not srv.exists() and not bench.exists():
            # Partial results beat none (the GPU run): zinc alone, said loudly in the report.
            prog.log(f"llama.cpp: neither {srv} nor {bench} exists (scripts/build-llama-cpp "
                     "[--cuda]); running without it")
            a.missing.append(f"llama.cpp missing: no {srv} or {bench}")
        else:
            specs["llama.cpp"] = engines.LlamaSpec(
                "llama.cpp", srv if srv.exists() else None, bench if bench.exists() else None,
                a.target)
    return specs


def count_steps(a, server_engines, micro_engines):
    n = 0
    depths = depths_for(a, None)
    if "micro" in a.phases:
        n += (1 + len(a.micro_models) + (len(depths) if a.full else 0)) * a.rounds \
            * len(micro_engines)
        n += len(a.zinc_variant) * a.rounds if "zinc" in micro_engines else 0
    if "scenarios" in a.phases:
        n += 5 * len(server_engines)
    if "load" in a.phases:
        n += len(a.concurrency) * len(server_engines)
    if "prefix" in a.phases:
        n += 2 * len(server_engines)
    return n


def depths_for(a, mi):
    """Depth 0, and with --full the decode-at-depth rows' depths plus the long prefill (listed
    as one more entry when counting): --micro-depths as given, else 4096 and 16384 where the
    model's trained context allows."""
    if not a.full:
        return [0]
    if a.micro_depths is not None:
        return [0] + list(a.micro_depths)
    ctx = (mi or {}).get("n_ctx_train") or 0
    return [0] + [d for d in (4096, 16384) if mi is None or d + 128 <= ctx]


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


def zinc_env(target):
    """zinc's environment: ZINC_TIER=<target> unless the caller set ZINC_TIER, so that a cuda run
    fails loudly instead of quietly serving from the CPU tier (docs/runtime.md)."""
    return dict(os.environ, ZINC_TIER=os.environ.get("ZINC_TIER", target))


def on_sigterm(signum, frame):
    raise SystemExit(f"bench/run: signal {signum}: stopping, saving what was measured")


def describe_engines(run, specs, missing=()):
    server_engines, notes = [], list(missing)
    for name, spec in specs.items():
        if spec.server_bin is None:
            run.res["engines"][name] = {"binary": None, "version": spec.version()}
            notes.append(f"{name}: no server binary: server phases without it")
            continue
        info = {"binary": str(spec.server_bin), "version": spec.version()}
        if name == "zinc":
            info["serve_available"] = spec.has_serve()
            if not info["serve_available"]:
                notes.append("zinc has no `serve` subcommand in this build: server phases ran "
                             "for llama.cpp only")
        if name != "zinc" or info["serve_available"]:
            server_engines.append(name)
        run.res["engines"][name] = info
    return server_engines, notes


def micro_jobs(a, mi, models, deep):
    """The microbenchmark jobs: pp512/tg128 at depth 0 on every model (deep=False), or (deep)
    the --full extras on the main model (the headline): a long prefill from an empty cache
    (pp4096, or half the trained context when shorter), then decode (tg128) at each depth of
    depths_for (prefill at depth is not a row: the issue asks for decode there)."""
    p, n = (64, 16) if a.quick else (512, 128)
    jobs = []
    for key, path, info in models:
        if not deep:
            jobs.append({"model_key": key, "model": path, "p": p, "n": n, "depth": 0})
            continue
        if key != "main":
            continue
        long_p = min(4096, (info.get("n_ctx_train") or 8192) // 2)
        if a.quick:
            long_p = min(long_p, 256)
        if long_p > p:
            jobs.append({"model_key": key, "model": path, "p": long_p, "n": 0, "depth": 0})
        for d in depths_for(a, info)[1:]:
            # one timed run a process: each run refills the depth first (seconds at 16k)
            jobs.append({"model_key": key, "model": path, "p": 0, "n": n, "depth": d,
                         "reps": 1})
    return jobs


def micro_phase(a, run, bins, models, deep, prog, bud, zbench, lextra):
    jobs = micro_jobs(a, run.res["model"], models, deep)
    secs = micro.run_matrix(bins, jobs, a.rounds, a.threads, a.target, a.nice, prog, bud,
                            zbench, lextra, zinc_env=zinc_env(a.target),
                            first_round_global=not deep, reps=a.micro_reps)
    infos = {key: info for key, _, info in models}
    for key, sec in secs.items():
        sec["model_info"] = infos[key]
        record_micro_memory(run, key, infos[key], sec, deep)
        if key == "main":
            sec.update({"p": jobs[0]["p"], "n": jobs[0]["n"], "depths": depths_for(a, infos[key])})
            old = run.res["phases"].get("micro")
            if deep and old:  # the deep rows join the depth-0 section of the main model
                old["rows"] += sec["rows"]
                old["samples"] += sec["samples"]
                old["skipped"] = old.get("skipped", []) + sec["skipped"]
            else:
                run.res["phases"]["micro"] = sec
        else:
            extra = run.res["phases"].setdefault("micro_models", {})
            if deep and key in extra:
                extra[key]["rows"] += sec["rows"]
                extra[key]["samples"] += sec["samples"]
                extra[key]["skipped"] += sec["skipped"]
            else:
                extra[key] = sec
    run.save()


def micro_variants(a, run, bins, models, prog, bud, zbench):
    """The main model's depth-0 pp/tg for zinc under each --zinc-variant environment, with the
    same run's llama.cpp numbers beside them (phases.micro_variants, one section each)."""
    main = run.res["phases"].get("micro")
    if not bins.get("zinc") or not main or not a.zinc_variant:
        return
    _, path, info = models[0]
    p, n = (64, 16) if a.quick else (512, 128)
    out = run.res["phases"].setdefault("micro_variants", {})
    for var in a.zinc_variant:
        k, _, v = var.partition("=")
        jobs = [{"model_key": "main", "model": path, "p": p, "n": n, "depth": 0}]
        sec = micro.run_matrix({"zinc": bins["zinc"]}, jobs, a.rounds, a.threads, a.target,
                               a.nice, prog, bud, zbench, (), zinc_env=dict(zinc_env(a.target),
                                                                             **{k: v}),
                               reps=a.micro_reps)["main"]
        for r in sec["rows"]:
            peer = next((m for m in main["rows"] if (m["test"], m["depth"]) ==
                         (r["test"], r["depth"])), None)
            if peer and (peer.get("llama.cpp") or {}).get("n"):
                r["llama.cpp"] = peer["llama.cpp"]
                r["llama.cpp_note"] = "the same run's llama.cpp row"
                r["ratio_median"] = stats.ratio(r["zinc"]["median"], peer["llama.cpp"]["median"])
        sec.update({"model_info": info, "env": {k: v}})
        out[var] = sec
    run.save()


def record_micro_memory(run, key, info, sec, deep):
    """zinc bench's device memory (its first sample that reports one) as a memory-table row."""
    for s in sec["samples"]:
        if s.get("engine") != "zinc":
            continue
        rep = memory.zinc_memory(bench_results=s.get("results"))
        if rep is None:
            continue
        n_ctx = next((r.get("n_ctx") for r in s.get("results") or [] if r.get("n_ctx")), None)
        name = Path(info.get("path", key)).name
        run.res.setdefault("device_memory", []).append(memory.entry(
            "zinc", f"micro {name}{' (depth rows)' if deep else ''}", 1, n_ctx, rep, None))
        return


def main(argv=None):
    a = parse_args(argv if argv is not None else sys.argv[1:])
    signal.signal(signal.SIGTERM, on_sigterm)
    if a.nice:
        renice_self(a.nice)
    bud = budget_mod.Budget(a.budget_s)
    run = Run(a)
    prog0 = progress.Progress(0, enabled=False)
    specs = locate(a, prog0)
    if not specs:
        raise SystemExit("bench/run: neither engine found: " + "; ".join(a.missing))
    mi = machine.model_info(a.model)
    a.ctx = a.ctx or min(mi.get("n_ctx_train") or 8192, 8192)
    if a.quick:
        a.ctx = min(a.ctx, 2048)
    a.load_ctx = a.load_ctx or a.ctx
    run.res["args"]["ctx"] = a.ctx
    run.res["args"]["load_ctx"] = a.load_ctx
    run.res["model"] = mi
    models = [("main", a.model, mi)]
    for m in a.micro_models:
        if not Path(m).exists():
            bud.skipped.append({"phase": "micro", "what": f"micro {Path(m).name}",
                                "why": f"model file {m} missing"})
            continue
        models.append((Path(m).name, m, machine.model_info(m)))
    run.res["micro_models"] = {key: info for key, _, info in models[1:]}
    if a.target == "cuda":  # before any engine runs: the baseline of the driver's memory view
        run.res["gpu_baseline_used_bytes"] = memory.gpu_used_bytes()
    run.res["bandwidth"] = machine.measure_copy_bandwidth(a.target, a.copy_bw_bin)
    server_engines, notes = describe_engines(run, specs, a.missing)
    micro_bins = {"zinc": specs["zinc"].bench_bin if "zinc" in specs else None,
                  "llama.cpp": specs["llama.cpp"].bench_bin if "llama.cpp" in specs else None}
    micro_engines = [e for e, b in micro_bins.items() if b]
    prog = progress.Progress(count_steps(a, server_engines, micro_engines))
    for ln in prog0.lines:
        prog.lines.append(ln)
    notes += [f"phase {p} not run (not in --phases)" for p in PHASES if p not in a.phases]
    run.res["notes"] = notes
    for n in notes:
        prog.log(n)
    prog.log(f"model {Path(a.model).name} sha256 {mi['sha256'][:16]}..., ctx/seq {a.ctx}, "
             f"slots {a.slots}, threads {a.threads or 'default'}, out {a.out}"
             + (f", budget {a.budget_s:.0f} s" if a.budget_s else ""))
    prog.log(f"machine: {run.res['host']['uptime']}")
    zextra, lextra = a.zinc_args.split(), a.llama_args.split()
    zserve, zbench = zextra + a.zinc_serve_args.split(), zextra + a.zinc_bench_args.split()
    todo = [p for p in PHASES if p in a.phases]
    if a.full and "micro" in a.phases:
        todo.append("depths")
    if not micro_engines:
        todo = [p for p in todo if p not in ("micro", "depths")]
    if not server_engines:
        todo = [p for p in todo if p in ("micro", "depths")]
    weights = GPU_PHASE_WEIGHTS if a.target == "cuda" else PHASE_WEIGHTS
    bud.plan({p: weights[p] for p in todo})
    ctx = phases.PhaseContext(a, specs, server_engines, mi, run, prog, zserve, lextra, bud,
                              lambda name: zinc_env(a.target) if name == "zinc" else None)
    try:
        for ph in todo:
            share = bud.start_phase(ph)
            if bud.limited:
                prog.log(f"phase {ph}: {share:.0f} s of the budget ({bud.remaining():.0f} s left)")
            try:
                if ph in ("micro", "depths"):
                    micro_phase(a, run, micro_bins, models, ph == "depths", prog, bud, zbench,
                                lextra)
                    if ph == "micro":
                        micro_variants(a, run, micro_bins, models, prog, bud, zbench)
                elif a.reuse_servers and ph in ("scenarios", "load"):
                    k = [p for p in todo if p in ("scenarios", "load")].index(ph)
                    run.res["phases"][ph] = getattr(served, f"{ph}_phase")(ctx, k)
                else:
                    result = getattr(ctx, f"{ph}_phase")()
                    run.res["phases"][ph] = result
            except Exception as e:  # noqa: BLE001 - a phase's bug must not lose the others
                run.res.setdefault("phase_errors", {})[ph] = f"{type(e).__name__}: {e}"
                prog.log(f"phase {ph} FAILED: {type(e).__name__}: {e}")
            run.res["budget"] = bud.summary()
            run.save()
    finally:
        run.res["budget"] = bud.summary()
        run.res["progress_log"] = prog.lines
        prog.close()
        run.save()
        try:
            report.write(run.res, a.out)
            print((a.out / "results.md").read_text())
        except Exception as e:  # noqa: BLE001 - the JSON is saved; bench/report redoes this
            print(f"bench/run: writing the report failed: {type(e).__name__}: {e}")
        print("\n".join(report.short_summary(run.res)))
        print(f"bench/run: wrote {a.out}/results.json, results.md and plots", file=sys.stderr)


if __name__ == "__main__":
    main()
