"""Summary statistics for benchmark samples: percentiles (linear interpolation between closest
ranks, as numpy's default), medians, mean and sample sd, and the per-request latency metrics of
the load benchmark (TTFT, TPOT, ITL, end-to-end) as defined by vLLM's benchmark_serving:

  TTFT  time from sending the request to the first streamed content chunk
  TPOT  (end-to-end - TTFT) / (output tokens - 1): the mean time per output token after the first
  ITL   every gap between two successive content chunks of one request
"""
import math
import statistics


def percentile(xs, p):
    """p-th percentile (0..100) of xs with linear interpolation; None for an empty list."""
    if not xs:
        return None
    s = sorted(xs)
    if len(s) == 1:
        return float(s[0])
    k = (len(s) - 1) * (p / 100.0)
    lo = math.floor(k)
    hi = math.ceil(k)
    if lo == hi:
        return float(s[lo])
    return float(s[lo] + (s[hi] - s[lo]) * (k - lo))


def median(xs):
    return float(statistics.median(xs)) if xs else None


def summarize(xs):
    """{n, mean, sd, median, p50, p90, p99, min, max} of a list of numbers (None-valued when
    empty)."""
    xs = [float(x) for x in xs if x is not None]
    if not xs:
        return {"n": 0, "mean": None, "sd": None, "median": None, "p50": None, "p90": None,
                "p99": None, "min": None, "max": None}
    return {"n": len(xs), "mean": statistics.mean(xs),
            "sd": statistics.stdev(xs) if len(xs) > 1 else 0.0, "median": median(xs),
            "p50": percentile(xs, 50), "p90": percentile(xs, 90), "p99": percentile(xs, 99),
            "min": min(xs), "max": max(xs)}


def tpot(e2e_s, ttft_s, n_out):
    """Mean time per output token after the first; None when fewer than 2 tokens came back."""
    if ttft_s is None or e2e_s is None or n_out is None or n_out < 2:
        return None
    return (e2e_s - ttft_s) / (n_out - 1)


def goodput(requests, duration_s, ttft_slo_s=0.5, tpot_slo_s=0.05):
    """Requests/s and output tokens/s counted only over the requests that met both SLOs (TTFT <=
    ttft_slo_s and TPOT <= tpot_slo_s; a single-token request has no TPOT and is judged on TTFT
    alone). `requests` are dicts with ok, ttft_s, tpot_s, completion_tokens."""
    good = [r for r in requests if r.get("ok") and r.get("ttft_s") is not None
            and r["ttft_s"] <= ttft_slo_s
            and (r.get("tpot_s") is None or r["tpot_s"] <= tpot_slo_s)]
    n_ok = sum(1 for r in requests if r.get("ok"))
    return {"good_requests": len(good), "ok_requests": n_ok,
            "share": (len(good) / n_ok) if n_ok else 0.0,
            "req_per_s": len(good) / duration_s if duration_s > 0 else 0.0,
            "tok_per_s": sum(r.get("completion_tokens") or 0 for r in good) / duration_s
            if duration_s > 0 else 0.0}


def ratio(a, b):
    """a / b, or None when either is missing or b is 0."""
    if a is None or b is None or b == 0:
        return None
    return a / b
