"""Serving under load and the shared-prefix workload, through /v1/completions (raw text, so the
prompt length does not depend on a chat template).

Load sweep: at concurrency c, c closed-loop clients send requests back to back until
`n_requests` have finished. Every request has the same length: a unique 5-digit header (so no two
requests share a cacheable prefix) followed by the same filler text, `max_tokens` outputs with
ignore_eos set, temperature 0. Per level: TTFT/TPOT/ITL/end-to-end p50 and p99, aggregate output
tokens/s (all generated tokens / wall time from the first send to the last finish), and goodput at
the SLOs TTFT <= 500 ms and TPOT <= 50 ms (stats.goodput); plus whether the level's p99 values
meet those SLOs.

Shared prefix: every request is the same ~N-token prefix then a short unique question; one
priming request fills the cache, then `n_requests` run one at a time; TTFT median compared
between the prefix cache on and off.
"""
import asyncio
import time

from . import client, quality, stats

HEADER = "Request {i:05d}. "
PREFIX_Q = "\n\nQuestion {i:03d}: in one sentence, what does site {site} keep in its cold store?"


def requests_for(c, quick=False):
    """Requests of the level at concurrency c: two per client up to 8 clients (at least 4),
    one per client above (every client still sends one: one wave at 16-64 clients), so that a
    sweep to 64 fits a one-call budget on an 8B model."""
    if quick:
        return max(2 * c, 4)
    return max(2 * c, 4) if c <= 8 else c


def scaling(levels, engine, noise=0.03):
    """Does `engine`'s output tok/s fall as clients grow? Over the levels it ran (in order of
    concurrency, errors left out): every step down with its size, and ever_falls when one is
    more than `noise` (3 %) of the level before."""
    pts = []
    for lv in sorted(levels, key=lambda x: x["concurrency"]):
        r = lv["engines"].get(engine)
        if not r or r.get("error") or not r["summary"]["n_ok"]:
            continue
        pts.append((lv["concurrency"], r["summary"]["output_tok_per_s"]))
    falls = [{"from": c0, "to": c1, "from_tok_per_s": t0, "to_tok_per_s": t1,
              "drop_pct": 100.0 * (t0 - t1) / t0}
             for (c0, t0), (c1, t1) in zip(pts, pts[1:]) if t0 > 0 and t1 < t0]
    return {"levels": [c for c, _ in pts], "falls": falls,
            "ever_falls": any(f["drop_pct"] > 100.0 * noise for f in falls),
            "peak": max(pts, key=lambda p: p[1]) if pts else None}


def filler_text(handbook, n_chars):
    """The first n_chars characters of the handbook, cut at a word boundary."""
    t = handbook[:n_chars]
    return t[:t.rfind(" ")] if " " in t else t


def load_prompt(i, filler):
    return HEADER.format(i=i) + filler + "\n\nWrite a long report about every site above:"


def completion_body(model_name, prompt, max_tokens, ignore_eos=True, cache_prompt=None):
    b = {"model": model_name, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
         "seed": 7}
    if ignore_eos:
        b["ignore_eos"] = True
    if cache_prompt is not None:
        b["cache_prompt"] = cache_prompt  # llama-server's per-request prompt cache switch
    return b


def request_record(r):
    tp = stats.tpot(r.get("e2e_s"), r.get("ttft_s"), r.get("completion_tokens"))
    flags = quality.check(r.get("text")) if r["ok"] else ["error"]
    return {"ok": r["ok"], "error": r.get("error"), "t_send": r.get("t_send"),
            "ttft_s": r.get("ttft_s"), "e2e_s": r.get("e2e_s"), "tpot_s": tp,
            "itl_s": r.get("itl_s"), "prompt_tokens": r.get("prompt_tokens"),
            "completion_tokens": r.get("completion_tokens"),
            "completion_tokens_source": r.get("completion_tokens_source"),
            "finish_reason": r.get("finish_reason"), "flags": flags,
            "text_head": (r.get("text") or "")[:120]}


async def _closed_loop(base_url, bodies, concurrency, timeout_s=600.0):
    """Send bodies with `concurrency` workers, each taking the next body when its last finished."""
    results = [None] * len(bodies)
    next_i = 0
    t_origin = time.monotonic()

    async def worker(session):
        nonlocal next_i
        while next_i < len(bodies):
            i = next_i
            next_i += 1
            results[i] = await client.stream_request(session, base_url, bodies[i], chat=False,
                                                     t_origin=t_origin, timeout_s=timeout_s)
    async with client.new_session(concurrency) as s:
        await asyncio.gather(*(worker(s) for _ in range(concurrency)))
    return results, time.monotonic() - t_origin


def summarize_level(recs, duration_s, max_tokens, ttft_slo=0.5, tpot_slo=0.05):
    ok = [r for r in recs if r["ok"]]
    itl = [x for r in ok for x in (r["itl_s"] or [])]
    out_tokens = sum(r["completion_tokens"] or 0 for r in ok)
    s = {"n_requests": len(recs), "n_ok": len(ok), "duration_s": duration_s,
         "output_tokens": out_tokens,
         "output_tok_per_s": out_tokens / duration_s if duration_s > 0 else 0.0,
         "req_per_s": len(ok) / duration_s if duration_s > 0 else 0.0,
         "ttft_s": stats.summarize([r["ttft_s"] for r in ok]),
         "tpot_s": stats.summarize([r["tpot_s"] for r in ok]),
         "itl_s": stats.summarize(itl),
         "e2e_s": stats.summarize([r["e2e_s"] for r in ok]),
         "goodput": stats.goodput(ok, duration_s, ttft_slo, tpot_slo),
         "completion_tokens_all": sorted({r["completion_tokens"] for r in ok}),
         "prompt_tokens_all": sorted({r["prompt_tokens"] for r in ok if r["prompt_tokens"]}),
         "all_full_length": bool(ok) and all(r["completion_tokens"] == max_tokens for r in ok),
         "n_flagged": sum(1 for r in recs if r["flags"]),
         "errors": [r["error"] for r in recs if not r["ok"]][:3]}
    t99, p99 = s["ttft_s"]["p99"], s["tpot_s"]["p99"]
    s["slo_p99_met"] = (t99 is not None and t99 <= ttft_slo and (p99 is None or p99 <= tpot_slo))
    return s


def run_level(base_url, model_name, filler, concurrency, n_requests, max_tokens, first_id=0,
              timeout_s=600.0):
    bodies = [completion_body(model_name, load_prompt(first_id + i, filler), max_tokens)
              for i in range(n_requests)]
    results, duration = asyncio.run(_closed_loop(base_url, bodies, concurrency, timeout_s))
    recs = [request_record(r) for r in results]
    return {"concurrency": concurrency, "requests": recs,
            "summary": summarize_level(recs, duration, max_tokens)}


def prefix_prompt(prefix, i, n_sites=80):
    """The shared prefix and question i (site numbers always two digits, so every prompt has the
    same length)."""
    return prefix + PREFIX_Q.format(i=i, site=(i * 7) % n_sites + 10)


def run_prefix(base_url, model_name, prefix, n_requests, max_tokens, cache_prompt=None,
               timeout_s=600.0):
    """One priming request, then n_requests sequential requests sharing `prefix`."""
    prime = completion_body(model_name, prefix_prompt(prefix, 999), max_tokens,
                            cache_prompt=cache_prompt)
    bodies = [completion_body(model_name, prefix_prompt(prefix, i), max_tokens,
                              cache_prompt=cache_prompt) for i in range(n_requests)]
    prime_res, _ = asyncio.run(_closed_loop(base_url, [prime], 1, timeout_s))
    results, duration = asyncio.run(_closed_loop(base_url, bodies, 1, timeout_s))
    recs = [request_record(r) for r in results]
    ok = [r for r in recs if r["ok"]]
    return {"prime": request_record(prime_res[0]), "requests": recs,
            "summary": {"n_ok": len(ok), "ttft_s": stats.summarize([r["ttft_s"] for r in ok]),
                        "prompt_tokens_all": sorted({r["prompt_tokens"] for r in ok
                                                     if r["prompt_tokens"]}),
                        "errors": [r["error"] for r in recs if not r["ok"]][:3]}}
