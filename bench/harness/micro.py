"""Microbenchmarks: pp (prefill N tokens) and tg (decode N tokens) with `zinc bench` and
llama.cpp's `llama-bench`, on the same file and thread count, alternating the engines round by
round (A B, B A, ...), one timed repetition per process (each process warms up once, untimed), at
KV depth 0 and, on a --full run, at deeper depths (llama-bench's -d) where the model's context
allows. A depth is run for zinc only if `zinc bench --help` offers a depth option (-d/--n-depth);
otherwise the row says so and only llama.cpp's number is recorded.

Each sample keeps the engine's JSON, its stderr (zinc's tier/evidence lines come from there), the
load average before the run and the wall time.
"""
import json
import os
import subprocess
import tempfile
import time

from . import fairness, stats
from .engines import EVIDENCE_RE


def _preexec(nice):
    def f():
        os.setsid()
        if nice:
            try:
                with open("/proc/self/autogroup", "w") as fh:
                    fh.write(str(nice))
            except OSError:
                pass
            os.nice(nice)
    return f


def run_process(cmd, nice=0, env=None):
    """(stdout, stderr, wall seconds, peak RSS bytes); raises on a non-zero exit."""
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe, preexec_fn=_preexec(nice), env=env)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        rc = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read().decode(errors="replace"), fe.read().decode(errors="replace")
    if rc != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({rc}): {err[-1500:]}")
    return out, err, wall, ru.ru_maxrss * 1024


def zinc_depth_flag(zinc):
    h = subprocess.run([str(zinc), "bench", "--help"], capture_output=True, text=True).stdout
    for flag in ("--n-depth", "--depth"):
        if flag in h:
            return flag
    return None


def zinc_cmd(zinc, model, p, n, threads, depth, depth_flag, extra):
    cmd = [str(zinc), "bench", "-m", str(model), "-p", str(p), "-n", str(n), "-r", "1", "--json"]
    if threads:
        cmd += ["-t", str(threads)]
    if depth:
        cmd += [depth_flag, str(depth)]
    return cmd + list(extra)


def llama_cmd(llama_bench, model, p, n, threads, depth, target, extra):
    cmd = [str(llama_bench), "-m", str(model), "-p", str(p), "-n", str(n), "-r", "1", "-o", "json"]
    if threads:
        cmd += ["-t", str(threads)]
    if depth:
        cmd += ["-d", str(depth)]
    if target == "cuda":
        cmd += ["-ngl", "999"]
    return cmd + list(extra)


def parse_samples(engine, out):
    """{'pp': [t/s...], 'tg': [...]} from zinc bench --json / llama-bench -o json output."""
    res = json.loads(out)
    got = {"pp": [], "tg": []}
    for r in res:
        test = "pp" if r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0 else "tg"
        got[test].extend(r.get("samples_ts") or [r.get("avg_ts")])
    return got, res


def run(engines, model, p, n, depths, rounds, threads, target, nice, progress,
        zinc_extra=(), llama_extra=(), zinc_env=None):
    """engines: {'zinc': path or None, 'llama.cpp': path or None}. Returns the micro section."""
    depth_flag = zinc_depth_flag(engines["zinc"]) if engines.get("zinc") else None
    section = {"p": p, "n": n, "threads": threads, "rounds": rounds, "depths": depths,
               "zinc_depth_flag": depth_flag, "rows": [], "samples": []}
    names = [e for e in ("zinc", "llama.cpp") if engines.get(e)]
    for depth in depths:
        per = {e: {"pp": [], "tg": []} for e in names}
        skipped = {}
        for rnd, order in fairness.engine_order(names, rounds):
            for e in order:
                if e == "zinc" and depth and not depth_flag:
                    skipped[e] = "zinc bench has no depth option"
                    continue
                cmd = (zinc_cmd(engines[e], model, p, n, threads, depth, depth_flag, zinc_extra)
                       if e == "zinc" else
                       llama_cmd(engines[e], model, p, n, threads, depth, target, llama_extra))
                load = os.getloadavg()[0]
                try:
                    out, err, wall, rss = run_process(cmd, nice,
                                                      env=zinc_env if e == "zinc" else None)
                except RuntimeError as ex:
                    section["samples"].append({"engine": e, "depth": depth, "round": rnd,
                                               "cmd": cmd, "error": str(ex)[:1500]})
                    skipped[e] = "failed: " + str(ex).splitlines()[-1][:200]
                    progress.step(f"micro d{depth} round {rnd + 1}/{rounds} {e}: FAILED")
                    continue
                got, raw = parse_samples(e, out)
                for k in got:
                    per[e][k].extend(got[k])
                section["samples"].append({
                    "engine": e, "depth": depth, "round": rnd, "cmd": cmd, "load_avg_1m": load,
                    "wall_s": wall, "peak_rss_bytes": rss, "results": raw,
                    "evidence": [ln.strip() for ln in err.splitlines()
                                 if EVIDENCE_RE.search(ln)][:10],
                    "stderr_tail": err[-1500:]})
                progress.step(f"micro d{depth} round {rnd + 1}/{rounds} {e}: " + ", ".join(
                    f"{k}{p if k == 'pp' else n} {stats.median(v):.1f} t/s"
                    for k, v in got.items() if v) + f" (load {load:.2f})")
        for test in ("pp", "tg"):
            row = {"depth": depth, "test": f"{test}{p if test == 'pp' else n}"}
            for e in names:
                row[e] = stats.summarize(per[e][test])
                if e in skipped:
                    row[f"{e}_note"] = skipped[e]
            if "zinc" in names and "llama.cpp" in names:
                row["ratio_median"] = stats.ratio(row["zinc"]["median"],
                                                  row["llama.cpp"]["median"])
            section["rows"].append(row)
    return section
