"""Load generators and analysis of bench/tenancy.py (docs/benchmarks.md, "Tenancy"): threads of
closed-loop streamed requests over http.client (each one timed on the client's monotonic clock), a
/metrics scraper for zinc's per-tenant served rows, and the pure checks (percentiles, the 1:2
split per window, VTC's service gap, the quota burst) that tests/py/test_bench_tenancy.py checks
on synthetic data.
"""
import http.client
import json
import os
import socket
import threading
import time
import urllib.parse


def post_stream(base_url, key, path, body, stop=None, timeout_s=600.0, conns=None):
    """POST body with stream on; returns {status, ttft_s, e2e_s, n_chunks, chunk_t (arrival
    times, monotonic), retry_after, error (the JSON error object of a non-200)}. A set `stop`
    event ends the stream early (the connection is closed: the server cancels the request);
    `conns` (a set) holds the open connection meanwhile, so another thread can cut it."""
    u = urllib.parse.urlsplit(base_url)
    t0 = time.monotonic()
    out = {"status": 0, "ttft_s": None, "e2e_s": None, "n_chunks": 0, "chunk_t": [],
           "retry_after": None, "error": None, "t_send": t0, "cut": False}
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout_s)
    if conns is not None:
        conns.add(conn)
    try:
        conn.request("POST", path, body=json.dumps(dict(body, stream=True)),
                     headers={"Authorization": f"Bearer {key}",
                              "Content-Type": "application/json"})
        r = conn.getresponse()
        out["status"] = r.status
        if r.status != 200:
            out["retry_after"] = r.getheader("retry-after")
            raw = r.read()
            try:
                out["error"] = json.loads(raw).get("error")
            except (ValueError, AttributeError):
                out["error"] = {"message": raw[:300].decode(errors="replace")}
            return out
        while True:
            if stop is not None and stop.is_set():
                out["cut"] = True
                break
            line = r.readline()
            if not line:
                break
            line = line.decode(errors="replace").strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            try:
                ch = json.loads(line[6:])
            except ValueError:
                continue
            for c in ch.get("choices") or []:
                text = (c.get("delta") or {}).get("content") if "delta" in c else c.get("text")
                if text:
                    now = time.monotonic()
                    if out["ttft_s"] is None:
                        out["ttft_s"] = now - t0
                    out["n_chunks"] += 1
                    out["chunk_t"].append(now)
    except (OSError, http.client.HTTPException) as e:
        out["cut"] = stop is not None and stop.is_set()
        if not out["cut"]:
            out["error"] = {"message": f"{type(e).__name__}: {e}"}
    finally:
        if conns is not None:
            conns.discard(conn)
        conn.close()
        out["e2e_s"] = time.monotonic() - t0
    return out


class Loop:
    """n threads, each sending make_body(i) to path with key, one request after another, until
    stop(). Every finished request's result is kept in .results (in completion order)."""

    def __init__(self, base_url, key, path, make_body, n, think_s=0.0):
        self.base_url, self.key, self.path, self.make_body = base_url, key, path, make_body
        self.n, self.think_s = n, think_s
        self.results, self.lock, self.ev = [], threading.Lock(), threading.Event()
        self.count = 0
        self.conns = set()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(n)]

    def _next(self):
        with self.lock:
            self.count += 1
            return self.count

    def _run(self):
        while not self.ev.is_set():
            r = post_stream(self.base_url, self.key, self.path, self.make_body(self._next()),
                            self.ev, conns=self.conns)
            with self.lock:
                self.results.append(r)
            if r["status"] != 200 and not self.ev.is_set():
                time.sleep(0.2)  # a refusal: do not spin
            if self.think_s:
                self.ev.wait(self.think_s)

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def stop(self, join_s=30.0):
        """Stop sending; cut the requests still open (a request waiting for its first token
        would otherwise hold its slot into the next phase)."""
        self.ev.set()
        for c in list(self.conns):
            try:
                c.sock.shutdown(socket.SHUT_RDWR)
            except (OSError, AttributeError):
                pass
        deadline = time.monotonic() + join_s
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def tokens_between(self, t0, t1):
        """Content chunks that arrived in [t0, t1) over all requests (finished or cut)."""
        with self.lock:
            return sum(1 for r in self.results for t in r["chunk_t"] if t0 <= t < t1)


def in_flight(metrics_text):
    """{tenant: sequences admitted and not ended} from zinc_tenant_in_flight_sequences."""
    out = {}
    for line in metrics_text.splitlines():
        if line.startswith("zinc_tenant_in_flight_sequences{"):
            labels, value = line.rsplit(" ", 1)
            out[labels.split('tenant="', 1)[1].split('"', 1)[0]] = float(value)
    return out


def served_rows(metrics_text):
    """{tenant: prefill + decode rows} from zinc_tenant_served_rows_total."""
    rows = {}
    for line in metrics_text.splitlines():
        if not line.startswith("zinc_tenant_served_rows_total{"):
            continue
        labels, value = line.rsplit(" ", 1)
        tenant = labels.split('tenant="', 1)[1].split('"', 1)[0]
        rows[tenant] = rows.get(tenant, 0.0) + float(value)
    return rows


# The engine's step counters (src/server/metrics.cpp): how the steps of an interval were
# composed, for (d)'s comparison of two policies on one load.
ENGINE_SERIES = {
    "zinc_engine_steps_total": "steps",
    'zinc_step_rows_total{kind="decode"}': "decode_rows",
    'zinc_step_rows_total{kind="prefill"}': "prefill_rows",
    'zinc_steps_by_composition_total{kind="decode_only"}': "steps_decode_only",
    'zinc_steps_by_composition_total{kind="prefill_only"}': "steps_prefill_only",
    'zinc_steps_by_composition_total{kind="mixed"}': "steps_mixed",
    "zinc_step_duration_seconds_sum": "step_seconds",
    "zinc_preemptions_total": "preemptions",
    "zinc_engine_generated_tokens_total": "generated_tokens",
    "zinc_slots_busy": "slots_busy",
    "zinc_queue_depth": "queue_depth",
}


def engine_counters(metrics_text):
    """{name: value} of ENGINE_SERIES found in a /metrics text."""
    out = {}
    for line in metrics_text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        key, value = line.rsplit(" ", 1)
        if key in ENGINE_SERIES:
            out[ENGINE_SERIES[key]] = float(value)
    return out


def proc_cpu_seconds(pid):
    """User + system CPU seconds process pid has used (/proc/PID/stat), None when unreadable:
    CPU per output token is a policy's cost that does not depend on the machine's other load."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def step_composition(before, after, seconds, gauges=()):
    """What the engine did between two engine_counters snapshots `seconds` apart: steps per
    second, decode and prefill rows per step, the share of steps of each composition, the mean
    step duration (ms), the share of wall time spent in steps (busy: below 1 the engine sat idle
    with work queued or none), preemptions, tokens generated; `gauges` ([engine_counters] sampled
    in between) give the mean slots busy and queue depth. None when a counter is missing."""
    need = ("steps", "decode_rows", "prefill_rows", "step_seconds")
    if any(k not in before or k not in after for k in need) or seconds <= 0:
        return None
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in ENGINE_SERIES.values()}
    n = d["steps"]
    out = {"steps": n, "steps_per_s": n / seconds,
           "decode_rows_per_step": d["decode_rows"] / n if n else None,
           "prefill_rows_per_step": d["prefill_rows"] / n if n else None,
           "step_ms": 1e3 * d["step_seconds"] / n if n else None,
           "busy": d["step_seconds"] / seconds,
           "preemptions": d["preemptions"], "generated_tokens": d["generated_tokens"]}
    for k in ("steps_decode_only", "steps_prefill_only", "steps_mixed"):
        out["share_" + k[len("steps_"):]] = d[k] / n if n else None
    for k in ("slots_busy", "queue_depth"):
        xs = [g[k] for g in gauges if k in g]
        out["mean_" + k] = sum(xs) / len(xs) if xs else None
    return out


class Scraper:
    """Samples served_rows every period_s on a thread: .samples = [(t, {tenant: rows})], and
    in_flight at the same times: .in_flight = [(t, {tenant: sequences})], and the engine's
    counters: .engine = [(t, engine_counters)]."""

    def __init__(self, fetch_metrics, period_s=1.0):
        self.fetch, self.period_s = fetch_metrics, period_s
        self.samples, self.in_flight, self.ev = [], [], threading.Event()
        self.engine = []
        self.t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while True:
            try:
                m, t = self.fetch(), time.monotonic()
                self.samples.append((t, served_rows(m)))
                self.in_flight.append((t, in_flight(m)))
                self.engine.append((t, engine_counters(m)))
            except Exception:  # a missed sample is a gap, not a failure
                pass
            if self.ev.wait(self.period_s):
                return

    def start(self):
        self.t.start()
        return self

    def stop(self):
        self.ev.set()
        self.t.join(10)
        try:
            m, t = self.fetch(), time.monotonic()
            self.samples.append((t, served_rows(m)))
            self.engine.append((t, engine_counters(m)))
        except Exception:
            pass


def ab_throughput(rounds, a, b, tol):
    """Alternating rounds of two engines on one load ([{engine, round, seconds, output_tok_s,
    steps, server_cpu_ms_per_token}]): {a_tok_s, b_tok_s (tokens over seconds of all of an
    engine's rounds), ratio (a / b), within (|ratio - 1| <= tol), pair_ratios (a / b per round
    index), a_steps, b_steps (each step_composition key, plus server_cpu_ms_per_token, averaged
    over the engine's rounds)}."""
    def of(e):
        return [r for r in rounds if r["engine"] == e]

    def tok_s(rs):
        sec = sum(r["seconds"] for r in rs)
        return sum(r["output_tok_s"] * r["seconds"] for r in rs) / sec if sec else None

    def steps(rs):
        cs = [dict(r.get("steps") or {}, server_cpu_ms_per_token=r.get("server_cpu_ms_per_token"))
              for r in rs if r.get("steps")]
        if not cs:
            return None
        out = {}
        for k in cs[0]:
            xs = [c[k] for c in cs if c.get(k) is not None]
            out[k] = sum(xs) / len(xs) if xs else None
        return out

    ta, tb = tok_s(of(a)), tok_s(of(b))
    pairs = []
    for i in sorted({r["round"] for r in rounds}):
        x = [r["output_tok_s"] for r in of(a) if r["round"] == i]
        y = [r["output_tok_s"] for r in of(b) if r["round"] == i]
        if x and y and y[0]:
            pairs.append(x[0] / y[0])
    ratio = ta / tb if ta is not None and tb else None
    return {"a": a, "b": b, "a_tok_s": ta, "b_tok_s": tb, "ratio": ratio,
            "within": ratio is not None and abs(ratio - 1) <= tol, "pair_ratios": pairs,
            "a_steps": steps(of(a)), "b_steps": steps(of(b))}


def pct(xs, q):
    """Nearest-rank percentile (q in [0, 1]) of a non-empty list; None for an empty one."""
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def windows(samples, a, b, window_s, t_begin=None, t_end=None):
    """Served rows of tenants a and b per consecutive window of window_s seconds between
    t_begin and t_end (default: the samples' span), from cumulative samples (interpolated
    linearly between samples). Returns [{t0, a, b, ratio (b / a)}]."""
    if len(samples) < 2:
        return []

    def at(t, who):
        for (t0, r0), (t1, r1) in zip(samples, samples[1:]):
            if t0 <= t <= t1:
                v0, v1 = r0.get(who, 0.0), r1.get(who, 0.0)
                return v0 + (v1 - v0) * ((t - t0) / (t1 - t0) if t1 > t0 else 1.0)
        return samples[-1][1].get(who, 0.0) if t > samples[-1][0] else samples[0][1].get(who, 0.0)

    t = samples[0][0] if t_begin is None else t_begin
    end = samples[-1][0] if t_end is None else t_end
    out = []
    while t + window_s <= end + 1e-9:
        da = at(t + window_s, a) - at(t, a)
        db = at(t + window_s, b) - at(t, b)
        out.append({"t0": t, "a": da, "b": db, "ratio": db / da if da > 0 else None})
        t += window_s
    return out


def split_check(wins, target, tol):
    """Every window's ratio within tol (relative) of target: {ok, worst (ratio farthest off),
    n}. No window, or a window where a tenant got nothing, is not ok."""
    if not wins:
        return {"ok": False, "worst": None, "n": 0}
    worst, ok = None, True
    for w in wins:
        r = w["ratio"]
        if r is None:
            return {"ok": False, "worst": None, "n": len(wins)}
        if worst is None or abs(r - target) > abs(worst - target):
            worst = r
        ok = ok and abs(r - target) <= tol * target
    return {"ok": ok, "worst": worst, "n": len(wins)}


def service_gap(samples, a, b):
    """Largest |(rows of a) - (rows of b)| served over any interval between two samples: the
    quantity VTC bounds for two backlogged tenants of equal weight (max - min of the running
    difference)."""
    d = [r.get(a, 0.0) - r.get(b, 0.0) for _, r in samples]
    d = [x - d[0] for x in d] if d else d
    return (max(d) - min(d)) if d else None


def quota_check(results, allowed, quota_name):
    """A burst's results against a concurrency quota: exactly `allowed` served (200), every other
    one a 429 whose error names quota_name and that carries Retry-After >= 1."""
    ok200 = [r for r in results if r["status"] == 200]
    refused = [r for r in results if r["status"] == 429]
    named = [r for r in refused if (r.get("error") or {}).get("param") == quota_name]
    retry = [r for r in refused if r.get("retry_after") and str(r["retry_after"]).isdigit()
             and int(r["retry_after"]) >= 1]
    other = [r for r in results if r["status"] not in (200, 429)]
    return {"other_errors": [(r["status"], r.get("error")) for r in other][:5],"sent": len(results), "served": len(ok200), "refused_429": len(refused),
            "named_quota": len(named), "with_retry_after": len(retry), "other": len(other),
            "exact": len(ok200) == allowed and len(refused) == len(results) - allowed
            and len(named) == len(refused) and len(retry) == len(refused)}
