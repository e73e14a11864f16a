"""Microbenchmarks: pp (prefill N tokens) and tg (decode N tokens) with `zinc bench` and
llama.cpp's `llama-bench`, on the same file and thread count, alternating the engines round by
round (A B, B A, ...), one timed repetition per process (each process warms up once, untimed), on one or more
models (the GPU run adds the 8B-shape synthetic files), at KV depth 0 and, on a --full run, at deeper depths (llama-bench's -d) where the model's context
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


def zinc_cmd(zinc, model, p, n, threads, depth, depth_flag, extra, reps=1):
    cmd = [str(zinc), "bench", "-m", str(model), "-p", str(p), "-n", str(n), "-r", str(reps),
           "--json"]
    if threads:
        cmd += ["-t", str(threads)]
    if depth:
        cmd += [depth_flag, str(depth)]
    return cmd + list(extra)


def llama_cmd(llama_bench, model, p, n, threads, depth, target, extra, reps=1):
    cmd = [str(llama_bench), "-m", str(model), "-p", str(p), "-n", str(n), "-r", str(reps), "-o",
           "json"]
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


def job_key(job):
    return f"{job['model_key']} p{job['p']} n{job['n']} d{job['depth']}"


def first_guess_s(job, target, reps=1):
    """Seconds one bench process of this job may take before any was measured: loading the file
    plus the warm-up and `reps` timed runs, each refilling `depth` positions first (a
    deliberately high guess; later rounds use measured times)."""
    gb = os.path.getsize(job["model"]) / 1e9
    runs = reps + 1
    if target == "cuda":
        return 5.0 + 2.0 * gb + runs * ((job["p"] + job["depth"]) / 2000.0 + job["n"] / 150.0)
    return 5.0 + 2.0 * gb + runs * ((job["p"] + job["depth"]) / 100.0 + job["n"] / 20.0)


def run_matrix(engines, jobs, rounds, threads, target, nice, progress, budget=None,
               zinc_extra=(), llama_extra=(), zinc_env=None, first_round_global=False, reps=1):
    """Microbenchmarks over several jobs ({"model_key", "model", "p", "n", "depth"}): round by
    round over all jobs (so that when the budget runs short, every job has had its first
    rounds), the engines alternating which goes first. Returns {model_key: section}, one section
    per model with its rows (depth, test) as `run` gives them; a job that did not fit the budget
    is recorded there (`skipped`) and in budget.skipped, fewer rounds in `cuts`."""
    depth_flag = zinc_depth_flag(engines["zinc"]) if engines.get("zinc") else None
    names = [e for e in ("zinc", "llama.cpp") if engines.get(e)]
    state = {}
    for job in jobs:
        sec = state.setdefault(job["model_key"], {
            "model_key": job["model_key"], "model": str(job["model"]), "threads": threads,
            "rounds": rounds, "reps": reps, "zinc_depth_flag": depth_flag, "jobs": [], "rows": [],
            "samples": [], "skipped": [], "rounds_done": {}})
        sec["jobs"].append({k: job[k] for k in ("p", "n", "depth")})
    per = {job_key(j): {e: {"pp": [], "tg": []} for e in names} for j in jobs}
    notes = {job_key(j): {} for j in jobs}
    stopped = set()
    for rnd, order in fairness.engine_order(names, rounds):
        for job in jobs:
            key = job_key(job)
            sec = state[job["model_key"]]
            if key in stopped:
                continue
            runnable = [e for e in order if not (e == "zinc" and job["depth"] and not depth_flag)]
            for e in order:
                if e not in runnable:
                    notes[key][e] = "zinc bench has no depth option"
            if budget is not None:
                est = sum(budget.estimate(f"micro {key} {e}",
                                          first_guess_s(job, target, job.get("reps", reps)))
                          for e in runnable)
                # The first round of the headline jobs may use the whole budget's time (what
                # the later phases then lack, they skip); the rest keeps to the phase's share.
                fits = budget.fits_total(est) if (rnd == 0 and first_round_global) \
                    else budget.fits(est)
                if not fits:
                    stopped.add(key)
                    if rnd == 0:
                        budget.skip(f"micro {key}", est_s=est)
                        sec["skipped"].append(f"{key}: budget (needs ~{est:.0f} s)")
                    else:
                        budget.cut(f"micro {key}: {rnd} of {rounds} rounds (budget)")
                    continue
            for e in runnable:
                depth, p, n = job["depth"], job["p"], job["n"]
                jr = job.get("reps", reps)
                cmd = (zinc_cmd(engines[e], job["model"], p, n, threads, depth, depth_flag,
                                zinc_extra, jr) if e == "zinc" else
                       llama_cmd(engines[e], job["model"], p, n, threads, depth, target,
                                 llama_extra, jr))
                load = os.getloadavg()[0]
                t0 = time.monotonic()
                try:
                    out, err, wall, rss = run_process(cmd, nice,
                                                      env=zinc_env if e == "zinc" else None)
                    got, raw = parse_samples(e, out)
                except (RuntimeError, ValueError, KeyError, TypeError) as ex:
                    sec["samples"].append({"engine": e, "depth": depth, "p": p, "n": n,
                                           "round": rnd, "cmd": cmd, "error": str(ex)[:1500]})
                    notes[key][e] = "failed: " + (str(ex).splitlines() or ["?"])[-1][:200]
                    progress.step(f"micro {key} round {rnd + 1}/{rounds} {e}: FAILED")
                    continue
                finally:
                    if budget is not None:
                        budget.record(f"micro {key} {e}", time.monotonic() - t0)
                for k in got:
                    per[key][e][k].extend(got[k])
                sec["samples"].append({
                    "engine": e, "depth": depth, "p": p, "n": n, "round": rnd, "cmd": cmd,
                    "load_avg_1m": load, "wall_s": wall, "peak_rss_bytes": rss, "results": raw,
                    "evidence": [ln.strip() for ln in err.splitlines()
                                 if EVIDENCE_RE.search(ln)][:10],
                    "stderr_tail": err[-1500:]})
                progress.step(f"micro {key} round {rnd + 1}/{rounds} {e}: " + ", ".join(
                    f"{k}{p if k == 'pp' else n} {stats.median(v):.1f} t/s"
                    for k, v in got.items() if v) + f" (load {load:.2f})")
            sec["rounds_done"][key] = rnd + 1
    for job in jobs:
        key, sec = job_key(job), state[job["model_key"]]
        for test in ("pp", "tg"):
            if (test == "pp" and not job["p"]) or (test == "tg" and not job["n"]):
                continue
            row = {"depth": job["depth"],
                   "test": f"{test}{job['p'] if test == 'pp' else job['n']}",
                   "rounds_done": sec["rounds_done"].get(key, 0)}
            for e in names:
                row[e] = stats.summarize(per[key][e][test])
                if e in notes[key]:
                    row[f"{e}_note"] = notes[key][e]
                elif key in stopped and not row[e]["n"]:
                    row[f"{e}_note"] = "skipped (budget)"
            if "zinc" in names and "llama.cpp" in names:
                row["ratio_median"] = stats.ratio(row["zinc"]["median"],
                                                  row["llama.cpp"]["median"])
            sec["rows"].append(row)
    return state


def run(engines, model, p, n, depths, rounds, threads, target, nice, progress,
        zinc_extra=(), llama_extra=(), zinc_env=None, budget=None):
    """One model's microbenchmarks (pp p, tg n at each depth); the section of run_matrix."""
    jobs = [{"model_key": "main", "model": model, "p": p, "n": n, "depth": d} for d in depths]
    sec = run_matrix(engines, jobs, rounds, threads, target, nice, progress, budget, zinc_extra,
                     llama_extra, zinc_env)["main"]
    sec.update({"p": p, "n": n, "depths": depths})
    return sec
