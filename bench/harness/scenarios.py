"""The scenario matrix: Quick Chat, Coding Review, Incident Context, Long Coding Draft and Long
Context, each a chat request with our own prompt (bench/scenarios/), through each engine's native
chat template; 1 warm-up and N measured runs; medians.

Equal work: every request carries the sampling settings of scenarios.json's `request` (temperature
0.7, top-k 40, top-p 0.95, min-p 0.05, no repetition penalty, all stated explicitly so neither
engine's defaults count) with `ignore_eos`, and run i uses seed seed_base + i on both engines. So
both engines generate exactly max_tokens tokens in every run (checked, run by run, before a score
is computed), and the end-to-end times compare equal work. Sampling with fixed seeds rather than
greedy decoding: at temperature 0 SmolLM2-135M loops on two of the five prompts in every run on
both engines, and looping runs are excluded by the quality checks, which left those scenarios
without a score; sampled runs loop far less, and those that still do are flagged and excluded as
before (docs/benchmarks.md).

Prompt caching is off on both servers for this phase (zinc --no-prefix-cache; llama-server
cache_prompt: false and --cache-ram 0): the runs repeat the same prompt, and without this every
run after the warm-up would measure a cached prefill. The shared-prefix phase measures caching.

Per run: client-side TTFT (the prefill phase as the user sees it), decode time (end-to-end minus
TTFT) and decode tokens/s ((tokens - 1) / decode time), end-to-end total, generated tokens, and the
server's own timings when it reports them. Runs whose output fails a quality check are kept in the
raw data with their flags and left out of the medians.
"""
import asyncio
import json
from pathlib import Path

from . import client, quality, stats

SCEN_DIR = Path(__file__).resolve().parents[1] / "scenarios"
TEMPLATE_MARGIN = 96  # tokens kept free for the chat template's wrapping of the long prompt


def load_spec():
    return json.loads((SCEN_DIR / "scenarios.json").read_text())


def request_settings(temperature=None):
    """(request fields merged into every scenario request, seed_base); temperature overrides
    scenarios.json's (0: greedy)."""
    spec = load_spec()
    req = dict(spec.get("request", {}))
    if temperature is not None:
        req["temperature"] = temperature
    return req, int(spec.get("seed_base", 42))


def load_scenarios(quick=False):
    spec = load_spec()
    out = []
    for s in spec["scenarios"]:
        s = dict(s)
        s["text"] = (SCEN_DIR / s["file"]).read_text()
        if quick:
            s["max_tokens"] = min(s["max_tokens"], 16)
        out.append(s)
    return out


def long_sections(text):
    """The handbook split into its '## Site' sections (whole sections are kept or dropped)."""
    parts = text.strip().split("\n\n## ")
    return [parts[0]] + ["## " + p for p in parts[1:]]


async def count_tokens(base_url, text):
    """Token count through the server's POST /tokenize ({"content": ...} -> {"tokens": [...]}, as
    llama-server and zinc serve answer); None when the server has no such endpoint."""
    async with client.new_session(1) as s:
        try:
            async with s.post(base_url + "/tokenize", json={"content": text}) as r:
                if r.status != 200:
                    return None
                body = await r.json(content_type=None)
                toks = body.get("tokens")
                return len(toks) if isinstance(toks, list) else None
        except Exception:
            return None


def fit_long_context(scen, ctx_per_seq, base_url=None, token_budget=None):
    """Pick how many whole sections of the handbook go into the Long Context prompt: as many as
    fit ctx_per_seq - max_tokens - TEMPLATE_MARGIN tokens (or token_budget, when given, e.g. for
    --quick). Counts tokens through the server's /tokenize when base_url answers it; otherwise
    estimates 3.5 characters a token (SmolLM2's tokenizer averages 3.9 on this text, so the
    estimate errs short). Returns (prompt, info)."""
    budget = ctx_per_seq - scen["max_tokens"] - TEMPLATE_MARGIN
    if token_budget is not None:
        budget = min(budget, token_budget)
    secs = long_sections(scen["text"])

    def build(k):
        return scen["intro"] + "\n\n".join(secs[:k]) + scen["question"]
    method = "tokenize"
    counter = (lambda t: asyncio.run(count_tokens(base_url, t))) if base_url else None
    if counter is None or counter(build(1)) is None:
        method = "estimate (3.5 chars/token)"
        counter = lambda t: int(len(t) / 3.5) + 1  # noqa: E731
    lo, hi = 1, len(secs)
    if counter(build(lo)) > budget:
        raise RuntimeError(f"Long Context: even one section exceeds {budget} tokens")
    while lo < hi:  # largest k with tokens(build(k)) <= budget
        mid = (lo + hi + 1) // 2
        if counter(build(mid)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    prompt = build(lo)
    return prompt, {"sections": lo, "of_sections": len(secs), "budget_tokens": budget,
                    "counted_tokens": counter(prompt), "count_method": method}


def chat_body(model_name, prompt, max_tokens, seed=42, request=None):
    """One scenario request; `request` (sampling settings, ignore_eos) is merged in, else
    greedy."""
    b = {"model": model_name, "messages": [{"role": "user", "content": prompt}],
         "max_tokens": max_tokens, "temperature": 0.0}
    b.update(request or {})
    b["seed"] = seed
    return b


def run_metrics(r):
    """The per-run numbers of one scenario request."""
    n = r.get("completion_tokens") or 0
    ttft, e2e = r.get("ttft_s"), r.get("e2e_s")
    decode_s = (e2e - ttft) if (ttft is not None and e2e is not None) else None
    m = {"ok": r["ok"], "error": r.get("error"), "ttft_s": ttft, "e2e_s": e2e,
         "decode_s": decode_s,
         "decode_tps": (n - 1) / decode_s if decode_s and n > 1 else None,
         "prefill_tps_client": (r["prompt_tokens"] / ttft) if ttft and r.get("prompt_tokens")
         else None,
         "prompt_tokens": r.get("prompt_tokens"), "completion_tokens": n,
         "completion_tokens_source": r.get("completion_tokens_source"),
         "finish_reason": r.get("finish_reason"), "server_timings": r.get("server_timings"),
         "text": r.get("text", "")}
    m["flags"] = quality.check(m["text"]) if r["ok"] else ["error"]
    return m


async def _run_one(base_url, body, timeout_s=600.0):
    async with client.new_session(1) as s:
        return await client.stream_request(s, base_url, body, chat=True, timeout_s=timeout_s)


def run_scenario(base_url, model_name, scen, prompt, warmup, runs, on_run=None, extra_body=None,
                 request=None, seed_base=42, timeout_s=600.0, keep_flagged=False):
    """warm-up + measured runs of one scenario against one server, sequentially; run i (the
    warm-up first) has seed seed_base + i; `request` holds the sampling settings; extra_body is
    merged into every request (e.g. llama-server's cache_prompt: false).
    Returns {"warmup": [...], "runs": [...], "summary": {...}, "seeds": [...]}."""
    out = {"warmup": [], "runs": [], "seeds": [], "request": dict(request or {})}
    for i in range(warmup + runs):
        body = dict(chat_body(model_name, prompt, scen["max_tokens"], seed=seed_base + i,
                              request=request), **(extra_body or {}))
        out["seeds"].append(body["seed"])
        m = run_metrics(asyncio.run(_run_one(base_url, body, timeout_s)))
        (out["warmup"] if i < warmup else out["runs"]).append(m)
        if on_run:
            on_run(i < warmup, m)
    out["summary"] = summarize_runs(out["runs"], scen["max_tokens"], keep_flagged)
    return out


def summarize_runs(runs, max_tokens=None, keep_flagged=False):
    """Medians (and spread) over the runs that are ok and unflagged (keep_flagged: every ok run,
    for a random-weight model whose text is garbage by construction; the flags are still
    recorded); full_length: every run generated max_tokens tokens (what ignore_eos asks for)."""
    good = [m for m in runs if m["ok"] and (keep_flagged or not m["flags"])]
    s = {"n_runs": len(runs), "n_used": len(good), "flags_kept": bool(keep_flagged),
         "flagged": [m["flags"] for m in runs if m["flags"]]}
    for k in ("ttft_s", "decode_s", "decode_tps", "e2e_s", "prefill_tps_client"):
        s[k] = stats.summarize([m[k] for m in good])
    s["completion_tokens"] = [m["completion_tokens"] for m in runs]
    s["prompt_tokens"] = sorted({m["prompt_tokens"] for m in runs if m["prompt_tokens"]})
    s["full_length"] = bool(runs) and max_tokens is not None and all(
        m["completion_tokens"] == max_tokens for m in runs)
    return s
