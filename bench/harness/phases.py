"""bench/run's server phases (scenarios, load sweep, shared prefix), one engine at a time on
reusable servers, within the run's time budget (budget.py).

Each block of work (one scenario, one concurrency level, one prefix-cache mode) starts a fresh
server per engine and sends a warm-up request; the engine order alternates block by block (A B,
B A, ...), so slow drifts in machine load hit both engines alike. A block that fails (a server
that does not start, crashes or answers errors) is recorded with its error and the other engine's
results are kept; an engine whose server failed to start twice in a row is not started again
(its later blocks say so). The results are saved after every block, so a run cut short keeps what
it measured.
"""
import os
import re
import time
from pathlib import Path

from . import engines, fairness, load, machine, scenarios

MAX_START_FAILURES = 2


def fmt(x):
    return "-" if x is None else f"{x:.1f}"


def fmt_ms(x):
    return "-" if x is None else f"{x * 1000:.0f} ms"


class PhaseContext:
    """Runs the server phases; holds what they share (specs, the chosen long-context prompt, the
    budget, each engine's start failures)."""

    def __init__(self, a, specs, server_engines, mi, run, prog, zextra, lextra, budget, env_of):
        self.a, self.specs, self.names, self.mi = a, specs, server_engines, mi
        self.run, self.prog, self.zextra, self.lextra = run, prog, zextra, lextra
        self.budget, self.env_of = budget, env_of
        self.model_name = Path(a.model).name
        # `zinc synth` files have random weights: their text is garbage by construction, so the
        # quality flags are recorded but do not exclude runs (equal work: ignore_eos)
        self.synthetic = str(mi.get("name", "")).startswith("zinc synth")
        self.long_prompt = None
        self.n_starts = 0
        self.start_failures = {n: 0 for n in server_engines}
        self.start_s = {}

    # ------------------------------------------------------------------ servers

    def timeout_s(self, cap):
        """A request or start timeout: cap, or less when the budget has less left (at least
        10 s, so that a block already running can finish its request)."""
        left = self.budget.remaining()
        return max(10.0, min(cap, left + 5.0))

    def server(self, name, prefix_cache=True, tag="", slots=None, ctx=None):
        if self.start_failures.get(name, 0) >= MAX_START_FAILURES:
            raise RuntimeError(f"{name} not started: its server failed to start "
                               f"{self.start_failures[name]} times in a row")
        spec = self.specs[name]
        port = engines.free_port()
        slots, ctx = slots or self.a.slots, ctx or self.a.ctx
        argv = spec.server_argv(self.a.model, port, ctx, slots, self.a.threads,
                                prefix_cache=prefix_cache)
        argv += self.zextra if name == "zinc" else self.lextra
        self.n_starts += 1
        log = self.run.logs / f"{name.replace('.', '')}-{self.n_starts:03d}{tag}.log"
        env = self.env_of(name)
        t0 = time.monotonic()
        try:
            srv = engines.Server(name, argv, port, log, env=env, nice=self.a.nice).start(
                timeout_s=self.timeout_s(180.0))
        except RuntimeError:
            self.start_failures[name] = self.start_failures.get(name, 0) + 1
            raise
        self.start_failures[name] = 0
        self.start_s[name] = time.monotonic() - t0
        actual_ctx = spec.actual_ctx_per_seq(srv.log_text(), ctx)
        info = self.run.res["engines"][name]
        info["server_argv" if prefix_cache else "server_argv_no_prefix_cache"] = argv
        info["ctx_per_seq"] = actual_ctx
        info["slots"] = slots
        info.setdefault("servers", {})[tag or "default"] = {
            "slots": slots, "ctx_per_seq": actual_ctx, "prefix_cache": prefix_cache}
        info["model_sha256"] = machine.sha256_file(self.a.model)
        info["evidence"] = srv.evidence()
        info["health"] = srv.health
        if name != "zinc":  # llama.cpp's flash attention: its default is auto (on for CUDA)
            fa = re.search(r"Flash Attention was auto, set to (\w+)|flash_attn\s*=\s*(\S+)",
                           srv.log_text())
            if fa:
                info["flash_attn"] = fa.group(1) or fa.group(2)
        self.check_shape()
        return srv

    def start_guess(self):
        """Seconds a server start takes: the slowest measured so far, else 5 s."""
        return max(self.start_s.values()) if self.start_s else 5.0

    def check_shape(self):
        e = self.run.res["engines"]
        if "zinc" in e and "llama.cpp" in e and "ctx_per_seq" in e["zinc"] \
                and "ctx_per_seq" in e["llama.cpp"]:
            self.run.res["fairness"]["same_model"] = fairness.same_model(e["zinc"], e["llama.cpp"])
            self.run.res["fairness"]["same_shape"] = fairness.same_shape(e["zinc"], e["llama.cpp"])

    def load_tag(self):
        return f"load {os.getloadavg()[0]:.2f}"

    def save(self, key, value):
        self.run.res["phases"][key] = value
        self.run.save()

    # ------------------------------------------------------------------ scenarios

    def scenarios_phase(self):
        a = self.a
        request, seed_base = scenarios.request_settings(a.scenario_temp)
        scens = scenarios.load_scenarios(a.quick)
        out = {"warmup": a.warmup, "runs": a.runs, "request": request, "seed_base": seed_base,
               "scenarios": []}
        ran_any = False
        for k, scen in enumerate(scens):
            entry = {"name": scen["name"], "max_tokens": scen["max_tokens"], "engines": {},
                     "order": []}
            order = self.names if k % 2 == 0 else list(reversed(self.names))
            # this scenario's share: what is left of the phase, split over the scenarios left,
            # but at least what one warm-up and one run per engine need (earlier scenarios
            # come first); skipped only when the phase has not even that left
            need = len(order) * (self.start_guess() + 2 * self.budget.estimate("request", 2.0))
            left = self.budget.phase_left()
            if not ran_any:  # the first block may use the whole budget: it measures the rest
                left = max(left, min(need, self.budget.remaining()))
            allowance = max(left / (len(scens) - k), min(need, left))
            if left < need:
                self.budget.skip(f"scenario {scen['name']}", est_s=need)
                entry["skipped"] = "budget"
                out["scenarios"].append(entry)
                self.prog.step(f"{scen['name']}: skipped (budget)")
                self.save("scenarios", out)
                continue
            ran_any = True
            t_scen = time.monotonic()
            n_runs = None  # decided by the first engine's warm-up when the budget is limited
            for j, name in enumerate(order):
                if n_runs == 0:  # the first engine's warm-up showed that no run fits
                    break
                per_engine = (allowance - (time.monotonic() - t_scen)) / (len(order) - j)
                try:
                    res = self.scenario_block(name, scen, out, request, seed_base, n_runs,
                                              per_engine)
                except Exception as e:  # noqa: BLE001 - one engine's failure keeps the other's
                    res = {"error": f"{type(e).__name__}: {str(e)[:1000]}", "warmup": [],
                           "runs": [], "summary": scenarios.summarize_runs([])}
                    self.prog.log(f"{scen['name']} {name}: FAILED: {str(e)[:300]}")
                if n_runs is None and "n_runs_planned" in res:
                    n_runs = res["n_runs_planned"]
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
                self.save("scenarios", out)
            if n_runs == 0:
                self.budget.skip(f"scenario {scen['name']}", "budget: no run fits after the "
                                 f"first engine's warm-up ({order[0]})")
                entry["skipped"] = "budget: no run fits after the warm-up"
            elif n_runs is not None and n_runs < a.runs:
                self.budget.cut(f"scenario {scen['name']}: {n_runs} of {a.runs} runs (budget)")
                entry["runs_cut"] = n_runs
            if len(entry["engines"]) == 2:
                self.score_entry(entry)
            out["scenarios"].append(entry)
            self.save("scenarios", out)
        if len(self.names) == 2:
            out["overall"] = overall_score(out["scenarios"])
        return out

    @staticmethod
    def score_entry(entry):
        z, l = entry["engines"]["zinc"]["summary"], entry["engines"]["llama.cpp"]["summary"]
        tok = fairness.same_tokens(z["completion_tokens"], l["completion_tokens"])
        if not tok["ok"] and z["completion_tokens"] and l["completion_tokens"] \
                and not (z.get("full_length") and l.get("full_length")):
            short = [n for n, s in (("zinc", z), ("llama.cpp", l)) if not s.get("full_length")]
            tok["why"] += (f" ({', '.join(short)} stopped before max_tokens {entry['max_tokens']}"
                           ": ignore_eos not honoured?)")
        entry["same_tokens"] = tok
        entry["same_prompt_tokens"] = {
            "ok": z["prompt_tokens"] == l["prompt_tokens"],
            "why": f"prompt tokens {z['prompt_tokens']} vs {l['prompt_tokens']}"}
        entry["score"] = fairness.phase_score(z["e2e_s"]["median"], l["e2e_s"]["median"], tok)

    def scenario_block(self, name, scen, out, request, seed_base, n_runs, allowance):
        """One engine's warm-up + runs of one scenario. With a limited budget and n_runs None,
        the number of runs is what fits `allowance` seconds by the warm-up's duration (at most
        --runs); the block's result carries it as n_runs_planned for the other engine."""
        with self.server(name, prefix_cache=False) as srv:
            return self.scenario_on(srv, name, scen, out, request, seed_base, n_runs, allowance)

    def scenario_on(self, srv, name, scen, out, request, seed_base, n_runs, allowance):
        """scenario_block's work on a running server."""
        a = self.a
        t0 = time.monotonic()
        prompt = scen["text"]
        if scen.get("long"):
            if self.long_prompt is None:
                self.long_prompt = scenarios.fit_long_context(
                    scen, a.ctx, srv.base_url, token_budget=1500 if a.quick else None)
                out["long_context"] = self.long_prompt[1]
            prompt = self.long_prompt[0]
        load_before = os.getloadavg()[0]
        model = srv.model_id or self.model_name
        extra = None if name == "zinc" else {"cache_prompt": False}
        tmo = self.timeout_s(600.0)
        warm = scenarios.run_scenario(srv.base_url, model, scen, prompt, a.warmup, 0,
                                      extra_body=extra, request=request, seed_base=seed_base,
                                      timeout_s=tmo, keep_flagged=self.synthetic)
        runs = a.runs if n_runs is None else n_runs
        per_req = max((m["e2e_s"] or 0.0) for m in warm["warmup"]) if warm["warmup"] \
            else 1.0
        self.budget.record("request", per_req)
        if n_runs is None and self.budget.limited:
            left = allowance - (time.monotonic() - t0)
            runs = max(0, min(a.runs, int(left / max(per_req, 1e-3))))
        res = scenarios.run_scenario(srv.base_url, model, scen, prompt, 0, runs,
                                     extra_body=extra, request=request,
                                     seed_base=seed_base + a.warmup,
                                     timeout_s=self.timeout_s(600.0),
                                     keep_flagged=self.synthetic)
        res["warmup"] = warm["warmup"]
        res["seeds"] = warm["seeds"] + res["seeds"]
        res["n_runs_planned"] = runs
        res["load_avg_1m_before"] = load_before
        res["evidence"] = srv.evidence()
        return res

    # ------------------------------------------------------------------ load sweep

    def load_block(self, name, filler, c, n_req, k, first_id):
        a = self.a
        with self.server(name) as srv:
            model = srv.model_id or self.model_name
            tmo = self.timeout_s(600.0)
            load.run_level(srv.base_url, model, filler, 1, 1, a.load_output_tokens,
                           first_id=90000 + k, timeout_s=tmo)  # warm-up
            lb = os.getloadavg()[0]
            res = load.run_level(srv.base_url, model, filler, c, n_req, a.load_output_tokens,
                                 first_id=first_id, timeout_s=self.timeout_s(600.0))
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
        last_block_s = None
        for k, c in enumerate(a.concurrency):
            n_req = max(2 * c, 4) if a.quick else max(2 * c, 8)
            # A level takes about as long as the one before it or longer (more requests at a
            # longer latency): twice the last level's time is the estimate; for the first, two
            # server starts and ~4 s of requests per engine, doubled.
            est = 2.0 * last_block_s if last_block_s else \
                2.0 * len(self.names) * (self.start_guess() + 4.0)
            fits = self.budget.fits(est) if last_block_s else self.budget.fits_total(est)
            if not fits:
                for c2 in a.concurrency[k:]:
                    self.budget.skip(f"load concurrency {c2}", est_s=est)
                    self.prog.step(f"load c={c2}: skipped (budget)")
                out["skipped_levels"] = list(a.concurrency[k:])
                break
            level = {"concurrency": c, "engines": {}, "order": []}
            order = self.names if k % 2 == 0 else list(reversed(self.names))
            t_level = time.monotonic()
            for name in order:
                try:
                    res = self.load_block(name, filler, c, n_req, k, next_id)
                except Exception as e:  # noqa: BLE001 - one engine's failure keeps the other's
                    res = {"error": f"{type(e).__name__}: {str(e)[:1000]}", "concurrency": c,
                           "requests": [],
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
            last_block_s = time.monotonic() - t_level
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
            self.save("load", out)
        return out

    # ------------------------------------------------------------------ shared prefix

    def prefix_phase(self):
        a = self.a
        handbook = (scenarios.SCEN_DIR / "long_context.txt").read_text()
        prefix = "Reference handbook:\n\n" + load.filler_text(handbook, int(a.prefix_tokens * 3.9))
        n_req = 3 if a.quick else 8
        max_tokens = 8 if a.quick else 16
        out = {"prefix_tokens_target": a.prefix_tokens, "n_requests": n_req,
               "max_tokens": max_tokens, "engines": {}}
        for k, name in enumerate(self.names):
            est = self.budget.estimate("prefix", 2.0 * (self.start_guess() + 4.0))
            if not (self.budget.fits(est) or (k == 0 and self.budget.fits_total(est))):
                self.budget.skip(f"prefix {name}", est_s=est)
                out["engines"][name] = {"skipped": "budget"}
                self.prog.step(f"prefix {name}: skipped (budget)")
                continue
            t0 = time.monotonic()
            res = {}
            modes = (("on", True), ("off", False))
            if k % 2 == 1:
                modes = tuple(reversed(modes))
            for mode, on in modes:
                try:
                    with self.server(name, prefix_cache=on, tag=f"-prefix-{mode}") as srv:
                        r = load.run_prefix(srv.base_url, srv.model_id or self.model_name,
                                            prefix, n_req, max_tokens,
                                            cache_prompt=None if name == "zinc" else on,
                                            timeout_s=self.timeout_s(600.0))
                        r["health_after"] = srv.fetch_health()
                        r["evidence"] = srv.evidence()
                except Exception as e:  # noqa: BLE001 - one engine's failure keeps the other's
                    r = {"error": f"{type(e).__name__}: {str(e)[:500]}", "summary": None}
                res[mode] = r
                med = ((r.get("summary") or {}).get("ttft_s") or {}).get("median")
                self.prog.step(f"prefix {name} cache {mode}: TTFT median {fmt_ms(med)}"
                               f" ({self.load_tag()})")
            self.budget.record("prefix", time.monotonic() - t0)
            on_m = ((res["on"].get("summary") or {}).get("ttft_s") or {}).get("median")
            off_m = ((res["off"].get("summary") or {}).get("ttft_s") or {}).get("median")
            res["ttft_ratio_cached_over_uncached"] = (on_m / off_m) if on_m and off_m else None
            out["engines"][name] = res
            self.save("prefix", out)
        return out


def overall_score(sc):
    """The phase-wall-time score over all scenarios: a scenario counts when both engines
    generated the same tokens in every run and both have a median (not every run flagged)."""
    matched = [e for e in sc if e.get("same_tokens", {}).get("ok")
               and all(e["engines"][n]["summary"]["e2e_s"]["median"] is not None
                       for n in ("zinc", "llama.cpp"))]
    tz = sum(e["engines"]["zinc"]["summary"]["e2e_s"]["median"] or 0 for e in matched)
    tl = sum(e["engines"]["llama.cpp"]["summary"]["e2e_s"]["median"] or 0 for e in matched)
    return {"all_matched": len(matched) == len(sc), "n_matched": len(matched),
            "score": (tl / tz) if (len(matched) == len(sc) and tz) else None,
            "score_matched_only": (tl / tz) if tz else None,
            "why": "" if len(matched) == len(sc) else
            "token counts differ, every run was flagged, or skipped in: " + ", ".join(
                e["name"] for e in sc if e not in matched)}
