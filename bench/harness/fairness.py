"""Fairness rules between the two engines, checked in code before any ratio is reported:

  same_model      both servers loaded the same file, by sha256
  same_shape      same context per sequence and the same number of slots (parallel sequences)
  same_tokens     both generated the same number of tokens, run by run; the overall phase-wall-
                  time score of a scenario is computed only when they match
  alternation     the order of engines alternates across rounds (A B, B A, ...) where a run is
                  split into rounds

Each check returns {"ok": bool, "why": str}; reports print the reason when one fails.
"""


def same_model(a, b):
    ok = a.get("model_sha256") is not None and a.get("model_sha256") == b.get("model_sha256")
    return {"ok": ok, "why": "" if ok else
            f"model sha256 differs: {a.get('model_sha256')} vs {b.get('model_sha256')}"}


def same_shape(a, b):
    bad = [k for k in ("ctx_per_seq", "slots") if a.get(k) != b.get(k)]
    return {"ok": not bad, "why": "; ".join(f"{k}: {a.get(k)} vs {b.get(k)}" for k in bad)}


def same_tokens(counts_a, counts_b):
    """counts_*: generated-token counts per run, in run order. Equal length lists required."""
    if not counts_a or not counts_b:
        return {"ok": False, "why": "no runs to compare"}
    if len(counts_a) != len(counts_b):
        return {"ok": False, "why": f"{len(counts_a)} vs {len(counts_b)} runs"}
    diff = [(i, x, y) for i, (x, y) in enumerate(zip(counts_a, counts_b)) if x != y]
    return {"ok": not diff, "why": "" if not diff else
            "generated tokens differ: " + ", ".join(f"run {i}: {x} vs {y}" for i, x, y in diff[:4])}


def engine_order(engines, n_rounds):
    """[(round, [engine, ...]), ...]: the engines alternate which goes first, round by round."""
    out = []
    for r in range(n_rounds):
        order = list(engines) if r % 2 == 0 else list(reversed(engines))
        out.append((r, order))
    return out


def phase_score(total_a, total_b, tokens_check):
    """Overall phase-wall-time score peer/ours (> 1: ours faster), only when the token counts
    matched; otherwise None with the reason."""
    if not tokens_check["ok"]:
        return {"score": None, "why": tokens_check["why"]}
    if not total_a or not total_b:
        return {"score": None, "why": "no median: every run of an engine was flagged or failed"}
    return {"score": total_b / total_a, "why": ""}
