"""bench/run's server phases with one server per engine per phase (--reuse-servers, the GPU run):
starting an 8B model takes seconds per start, which a one-call budget cannot pay for every
scenario and every concurrency level. Each engine runs the whole phase on one server, one engine
at a time; which engine goes first alternates from phase to phase (scenarios: the first named,
load: the other), so a drift in the machine hits both alike over the run.

The budget (budget.py) is split per engine: an engine gets what is left of the phase divided by
the engines still to run, so the first cannot take the second's time. The second engine runs
only the blocks the first ran (the comparison needs both), with the same number of runs.
Load levels get fewer requests at high concurrency (load.requests_for), and a level is run only
when its estimate (the last level's time scaled by its request count) fits; what is skipped is
recorded with the reason. At the end of a phase each engine's device memory is recorded
(memory.py) before its server stops.
"""
import os
import time

from . import load, memory, scenarios
from .phases import fmt, fmt_ms, overall_score


def engine_order(names, phase_index):
    return list(names) if phase_index % 2 == 0 else list(reversed(names))


def record_memory(pc, name, phase, srv, slots, ctx_per_seq):
    """Append this server's device memory (reported and the driver's view) to the results."""
    if name == "zinc":
        rep = memory.zinc_memory(health=srv.fetch_health())
    else:
        rep = memory.llama_log_memory(srv.log_text())
    drv = None
    if pc.a.target == "cuda" and srv.proc is not None:
        drv = memory.driver_view([srv.proc.pid], pc.run.res.get("gpu_baseline_used_bytes"))
    if rep is None and drv is None:
        return  # nothing on a device (the CPU tier)
    pc.run.res.setdefault("device_memory", []).append(
        memory.entry(name, phase, slots, ctx_per_seq, rep, drv))


def scenarios_phase(pc, phase_index=0):
    a = pc.a
    request, seed_base = scenarios.request_settings(a.scenario_temp)
    scens = scenarios.load_scenarios(a.quick)
    out = {"warmup": a.warmup, "runs": a.runs, "request": request, "seed_base": seed_base,
           "servers": "one per engine for the whole phase", "scenarios": []}
    entries = [{"name": s["name"], "max_tokens": s["max_tokens"], "engines": {}, "order": []}
               for s in scens]
    out["scenarios"] = entries
    order = engine_order(pc.names, phase_index)
    n_runs = {}  # scenario index -> runs, decided by the first engine
    for j, name in enumerate(order):
        share = pc.budget.phase_left() / (len(order) - j)
        t_eng = time.monotonic()
        try:
            with pc.server(name, prefix_cache=False) as srv:
                for k, scen in enumerate(scens):
                    e = entries[k]
                    if j > 0 and not n_runs.get(k):
                        continue  # the first engine ran none of it: nothing to compare
                    left = share - (time.monotonic() - t_eng)
                    need = 2 * pc.budget.estimate("request", 2.0)
                    if k > 0 and min(left, pc.budget.remaining()) < need:
                        pc.budget.skip(f"scenario {scen['name']} {name}", est_s=need)
                        # the first engine's runs stay in the raw data; no comparison
                        e["skipped"] = "budget" if j == 0 else f"budget: {name} did not fit"
                        pc.prog.step(f"{scen['name']} {name}: skipped (budget)")
                        continue
                    allowance = max(need, left / (len(scens) - k))
                    try:
                        res = pc.scenario_on(srv, name, scen, out, request, seed_base,
                                             n_runs.get(k), allowance)
                    except Exception as ex:  # noqa: BLE001 - the next scenario still runs
                        res = {"error": f"{type(ex).__name__}: {str(ex)[:1000]}", "warmup": [],
                               "runs": [], "summary": scenarios.summarize_runs([])}
                        pc.prog.log(f"{scen['name']} {name}: FAILED: {str(ex)[:300]}")
                    if j == 0:
                        n_runs[k] = res.get("n_runs_planned", a.runs)
                        if n_runs[k] == 0:
                            pc.budget.skip(f"scenario {scen['name']}", "budget: no run fits "
                                           f"after the first engine's warm-up ({name})")
                            e["skipped"] = "budget: no run fits after the warm-up"
                        elif n_runs[k] < a.runs:
                            pc.budget.cut(f"scenario {scen['name']}: {n_runs[k]} of {a.runs} "
                                          "runs (budget)")
                            e["runs_cut"] = n_runs[k]
                    e["engines"][name] = res
                    e["order"].append(name)
                    step_line(pc, scen, name, res)
                    pc.save("scenarios", out)
                record_memory(pc, name, "scenarios", srv, a.slots, a.ctx)
        except Exception as ex:  # noqa: BLE001 - a server that does not start keeps the other
            err = f"{type(ex).__name__}: {str(ex)[:1000]}"
            pc.prog.log(f"scenarios {name}: FAILED: {err[:300]}")
            for k, e in enumerate(entries):
                if name not in e["engines"] and (j == 0 or k in n_runs):
                    e["engines"][name] = {"error": err, "warmup": [], "runs": [],
                                          "summary": scenarios.summarize_runs([])}
                    e["order"].append(name)
                    n_runs.setdefault(k, a.runs)
    for e in entries:
        if len(e["engines"]) == 2:
            pc.score_entry(e)
    if len(pc.names) == 2:
        out["overall"] = overall_score(entries)
    return out


def step_line(pc, scen, name, res):
    s = res["summary"]
    errs = [m["error"] for m in res["runs"] if m.get("error")]
    if errs:
        pc.prog.log(f"{scen['name']} {name}: {len(errs)} failed runs: {errs[0][:300]}")
    pc.prog.step(f"{scen['name']} {name}: TTFT {fmt_ms(s['ttft_s']['median'])}, decode "
                 f"{fmt(s['decode_tps']['median'])} t/s, tokens {s['completion_tokens']}, used "
                 f"{s['n_used']}/{s['n_runs']} ({pc.load_tag()})")


def load_phase(pc, phase_index=1):
    a = pc.a
    handbook = (scenarios.SCEN_DIR / "long_context.txt").read_text()
    filler = load.filler_text(handbook, int(a.load_prompt_tokens * 3.9))
    slots, ctx = a.load_slots, a.load_ctx
    out = {"prompt_tokens_target": a.load_prompt_tokens, "max_tokens": a.load_output_tokens,
           "slo": {"ttft_s": 0.5, "tpot_s": 0.05}, "slots": slots, "ctx_per_seq": ctx,
           "servers": "one per engine for the whole phase", "levels": []}
    levels = [{"concurrency": c, "engines": {}, "order": [],
               "n_requests": load.requests_for(c, a.quick)} for c in a.concurrency]
    first_ids, nid = [], 0
    for lv in levels:
        first_ids.append(nid)
        nid += lv["n_requests"]
    order = engine_order(pc.names, phase_index)
    ran = None  # the levels the first engine ran
    for j, name in enumerate(order):
        share = pc.budget.phase_left() / (len(order) - j)
        t_eng = time.monotonic()
        done = []
        try:
            with pc.server(name, slots=slots, ctx=ctx, tag="-load") as srv:
                model = srv.model_id or pc.model_name
                load.run_level(srv.base_url, model, filler, 1, 1, a.load_output_tokens,
                               first_id=90000, timeout_s=pc.timeout_s(600.0))  # warm-up
                last = None  # (seconds, requests) of the last level
                for k, lv in enumerate(levels):
                    c, n_req = lv["concurrency"], lv["n_requests"]
                    if ran is not None and c not in ran:
                        continue
                    left = min(share - (time.monotonic() - t_eng), pc.budget.remaining())
                    est = (last[0] * max(1.0, n_req / last[1])) if last else None
                    if est is not None and est > left:
                        for lv2 in levels[k:]:
                            if ran is None or lv2["concurrency"] in ran:
                                pc.budget.skip(f"load concurrency {lv2['concurrency']} {name}",
                                               est_s=est)
                                pc.prog.step(f"load c={lv2['concurrency']} {name}: skipped "
                                             "(budget)")
                        break
                    t0 = time.monotonic()
                    lb = os.getloadavg()[0]
                    res = load.run_level(srv.base_url, model, filler, c, n_req,
                                         a.load_output_tokens, first_id=first_ids[k],
                                         timeout_s=pc.timeout_s(600.0))
                    last = (time.monotonic() - t0, n_req)
                    res["load_avg_1m_before"] = lb
                    res["health_after"] = srv.fetch_health()
                    lv["engines"][name] = res
                    lv["order"].append(name)
                    done.append(c)
                    level_line(pc, c, name, res)
                    pc.save("load", dict(out, levels=[x for x in levels if x["engines"]]))
                record_memory(pc, name, "load", srv, slots, ctx)
        except Exception as ex:  # noqa: BLE001 - one engine's failure keeps the other's
            err = f"{type(ex).__name__}: {str(ex)[:1000]}"
            pc.prog.log(f"load {name}: FAILED: {err[:300]}")
            for lv in levels:
                if name not in lv["engines"] and (ran is None or lv["concurrency"] in ran):
                    lv["engines"][name] = {"error": err, "concurrency": lv["concurrency"],
                                           "requests": [], "summary": load.summarize_level(
                                               [], 0.0, a.load_output_tokens)}
                    lv["order"].append(name)
                    done.append(lv["concurrency"])
        if ran is None:
            ran = set(done)
    out["levels"] = [lv for lv in levels if lv["engines"]]
    out["skipped_levels"] = [lv["concurrency"] for lv in levels if not lv["engines"]]
    for lv in out["levels"]:
        compare_level(lv)
    out["scaling"] = {n: load.scaling(out["levels"], n) for n in pc.names}
    return out


def level_line(pc, c, name, res):
    s = res["summary"]
    if s["errors"]:
        pc.prog.log(f"load c={c} {name}: {s['n_requests'] - s['n_ok']} failed: "
                    f"{s['errors'][0][:300]}")
    pc.prog.step(f"load c={c} {name}: {s['output_tok_per_s']:.1f} out tok/s, TTFT p50 "
                 f"{fmt_ms(s['ttft_s']['p50'])} p99 {fmt_ms(s['ttft_s']['p99'])}, TPOT p50 "
                 f"{fmt_ms(s['tpot_s']['p50'])} p99 {fmt_ms(s['tpot_s']['p99'])}, tokens "
                 f"{s['completion_tokens_all']} ({pc.load_tag()})")


def compare_level(lv):
    if len(lv["engines"]) != 2:
        return
    z, l = lv["engines"]["zinc"]["summary"], lv["engines"]["llama.cpp"]["summary"]
    same = (z["all_full_length"] and l["all_full_length"]
            and z["prompt_tokens_all"] == l["prompt_tokens_all"])
    lv["same_tokens"] = {"ok": same, "why": "" if same else
                         f"prompt tokens {z['prompt_tokens_all']} vs {l['prompt_tokens_all']}, "
                         f"generated {z['completion_tokens_all']} vs {l['completion_tokens_all']}"}
    lv["ratio_output_tok_per_s"] = (z["output_tok_per_s"] / l["output_tok_per_s"]
                                    if l["output_tok_per_s"] else None)
