#!/usr/bin/env python3
"""zinc vs llama.cpp on the CPU: prompt processing (pp) and generation (tg) speed, peak memory.

Runs `zinc bench` and llama.cpp's `llama-bench` (built by scripts/build-llama-cpp from the
llama.cpp inside the llama-cpp-python 0.3.36 source archive) alternately, A B A B ..., on the same
GGUF file with the same thread count, one repetition per process (each process does its own
untimed warm-up), so slow drifts in machine load hit both engines alike. Peak resident memory of
each process comes from os.wait4 (ru_maxrss). The 1-minute load average is recorded before each
run, because on a shared machine it is the main source of noise.

Writes, into --out (default docs/bench/):
  cpu_vs_llamacpp.json  every sample, the command lines, host and load data
  cpu_vs_llamacpp.md    the summary table (mean ± sd tokens/s, ratios, memory vs budget)
  cpu_vs_llamacpp.png   bar chart of the same (matplotlib)

Usage: bench/cpu_vs_llamacpp.py [--models smollm2 gemma3] [--threads 2] [--rounds 5]
                                [-p 512] [-n 128] [--zinc build/zinc] [--llama-bench PATH]
                                [--nice N] [--out DIR] [--name STEM]
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = {
    "smollm2": ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": ROOT / "models" / "gemma-3-270m-q4_k_m.gguf",
}
RUNS = []  # every process run: filled by main(), summarised by table()
OVERHEAD = 64 << 20  # bytes allowed beyond model file + KV cache (issue 2's memory target)


def renice_self(nice):
    """In the child before exec: lower our niceness. With the kernel's autogroup scheduling
    (sched_autogroup_enabled), niceness only ranks tasks inside one session's group, so also start
    a new session and give its whole group the same niceness."""
    os.setsid()
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(nice))
    except OSError:
        pass
    os.nice(nice)


def run_measured(cmd, nice=0):
    """Run cmd; return (stdout, peak RSS bytes, wall seconds). Raises on failure."""
    # Output goes to files (no pipe can fill up); the child is reaped with os.wait4, which
    # returns its own rusage, so ru_maxrss is this process's peak alone.
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe,
                             preexec_fn=(lambda: renice_self(nice)) if nice else None)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read(), fe.read()
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({p.returncode}): "
                           f"{err.decode(errors='replace')[-2000:]}")
    return out.decode(), ru.ru_maxrss * 1024, wall


def kv_bytes_llama_cpp(model_path, n_ctx):
    """f16 K and V for n_ctx positions in every layer, from the GGUF hyperparameters:
    n_layer * n_ctx * n_head_kv * (head_dim_k + head_dim_v) * 2 bytes. (An upper bound for
    llama.cpp on gemma3, whose sliding-window layers keep a smaller cache.)"""
    import gguf
    r = gguf.GGUFReader(str(model_path))
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()

    def get(key, default=None):
        f = r.fields.get(f"{arch}.{key}")
        return int(f.parts[-1][0]) if f is not None else default
    n_layer, n_embd, n_head = get("block_count"), get("embedding_length"), get("attention.head_count")
    n_head_kv = get("attention.head_count_kv", n_head)
    dk = get("attention.key_length", n_embd // n_head)
    dv = get("attention.value_length", n_embd // n_head)
    return n_layer * n_ctx * n_head_kv * (dk + dv) * 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5, help="A B rounds (one rep per process)")
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--zinc", default=str(ROOT / "build" / "zinc"))
    ap.add_argument("--llama-bench", default=str(ROOT / "build-peer" / "build" / "bin" / "llama-bench"))
    ap.add_argument("--out", default=str(ROOT / "docs" / "bench"))
    ap.add_argument("--name", default="cpu_vs_llamacpp", help="output file stem")
    ap.add_argument("--nice", type=int, default=0,
                    help="niceness for both engines (negative, as root, shields them from other "
                         "work on a shared machine)")
    a = ap.parse_args()
    for exe in (a.zinc, a.llama_bench):
        if not Path(exe).exists():
            sys.exit(f"cpu_vs_llamacpp: {exe} not found (build zinc; run scripts/build-llama-cpp)")

    zinc_version = subprocess.run([a.zinc, "--version"], capture_output=True, text=True).stdout
    runs = RUNS
    summary = {}
    for name in a.models:
        path = MODELS[name]
        if not path.exists():
            sys.exit(f"cpu_vs_llamacpp: {path} missing (scripts/fetch-models)")
        zinc_cmd = [a.zinc, "bench", "-m", str(path), "-p", str(a.p), "-n", str(a.n), "-r", "1",
                    "-t", str(a.threads), "--json"]
        llama_cmd = [a.llama_bench, "-m", str(path), "-p", str(a.p), "-n", str(a.n), "-r", "1",
                     "-t", str(a.threads), "-o", "json"]
        samples = {e: {"pp": [], "tg": []} for e in ("zinc", "llama.cpp")}
        rss = {"zinc": [], "llama.cpp": []}
        kv = {}
        for rnd in range(a.rounds):
            for engine, cmd in (("zinc", zinc_cmd), ("llama.cpp", llama_cmd)):
                load = os.getloadavg()[0]
                out, peak, wall = run_measured(cmd, a.nice)
                res = json.loads(out)
                for r in res:
                    test = "pp" if r["n_prompt"] > 0 else "tg"
                    samples[engine][test].extend(r["samples_ts"])
                    if engine == "zinc":
                        kv["zinc"] = r["kv_cache_bytes"]
                rss[engine].append(peak)
                runs.append({"model": name, "round": rnd, "engine": engine, "cmd": cmd,
                             "load_avg_1m_before": load, "wall_s": wall, "peak_rss_bytes": peak,
                             "results": res})
                print(f"{name} round {rnd + 1}/{a.rounds} {engine:9s}: " +
                      ", ".join(f"{'pp' if r['n_prompt'] else 'tg'} {r['avg_ts']:.1f} t/s"
                                for r in res) +
                      f", peak RSS {peak / 2**20:.1f} MiB, load {load:.2f}", flush=True)
        file_bytes = path.stat().st_size
        kv["llama.cpp"] = kv_bytes_llama_cpp(path, a.p + a.n)
        s = {"file_bytes": file_bytes, "n_ctx": a.p + a.n}
        for engine in samples:
            for test, xs in samples[engine].items():
                s[f"{engine}.{test}.mean"] = statistics.mean(xs)
                s[f"{engine}.{test}.sd"] = statistics.stdev(xs) if len(xs) > 1 else 0.0
                s[f"{engine}.{test}.median"] = statistics.median(xs)
                s[f"{engine}.{test}.samples"] = xs
            s[f"{engine}.peak_rss_bytes"] = max(rss[engine])
            s[f"{engine}.kv_bytes"] = kv.get(engine, 0)
            s[f"{engine}.budget_bytes"] = file_bytes + kv.get(engine, 0) + OVERHEAD
        for test in ("pp", "tg"):
            s[f"ratio.{test}"] = s[f"zinc.{test}.mean"] / s[f"llama.cpp.{test}.mean"]
            s[f"ratio_median.{test}"] = s[f"zinc.{test}.median"] / s[f"llama.cpp.{test}.median"]
        summary[name] = s

    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(), "cpu": cpu_model(), "n_cpus": os.cpu_count(),
        "zinc_version": zinc_version.strip(), "threads": a.threads, "n_prompt": a.p,
        "n_gen": a.n, "rounds": a.rounds, "nice": a.nice,
        "method": "alternating A B per round, one repetition per process, each process warms up",
    }
    (out_dir / f"{a.name}.json").write_text(
        json.dumps({"meta": meta, "summary": summary, "runs": runs}, indent=1) + "\n")
    md = table(summary, a, meta)
    (out_dir / f"{a.name}.md").write_text(md)
    plot(summary, a, out_dir / f"{a.name}.png")
    print(md)


def cpu_model():
    try:
        for ln in open("/proc/cpuinfo"):
            if ln.startswith("model name"):
                return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def table(summary, a, meta):
    mib = lambda b: f"{b / 2**20:.1f} MiB"
    threads = f"{a.threads} thread{'s' if a.threads != 1 else ''}"
    lines = [f"Run {meta['date']} on {meta['cpu']} ({meta['n_cpus']} CPUs), {threads}, "
             f"{a.rounds} alternating rounds; {meta['zinc_version'].splitlines()[0]}; "
             "llama.cpp from llama-cpp-python 0.3.36.", "",
             "Tokens/s: mean ± sd over the rounds (as llama-bench reports), then the median; the "
             "ratio and the target verdict use the means; the median ratio is shown for "
             "robustness against load spikes.", "",
             "| model | test | zinc t/s | llama.cpp t/s | zinc median | llama.cpp median "
             "| ratio (means) | ratio (medians) | target |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for name, s in summary.items():
        for test, target in (("pp", 0.8), ("tg", 1.0)):
            n = a.p if test == "pp" else a.n
            r = s[f"ratio.{test}"]
            lines.append(
                f"| {name} | {test}{n} | {s[f'zinc.{test}.mean']:.2f} ± {s[f'zinc.{test}.sd']:.2f} "
                f"| {s[f'llama.cpp.{test}.mean']:.2f} ± {s[f'llama.cpp.{test}.sd']:.2f} "
                f"| {s[f'zinc.{test}.median']:.2f} | {s[f'llama.cpp.{test}.median']:.2f} "
                f"| {r:.2f}x | {s[f'ratio_median.{test}']:.2f}x "
                f"| >= {target}x: {'met' if r >= target else 'MISSED'} |")
    loads = [r["load_avg_1m_before"] for r in RUNS]
    lines += ["", f"1-minute load average before each run: min {min(loads):.2f}, "
              f"max {max(loads):.2f} ({meta['n_cpus']} CPUs: near or above that, other work was "
              "competing); both engines "
              f"ran at nice {a.nice}.", ""]
    lines += ["| model | engine | peak RSS | model file + KV cache (n_ctx) + 64 MiB | within |",
              "| --- | --- | ---: | ---: | --- |"]
    for name, s in summary.items():
        for e in ("zinc", "llama.cpp"):
            lines.append(f"| {name} | {e} | {mib(s[f'{e}.peak_rss_bytes'])} | "
                         f"{mib(s['file_bytes'])} + {mib(s[f'{e}.kv_bytes'])} ({s['n_ctx']}) + "
                         f"64 MiB = {mib(s[f'{e}.budget_bytes'])} | "
                         f"{'yes' if s[f'{e}.peak_rss_bytes'] <= s[f'{e}.budget_bytes'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def plot(summary, a, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    names = list(summary)
    for ax, test in zip(axes, ("pp", "tg")):
        x = range(len(names))
        w = 0.38
        for k, (e, color) in enumerate((("zinc", "#3b7dd8"), ("llama.cpp", "#999999"))):
            means = [summary[n][f"{e}.{test}.mean"] for n in names]
            sds = [summary[n][f"{e}.{test}.sd"] for n in names]
            ax.bar([i + (k - 0.5) * w for i in x], means, w, yerr=sds, capsize=4, label=e,
                   color=color)
        for i, n in enumerate(names):
            top = max(summary[n][f"{e}.{test}.mean"] + summary[n][f"{e}.{test}.sd"]
                      for e in ("zinc", "llama.cpp"))
            ax.annotate(f"{summary[n][f'ratio.{test}']:.2f}x", (i, top), ha="center",
                        va="bottom", xytext=(0, 8), textcoords="offset points")
        ax.set_xticks(list(x))
        ax.set_xticklabels(names)
        ax.set_ylabel("tokens/s")
        ax.set_title(f"{test}{a.p if test == 'pp' else a.n}, {a.threads} "
                     f"thread{'s' if a.threads != 1 else ''}")
        ax.set_ylim(0, 1.2 * max(summary[n][f"{e}.{test}.mean"] + summary[n][f"{e}.{test}.sd"]
                                 for n in names for e in ("zinc", "llama.cpp")))
        ax.legend()
    fig.suptitle("zinc vs llama.cpp (CPU), mean ± sd over alternating runs")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
