"""The report of one bench/run: results.md (tables) and PNG plots (matplotlib) beside
results.json:
  scenarios.png   per scenario, median end-to-end time, TTFT and decode tokens/s per engine, with
                  error bars from the lowest to the highest used run
  load.png        TTFT, TPOT and ITL p50/p99 and aggregate output tokens/s vs concurrency
  bandwidth.png   decode tokens/s (tg) against the bandwidth bound, per depth
"""
from pathlib import Path

from . import machine, memory, report_gpu

ENGINES = ("zinc", "llama.cpp")
COLORS = {"zinc": "#3b7dd8", "llama.cpp": "#999999"}


def f(x, nd=1, scale=1.0, unit=""):
    return "-" if x is None else f"{x * scale:.{nd}f}{unit}"


def ms(x):
    return f(x, 0, 1000.0)


def ratio(x):
    return "-" if x is None else f"{x:.2f}x"


def header(res):
    h, a, m = res["host"], res["args"], res["model"]
    lines = [f"# bench/run --target {a['target']}{' --quick' if a['quick'] else ''}"
             f"{' --full' if a.get('full') else ''}", "",
             f"- command: `{res['command']}`",
             f"- date: {h['date']} on {h['cpu']} ({h['n_cpus']} CPUs)"
             + (f", GPU: {', '.join(g['name'] for g in h['gpus'])}" if h.get("gpus") else ""),
             f"- machine load: at start `{h['uptime']}`; at end `{h.get('uptime_end', '')}`",
             f"- model: `{Path(m['path']).name}` sha256 `{m['sha256']}` ({m.get('arch', '?')}, "
             f"trained context {m.get('n_ctx_train', '?')})",
             f"- servers: context {a['ctx']} per sequence, {a['slots']} slots, threads "
             f"{a['threads'] or 'default'}, nice {a['nice']}; the scenario phase adds "
             "each engine's prompt-cache-off flags (below)"
             + (f"; load sweep: {a.get('load_slots')} slots x {a.get('load_ctx')} positions"
                if a.get("load_slots") else "")
             + ("; one server per engine per phase, one engine at a time"
                if a.get("reuse_servers") else "")]
    if report_gpu.is_second_row(m) and a["target"] == "cuda":
        lines.append("- NOTE: the server phases ran on a launch-bound second-row model: no "
                     "conclusion about kernels or batching comes from them")
    for name, e in res["engines"].items():
        v = (e.get("version") or "").splitlines()
        argv = e.get("server_argv", [])
        argv = " ".join([Path(argv[0]).name] + argv[1:]) if argv else ""
        lines.append(f"- {name}: `{' / '.join(x.strip() for x in v[:2])}`; server: `{argv}`"
                     f"; ctx/seq seen {e.get('ctx_per_seq', '-')}"
                     + (f"; flash attention: {e['flash_attn']}" if e.get("flash_attn") else ""))
        if e.get("evidence"):
            lines.append(f"  - evidence ({name}): " + " | ".join(f"`{x[:150]}`"
                                                               for x in e["evidence"][:4]))
    z = res["engines"].get("zinc")
    if z is not None and "server_argv" in z:
        ev = " ".join(z.get("evidence") or [])
        if not ev:
            lines.append("- zinc serve reported no tier/evidence line (not in its log, not in "
                         "/metrics): the tier it served on is not recorded by zinc itself")
        elif a["target"] == "cuda" and "cuda" not in ev:
            lines.append("- WARNING: target cuda, but zinc's evidence never mentions cuda")
    zenv = res.get("zinc_env") or {}
    lines.append("- zinc environment: " + (", ".join(f"`{k}={v}`" for k, v in sorted(zenv.items()))
                                          or "no ZINC_* variables set (the defaults)")
                 + (f"; bench/run sets `ZINC_TIER={a['target']}` for zinc unless given"
                    if "ZINC_TIER" not in zenv else ""))
    fa = res.get("fairness", {})
    for k, v in fa.items():
        lines.append(f"- fairness {k}: {'ok' if v['ok'] else 'FAILED: ' + v['why']}")
    for n in res.get("notes", []):
        lines.append(f"- note: {n}")
    bw = res.get("bandwidth") or {}
    if bw.get("bytes_per_s") and a["target"] == "cuda":
        lines.append(f"- measured copy bandwidth: {bw['bytes_per_s'] / 1e9:.1f} GB/s "
                     f"({bw['method']})")
    elif a["target"] == "cuda":
        lines.append(f"- copy bandwidth NOT measured ({bw.get('method', '?')[:200]}): no % of "
                     "the bandwidth bound in this run")
    return lines


def micro_sections(res):
    """[(model label, model info, section)]: the main model's micro section, then the
    --micro-models ones."""
    out = []
    mc = res["phases"].get("micro")
    if mc:
        out.append((Path(res["model"]["path"]).name, res["model"], mc))
        for var, sec in (res["phases"].get("micro_variants") or {}).items():
            out.append((f"{Path(res['model']['path']).name} [zinc {var}]", res["model"], sec))
    for key, sec in (res["phases"].get("micro_models") or {}).items():
        out.append((key, sec.get("model_info") or res.get("micro_models", {}).get(key, {}), sec))
    return out


def bound_tps(res, mi, depth):
    """Decode tokens/s the measured copy bandwidth allows for this model at this KV depth (GPU
    runs only: on the CPU a 100 MB model partly sits in cache and one numpy copy is no fair
    bound)."""
    bw = (res.get("bandwidth") or {}).get("bytes_per_s")
    if not bw or res["args"]["target"] != "cuda":
        return None
    b = machine.decode_bytes_per_token(mi, depth)
    return bw / b if b else None


def micro_cell(r, e):
    s = r.get(e)
    if not s or not s["n"]:
        return r.get(f"{e}_note", "-")
    return f"{s['median']:.1f} ({s['mean']:.1f} ± {s['sd']:.1f})"


def pct_bound(res, mi, r, e):
    s = r.get(e) or {}
    bound = bound_tps(res, mi, r["depth"]) if r["test"].startswith("tg") else None
    if not bound or not s.get("n"):
        return "-"
    return f"{100 * s['median'] / bound:.0f} %"


def micro_table(res):
    secs = micro_sections(res)
    if not secs:
        return []
    mc = secs[0][2]
    lines = ["", "## Microbenchmarks", "",
             f"`zinc bench` vs `llama-bench`, {mc['threads'] or 'default'} threads, {mc['rounds']} "
             "alternating rounds, one repetition per process; tokens/s median (mean ± sd). "
             "% of bound: decode tokens/s over (measured copy bandwidth / bytes read per token: "
             "weights + KV at that depth), GPU runs only.", "",
             "| model | depth | test | zinc t/s | llama.cpp t/s | zinc / llama.cpp (medians) "
             "| zinc % of bw bound | llama.cpp % of bw bound | rounds |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    gpu = res["args"]["target"] == "cuda"
    for label, mi, sec in secs:
        label = report_gpu.row_label(label, mi) if gpu else label
        for r in sec["rows"]:
            lines.append(f"| {label} | {r['depth']} | {r['test']} | {micro_cell(r, 'zinc')} | "
                         f"{micro_cell(r, 'llama.cpp')} | {ratio(r.get('ratio_median'))} | "
                         f"{pct_bound(res, mi, r, 'zinc')} | "
                         f"{pct_bound(res, mi, r, 'llama.cpp')} | "
                         f"{r.get('rounds_done', sec['rounds'])} |")
        for sk in sec.get("skipped", []):
            lines.append(f"| {label} | | skipped: {sk} | | | | | | |")
        deep = [r["depth"] for r in sec["rows"] if r["depth"] > (mi.get("n_ctx_train") or 1 << 30)]
        if deep:
            lines.append(f"| {label} | | depth {', '.join(map(str, sorted(set(deep))))} is beyond "
                         f"the trained context {mi.get('n_ctx_train')}: speed only | | | | | | |")
    return lines


def budget_lines(res):
    b = res.get("budget") or {}
    lines = []
    if b.get("budget_s"):
        lines += ["", "## Budget", "",
                  f"--budget-s {b['budget_s']:.0f} (reserve {b['reserve_s']:.0f} s for the "
                  f"report); used {b['used_s']:.0f} s."]
    if b.get("skipped") or b.get("cuts"):
        if not lines:
            lines += ["", "## Budget", ""]
        lines += [""] + [f"- skipped: {x['what']} ({x['why']})" for x in b.get("skipped", [])]
        lines += [f"- cut: {x['note']}" for x in b.get("cuts", [])]
    for ph, err in (res.get("phase_errors") or {}).items():
        lines.append(f"- phase {ph} FAILED: {err[:300]}")
    return lines


def request_text(sc):
    req = sc.get("request")
    if not req:
        return "temperature 0"
    parts = [f"{k} {v}" for k, v in req.items() if k != "ignore_eos"]
    if req.get("ignore_eos"):
        parts.append("ignore_eos")
    seeds = f", run i seeded {sc['seed_base']} + i on both engines" if "seed_base" in sc else ""
    return ", ".join(parts) + seeds


def scenario_table(res):
    sc = res["phases"].get("scenarios")
    if not sc:
        return []
    lines = ["", "## Scenarios", "",
             f"Chat requests ({request_text(sc)}), each engine's own chat template; "
             f"{sc['warmup']} warm-up + {sc['runs']} runs (fewer where the budget cut them: "
             "see 'used'), medians over the runs that passed the quality checks.", ""]
    if any(r["summary"].get("flags_kept") for e in sc["scenarios"] for r in e["engines"].values()):
        lines += ["The model is a `zinc synth` file with random weights: its text is garbage by "
                  "construction (flags below are expected and do not exclude runs); both "
                  "engines do equal work (same prompt tokens, ignore_eos, same max_tokens), so "
                  "the times compare speed only.", ""]
    if sc.get("long_context"):
        lc = sc["long_context"]
        lines += [f"Long Context used {lc['sections']} of {lc['of_sections']} handbook sections: "
                  f"{lc['counted_tokens']} prompt tokens ({lc['count_method']}), budget "
                  f"{lc['budget_tokens']}.", ""]
    lines += ["| scenario | engine | prompt tok | gen tok (per run) | TTFT | decode t/s | total | "
              "used | flags | score (llama.cpp / zinc total) |",
              "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | --- | ---: |"]
    for e in sc["scenarios"]:
        if e.get("skipped"):
            lines.append(f"| {e['name']} | - | | | | | | | skipped ({e['skipped']}) | - |")
        for name, r in e["engines"].items():
            s = r["summary"]
            score = "-"
            if name == "zinc" and "score" in e:
                score = ratio(e["score"]["score"]) if e["score"]["score"] else \
                    f"n/a ({e['score']['why']})"
            flags = sorted({x for fl in s["flagged"] for x in fl})
            if r.get("error"):
                flags = ["FAILED: " + r["error"].splitlines()[0][:80]]
            lines.append(f"| {e['name']} | {name} | {','.join(map(str, s['prompt_tokens']))} | "
                         f"{s['completion_tokens']} | {ms(s['ttft_s']['median'])} ms | "
                         f"{f(s['decode_tps']['median'])} | {f(s['e2e_s']['median'], 2)} s | "
                         f"{s['n_used']}/{s['n_runs']} | {', '.join(flags) or '-'} | {score} |")
    diff = [e["name"] for e in sc["scenarios"]
            if not e.get("same_prompt_tokens", {"ok": True})["ok"]]
    if diff:
        lines += ["", "Prompt token counts differ between the engines (chat template or BOS "
                  "handling) in: " + ", ".join(diff)]
    o = sc.get("overall")
    if o:
        lines += ["", f"Overall phase-wall-time score (sum of median totals, llama.cpp / zinc): "
                  + (ratio(o["score"]) if o["score"] else
                     f"not computed ({o['why']}); over the {o['n_matched']} matching scenarios: "
                     f"{ratio(o['score_matched_only'])}")]
    return lines


def load_table(res):
    ld = res["phases"].get("load")
    if not ld:
        return []
    shape = (f" Both servers: {ld['slots']} slots x {ld['ctx_per_seq']} positions, one server "
             "per engine for the whole sweep." if ld.get("slots") else "")
    reqs = (" Requests per level: " + ", ".join(f"{lv['concurrency']}: {lv['n_requests']}"
                                                for lv in ld["levels"] if "n_requests" in lv)
            + "." if any("n_requests" in lv for lv in ld["levels"]) else "")
    lines = ["", "## Load sweep", "",
             f"/v1/completions, ~{ld['prompt_tokens_target']}-token prompts (measured: "
             f"{prompt_counts(ld)} tokens; unique per request), "
             f"{ld['max_tokens']} output tokens with ignore_eos, temperature 0; closed loop. "
             "Latencies in ms; goodput = requests meeting TTFT <= 500 ms and TPOT <= 50 ms."
             + shape + reqs, "",
             "| conc. | engine | out tok/s | TTFT p50 | TTFT p99 | TPOT p50 | TPOT p99 | ITL p50 | "
             "ITL p99 | goodput req/s (share) | p99 SLOs met | gen tok | flagged "
             "| ratio out tok/s |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- "
             "| ---: | ---: |"]
    for lv in ld["levels"]:
        for name, r in lv["engines"].items():
            s = r["summary"]
            g = s["goodput"]
            rt = "-" if not r.get("error") else "FAILED: " + r["error"].splitlines()[0][:80]
            if name == "zinc" and "ratio_output_tok_per_s" in lv:
                rt = ratio(lv["ratio_output_tok_per_s"])
                if not lv["same_tokens"]["ok"]:
                    rt += f" (tokens differ: {lv['same_tokens']['why']})"
            lines.append(
                f"| {lv['concurrency']} | {name} | {s['output_tok_per_s']:.1f} | "
                f"{ms(s['ttft_s']['p50'])} | {ms(s['ttft_s']['p99'])} | {ms(s['tpot_s']['p50'])} | "
                f"{ms(s['tpot_s']['p99'])} | {ms(s['itl_s']['p50'])} | {ms(s['itl_s']['p99'])} | "
                f"{g['req_per_s']:.2f} ({100 * g['share']:.0f} %) | "
                f"{'yes' if s['slo_p99_met'] else 'no'} | {s['completion_tokens_all']} | "
                f"{s['n_flagged']}/{s['n_requests']} | {rt} |")
    if ld.get("scaling"):
        lines += ["", "Scaling (output tok/s as clients grow):"] + report_gpu.scaling_lines(ld)
    if ld.get("skipped_levels"):
        lines += ["", f"Levels not run (budget): {ld['skipped_levels']}"]
    return lines


def prompt_counts(ld):
    return ", ".join(map(str, sorted({t for lv in ld["levels"] for r in lv["engines"].values()
                                      for t in r["summary"]["prompt_tokens_all"]})))


def prefix_table(res):
    px = res["phases"].get("prefix")
    if not px:
        return []
    lines = ["", "## Shared prefix", "",
             f"~{px['prefix_tokens_target']}-token common prefix + a short unique question, "
             f"{px['max_tokens']} output tokens, {px['n_requests']} requests one at a time after "
             "one priming request. zinc: prefix cache on vs `--no-prefix-cache`; llama.cpp: its "
             "slot prompt cache (cache_prompt) on vs off (+ --cache-ram 0).", "",
             "| engine | prompt tok | TTFT cached (median) | TTFT uncached (median) "
             "| cached / uncached |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for name, r in px["engines"].items():
        if r.get("skipped"):
            lines.append(f"| {name} | skipped ({r['skipped']}) | | | |")
            continue
        on, off = r["on"].get("summary") or {}, r["off"].get("summary") or {}
        lines.append(f"| {name} | {','.join(map(str, on.get('prompt_tokens_all', [])))} | "
                     f"{ms((on.get('ttft_s') or {}).get('median'))} ms | "
                     f"{ms((off.get('ttft_s') or {}).get('median'))} ms | "
                     f"{ratio(r.get('ttft_ratio_cached_over_uncached'))} |")
    return lines


def targets(res):
    """Issue 4 item 7's targets with the measured ratios (and issue 5's on the GPU)."""
    ph = res["phases"]
    lines = report_gpu.targets(res, micro_sections(res), pct_bound) \
        if res["args"]["target"] == "cuda" else []
    if not (ph.get("load") or ph.get("prefix")):
        return lines
    lines += ["", "## Targets (issue 4 item 7)", ""]
    ld = res["phases"].get("load")
    lv8 = [lv for lv in (ld or {}).get("levels", []) if lv["concurrency"] == 8]
    if lv8 and lv8[0].get("ratio_output_tok_per_s") is not None:
        r = lv8[0]["ratio_output_tok_per_s"]
        ok = lv8[0]["same_tokens"]["ok"]
        lines.append(f"- aggregate output tokens/s at concurrency 8 >= 1.5x llama.cpp's server: "
                     f"measured {r:.2f}x: {'met' if r >= 1.5 and ok else 'NOT met'}"
                     + ("" if ok else " (token counts differ: not a valid comparison)"))
    else:
        lines.append("- aggregate output tokens/s at concurrency 8 >= 1.5x: not measured in this "
                     "run")
    px = res["phases"].get("prefix")
    zr = ((px or {}).get("engines", {}).get("zinc") or {}).get("ttft_ratio_cached_over_uncached")
    if zr is not None:
        lines.append(f"- TTFT on a cached ~1k-token prefix <= 0.2x uncached: measured {zr:.2f}x: "
                     f"{'met' if zr <= 0.2 else 'NOT met'}")
    else:
        lines.append("- TTFT cached <= 0.2x uncached: not measured in this run")
    return lines


def write(res, out):
    out = Path(out)
    lines = header(res) + budget_lines(res) + targets(res) + micro_table(res) + \
        memory.memory_table(res) + scenario_table(res) + load_table(res) + prefix_table(res)
    plots = []
    for fn in (plot_scenarios, plot_load, plot_bandwidth):
        try:
            p = fn(res, out)
            if p:
                plots.append(p)
        except Exception as e:  # a plot must not lose the tables
            lines.append(f"\n(plot {fn.__name__} failed: {type(e).__name__}: {e})")
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots]
    (out / "results.md").write_text("\n".join(lines) + "\n")


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_scenarios(res, out):
    sc = res["phases"].get("scenarios")
    if not sc:
        return None
    plt = _plt()
    names = [e["name"] for e in sc["scenarios"]]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, key, label, scale in ((axes[0], "e2e_s", "total (s)", 1.0),
                                  (axes[1], "ttft_s", "TTFT (ms)", 1000.0),
                                  (axes[2], "decode_tps", "decode tokens/s", 1.0)):
        w = 0.38
        for k, eng in enumerate(ENGINES):
            meds, lo, hi = [], [], []
            for e in sc["scenarios"]:
                s = e["engines"].get(eng, {}).get("summary", {}).get(key) or {}
                m = s.get("median")
                meds.append((m or 0) * scale)
                lo.append(((m or 0) - (s.get("min") or m or 0)) * scale)
                hi.append(((s.get("max") or m or 0) - (m or 0)) * scale)
            if not any(meds):
                continue
            xs = [i + (k - 0.5) * w for i in range(len(names))]
            ax.bar(xs, meds, w, yerr=[lo, hi], capsize=3, label=eng, color=COLORS[eng])
            for x, m, e in zip(xs, meds, sc["scenarios"]):
                if not m and eng in e["engines"]:  # ran, but every run was flagged
                    ax.annotate("flagged", (x, 0.02), xycoords=ax.get_xaxis_transform(),
                                rotation=90, ha="center", va="bottom", fontsize=7)
        if key != "decode_tps":
            ax.set_yscale("log")
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=20, ha="right", fontsize=8)
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    fig.suptitle(f"Scenarios ({res['args']['target']}): medians of the unflagged runs, bars "
                 "from min to max run (log scale for times)")
    fig.tight_layout()
    p = out / "scenarios.png"
    fig.savefig(p, dpi=100)
    plt.close(fig)
    return p


def plot_load(res, out):
    ld = res["phases"].get("load")
    if not ld:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, 4, figsize=(17, 4))
    cs = [lv["concurrency"] for lv in ld["levels"]]
    for eng in ENGINES:
        sums = [lv["engines"].get(eng, {}).get("summary") for lv in ld["levels"]]
        if not any(sums):
            continue
        x = [c for c, s in zip(cs, sums) if s]
        sums = [s for s in sums if s]
        for ax, key in ((axes[0], "ttft_s"), (axes[1], "tpot_s"), (axes[2], "itl_s")):
            for pct, style in (("p50", "-o"), ("p99", "--^")):
                ax.plot(x, [(s[key][pct] or 0) * 1000 for s in sums], style, color=COLORS[eng],
                        label=f"{eng} {pct}")
        axes[3].plot(x, [s["output_tok_per_s"] for s in sums], "-o", color=COLORS[eng], label=eng)
    for ax, t in zip(axes, ("TTFT (ms)", "TPOT (ms)", "ITL (ms)", "output tokens/s")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(cs)
        ax.set_xticklabels(cs)
        ax.set_xlabel("concurrency")
        ax.set_title(t)
        ax.legend(fontsize=7)
    axes[0].axhline(500, color="red", lw=0.8, ls=":")
    axes[1].axhline(50, color="red", lw=0.8, ls=":")
    fig.suptitle(f"Load sweep ({res['args']['target']}), dotted red: SLO")
    fig.tight_layout()
    p = out / "load.png"
    fig.savefig(p, dpi=100)
    plt.close(fig)
    return p


def plot_bandwidth(res, out):
    """Decode tokens/s of both engines against the bandwidth bound, one group per model and
    depth (GPU runs)."""
    bw = (res.get("bandwidth") or {}).get("bytes_per_s")
    if not bw or res["args"]["target"] != "cuda":
        return None
    groups = [(label, mi, r) for label, mi, sec in micro_sections(res) for r in sec["rows"]
              if r["test"].startswith("tg")]
    if not groups:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(6, 2.2 * len(groups)), 4.5))
    w = 0.3
    for k, eng in enumerate(ENGINES):
        vals = [(r.get(eng) or {}).get("median") or 0 for _, _, r in groups]
        ax.bar([i + (k - 0.5) * w for i in range(len(groups))], vals, w, label=eng,
               color=COLORS[eng])
    bound = [bound_tps(res, mi, r["depth"]) or 0 for _, mi, r in groups]
    ax.plot(range(len(groups)), bound, "r_", markersize=40, mew=2, label="bandwidth bound")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{short_label(lb)}\n{r['test']} @ depth {r['depth']}"
                        for lb, _, r in groups], fontsize=8)
    ax.set_ylabel("decode tokens/s")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_title(f"Decode vs bandwidth bound ({bw / 1e9:.0f} GB/s measured copy rate)")
    fig.tight_layout()
    p = out / "bandwidth.png"
    fig.savefig(p, dpi=100)
    plt.close(fig)
    return p


def short_label(name):
    return name.replace(".gguf", "").replace("-Instruct", "")[:28]


def short_summary(res):
    """The few lines printed last (the GPU machine returns only the output's tail): micro ratios
    and % of bound per model, scenario scores, load ratios, what was skipped."""
    out = ["", "==== bench/run summary (" + res["args"]["target"] + ") ===="]
    if res["args"]["target"] == "cuda":
        out.append("headline: the rows of models >= 1 GB (the 8B shape); rows marked [2nd] "
                   "are launch-bound second rows: no conclusion from them")
    secs = sorted(micro_sections(res), key=lambda x: report_gpu.is_second_row(x[1]))
    for label, mi, sec in secs:
        mark = "[2nd] " if report_gpu.is_second_row(mi) and res["args"]["target"] == "cuda" \
            else ""
        for r in sec["rows"]:
            z, l = r.get("zinc") or {}, r.get("llama.cpp") or {}
            zs = f(z.get("median")) if z.get("median") else r.get("zinc_note", "-")[:24]
            ls = f(l.get("median")) if l.get("median") else r.get("llama.cpp_note", "-")[:24]
            out.append(f"micro {mark}{short_label(label):28s} d{r['depth']:<5} {r['test']:7s} zinc "
                       f"{zs} llama.cpp {ls} t/s "
                       f"{ratio(r.get('ratio_median'))}  bound% z {pct_bound(res, mi, r, 'zinc')}"
                       f" l {pct_bound(res, mi, r, 'llama.cpp')}")
    sc = res["phases"].get("scenarios")
    if (sc or res["phases"].get("load")) and res["args"]["target"] == "cuda":
        out.append(f"server phases on {report_gpu.server_model_label(res)}")
    for e in (sc or {}).get("scenarios", []):
        if e.get("skipped") and not e.get("engines"):
            out.append(f"scenario {e['name']:18s} skipped ({e['skipped']})")
            continue
        sm = {n: r["summary"] for n, r in e["engines"].items()}
        z, l = sm.get("zinc") or {}, sm.get("llama.cpp") or {}
        sco = (e.get("score") or {})
        out.append(f"scenario {e['name']:18s} zinc {f((z.get('e2e_s') or {}).get('median'), 2)}"
                   f" s llama.cpp {f((l.get('e2e_s') or {}).get('median'), 2)} s used "
                   f"{z.get('n_used', 0)}/{z.get('n_runs', 0)} {l.get('n_used', 0)}/"
                   f"{l.get('n_runs', 0)} score {ratio(sco.get('score'))}"
                   + (f" ({sco['why'][:80]})" if sco.get("why") else "")
                   + (f" [skipped: {e['skipped']}]" if e.get("skipped") else ""))
    if sc and sc.get("overall"):
        o = sc["overall"]
        out.append(f"scenarios overall score {ratio(o['score'])} (matched {o['n_matched']}, "
                   f"matched-only {ratio(o['score_matched_only'])})")
    for lv in ((res["phases"].get("load") or {}).get("levels") or []):
        z = (lv["engines"].get("zinc") or {}).get("summary") or {}
        l = (lv["engines"].get("llama.cpp") or {}).get("summary") or {}
        out.append(f"load c={lv['concurrency']:<3} out tok/s zinc {f(z.get('output_tok_per_s'))}"
                   f" llama.cpp {f(l.get('output_tok_per_s'))} "
                   f"{ratio(lv.get('ratio_output_tok_per_s'))}  TTFT p99 "
                   f"{ms((z.get('ttft_s') or {}).get('p99'))}/"
                   f"{ms((l.get('ttft_s') or {}).get('p99'))} ms  goodput "
                   f"{f((z.get('goodput') or {}).get('req_per_s'), 2)}/"
                   f"{f((l.get('goodput') or {}).get('req_per_s'), 2)} req/s")
    out += [ln.replace("- ", "load scaling ", 1)
            for ln in report_gpu.scaling_lines(res["phases"].get("load") or {})]
    for m in res.get("device_memory") or []:
        rep_, drv = m.get("reported") or {}, m.get("driver") or {}
        out.append(f"memory {m['phase'][:34]:34s} {m['engine']:9s} weights "
                   f"{memory.gib(rep_.get('weight_bytes'))} KV {memory.gib(rep_.get('kv_bytes'))}"
                   f" scratch {memory.gib(rep_.get('scratch_bytes'))} GiB, driver "
                   f"{memory.gib(drv.get('bytes'))} GiB")
    px = res["phases"].get("prefix")
    for name, r in ((px or {}).get("engines") or {}).items():
        out.append(f"prefix {name}: cached/uncached TTFT "
                   f"{ratio(r.get('ttft_ratio_cached_over_uncached'))}")
    b = res.get("budget") or {}
    out += [f"NOT RUN: {n}" for n in res.get("notes", []) if "not run" in n]
    for x in b.get("skipped", []):
        out.append(f"SKIPPED {x['what']}: {x['why']}")
    for x in b.get("cuts", []):
        out.append(f"CUT {x['note']}")
    for ph, err in (res.get("phase_errors") or {}).items():
        out.append(f"PHASE FAILED {ph}: {err[:200]}")
    for name, e in res.get("engines", {}).items():
        if e.get("evidence"):
            out.append(f"evidence {name}: {e['evidence'][0][:160]}")
    return out
