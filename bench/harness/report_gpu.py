"""The GPU run's verdicts (issue 14): which rows are the headline and which the second row, the
targets measured against their numbers, and whether output tokens/s ever falls as clients grow.

Headline: a model of the size people run (weights of 1 GB and more: the Llama-3-8B-shape
synthetic files). A smaller model (SmolLM2-135M) is launch-bound on an H200 and says nothing
about kernels or batching: it is labelled "second row" everywhere and no conclusion comes from it.
"""
from pathlib import Path

SECOND_ROW_BYTES = 1 << 30


def is_second_row(mi):
    b = (mi or {}).get("tensor_bytes") or (mi or {}).get("file_bytes") or 0
    return 0 < b < SECOND_ROW_BYTES


def row_label(label, mi):
    return f"{label} (second row: launch-bound)" if is_second_row(mi) else label


def server_model_label(res):
    mi = res.get("model") or {}
    name = Path(mi.get("path", "?")).name
    return row_label(name, mi)


def _row(sec, test, depth=0):
    for r in sec["rows"]:
        if r["test"] == test and r["depth"] == depth:
            return r
    return None


def _verdict(ok):
    return "met" if ok else "NOT met"


def micro_targets(res, sections, pct_bound):
    """Issue 14 items 3 and 4 from the microbenchmark rows: [(line)]."""
    lines = []
    for label, mi, sec in sections:
        name = label.lower()
        if is_second_row(mi):
            r = _row(sec, "tg128")
            if r and r.get("ratio_median") is not None and "smollm2" in name:
                lines.append(f"- (second row) tg128 SmolLM2 >= 2x llama.cpp: "
                             f"{r['ratio_median']:.2f}x: {_verdict(r['ratio_median'] >= 2.0)}")
            continue
        quant = "Q4_K_M" if "q4_k_m" in name else ("Q4_0" if "q4_0" in name else label)
        if "[zinc " in label:  # a --zinc-variant row (e.g. ZINC_EXACT=1)
            quant += " " + label[label.index("[zinc "):]
        for test, want in (("pp512", 1.3), ("pp4096", 1.0)):
            r = _row(sec, test)
            if r and r.get("ratio_median") is not None:
                lines.append(f"- {test} 8B {quant} >= {want}x llama.cpp: "
                             f"{r['ratio_median']:.2f}x: {_verdict(r['ratio_median'] >= want)}")
        r = _row(sec, "tg128")
        if r and r.get("ratio_median") is not None and quant == "Q4_K_M":
            x, zb = r["ratio_median"], pct_bound(res, mi, r, "zinc")
            lines.append(f"- tg128 8B Q4_K_M >= 1.5x llama.cpp (stretch 2x, 60 % of the bound): "
                         f"{x:.2f}x, {zb} of the bound: {_verdict(x >= 1.5)}"
                         + (" (stretch met)" if x >= 2.0 and zb != "-" and
                            float(zb.split()[0]) >= 60 else ""))
        for r in sec["rows"]:
            if r["depth"] and r["test"].startswith("tg"):
                z = (r.get("zinc") or {}).get("median")
                lc = (r.get("llama.cpp") or {}).get("median")
                lines.append(f"- tg128 8B {quant} at KV depth {r['depth']}: zinc "
                             f"{'-' if z is None else f'{z:.1f}'} t/s, llama.cpp "
                             f"{'-' if lc is None else f'{lc:.1f}'} t/s"
                             + (f" ({r['ratio_median']:.2f}x)" if r.get("ratio_median") else "")
                             + " (measured)")
    return lines


def load_targets(res):
    """Issue 14 item 5 from the load sweep (the server model must be the headline model)."""
    ld = res["phases"].get("load")
    if not ld:
        return []
    second = is_second_row(res.get("model"))
    tag = "(second row, no conclusion) " if second else ""
    lines = []
    by_c = {lv["concurrency"]: lv for lv in ld["levels"]}
    for c, want, tpot in ((32, 2.5, 0.030), (64, 3.0, None)):
        lv = by_c.get(c)
        if not lv or lv.get("ratio_output_tok_per_s") is None:
            lines.append(f"- {tag}{c} clients >= {want}x llama.cpp's output tok/s: not measured")
            continue
        x = lv["ratio_output_tok_per_s"]
        zp99 = (lv["engines"]["zinc"]["summary"]["tpot_s"] or {}).get("p99")
        ok = x >= want and lv["same_tokens"]["ok"] and (tpot is None or (zp99 is not None
                                                                         and zp99 <= tpot))
        lines.append(f"- {tag}{c} clients >= {want}x llama.cpp's output tok/s"
                     + (f" with TPOT p99 <= {tpot * 1000:.0f} ms" if tpot else "") +
                     f": {x:.2f}x, TPOT p99 {'-' if zp99 is None else f'{zp99 * 1000:.0f} ms'}: "
                     f"{_verdict(ok)}" + ("" if lv["same_tokens"]["ok"] else
                                          " (token counts differ: not a valid comparison)"))
    sc = (ld.get("scaling") or {}).get("zinc")
    if sc:
        lo, hi = (sc["levels"][0], sc["levels"][-1]) if sc["levels"] else ("?", "?")
        lines.append(f"- {tag}zinc's output tok/s never falls from {lo} to {hi} clients: "
                     f"{_verdict(not sc['ever_falls'])}" + scaling_detail(sc))
    return lines


def scaling_detail(sc):
    big = [f for f in sc["falls"] if f["drop_pct"] > 3.0]
    if not big:
        return ""
    return " (falls: " + ", ".join(f"{f['from']}->{f['to']} clients {f['from_tok_per_s']:.0f}->"
                                   f"{f['to_tok_per_s']:.0f} tok/s, -{f['drop_pct']:.0f} %"
                                   for f in big) + ")"


def scaling_lines(ld):
    """One line per engine: does output tok/s fall as clients grow."""
    lines = []
    for name, sc in (ld.get("scaling") or {}).items():
        if not sc["levels"]:
            continue
        peak = sc.get("peak")
        lines.append(f"- {name}: output tok/s "
                     + ("falls as clients grow" + scaling_detail(sc) if sc["ever_falls"] else
                        "never falls by more than 3 % as clients grow")
                     + (f"; peak {peak[1]:.0f} tok/s at {peak[0]} clients" if peak else ""))
    return lines


def targets(res, sections, pct_bound):
    lines = micro_targets(res, sections, pct_bound) + load_targets(res)
    if not lines:
        return []
    return ["", "## Targets (issue 14, H200; the headline rows are the 8B shape)", ""] + lines
