#!/usr/bin/env python3
"""Short-request TTFT under a long neighbour on a live `zinc serve` (issue 17, item 7;
docs/server.md "Scheduling a long prompt beside short ones", docs/benchmarks.md).

Each round sends one streamed ~3000-token completion (a fresh prompt each round, so no prefix
cache hit; 2 tokens) and, at fixed offsets after it, short streamed completions (each its own
prompt; 1 token, so each leaves its slot with its first token and the 4 slots never queue the
short ones behind each other: with 2 tokens, 8 arrivals in 8 s would wait for slots while each
step takes ~3 s on 2 cores). A short request's TTFT is from its own send to its first token
(the client's monotonic clock). The same rounds run under each setting, one server per setting, all started at once and
measured in alternating rounds (so a shared machine's load swings fall on each alike):

  shared    --max-batch-tokens 512 (the default): the long prefill runs in 512-row chunks and
            a new arrival is admitted into the next step, beside the long prompt's chunk
            (step sharing, engine/scheduler.h step 3);
  one-step  --max-batch-tokens 4096: the whole long prompt is one step's prefill, so a short
            request that arrives meanwhile waits for all of it: what every arrival got before
            step sharing (then admission waited until the long prefill was done; the chunks
            only split that wait into 512-row steps);
  before    (with --zinc-before BIN) a binary built from the commit before step sharing
            (6e4b239^), --max-batch-tokens 512.

Before the rounds, --idle short requests alone give each server's idle TTFT; each round
records the 1-minute load average at its start. Prints TTFT p50/p99
(nearest rank) of the short requests per setting and the long prompt's TTFT, and writes
OUT/ttft_neighbour.json and OUT/ttft_neighbour.md. Usage (CPU, the 2-core machine):
  nice -n 19 bench/ttft_neighbour.py --zinc build-cpu/zinc \\
      -m models/SmolLM2-135M-Instruct.Q4_1.gguf --threads 2 --rounds 3 --out docs/bench/ttft
"""
import argparse
import json
import platform
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import tenancy_load as tl  # noqa: E402
from harness.engines import Server, free_port  # noqa: E402

SETTINGS = {"shared": ["--max-batch-tokens", "512"],
            "one-step": ["--max-batch-tokens", "4096"]}


def long_prompt(r, n_words):
    # ~2.9 tokens a word with SmolLM2's tokenizer (tests/py/test_server_scheduling.py).
    return f"Round {r}. " + " ".join(f"word{(i * 7 + r) % 97}" for i in range(n_words))


def completion(model, prompt, max_tokens):
    return {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}


def one_round(srv, r, offsets, n_words):
    """TTFTs of the long request and the short ones of round r (seconds; None if it failed)."""
    out = {"long": None, "short": [None] * len(offsets), "errors": []}
    t0 = time.monotonic()

    def send(key, idx, prompt, at):
        time.sleep(max(0.0, t0 + at - time.monotonic()))
        # The long one wants 2 tokens; a short one 1, so that it leaves its slot with its first
        # token and the slots (4) never make the short ones queue behind each other.
        res = tl.post_stream(srv.base_url, "none", "/v1/completions",
                             completion(srv.model_id, prompt, 2 if idx is None else 1),
                             timeout_s=600)
        if res["status"] != 200 or res["ttft_s"] is None:
            out["errors"].append({"request": key, "status": res["status"], "error": res["error"]})
        elif idx is None:
            out["long"] = res["ttft_s"]
        else:
            out["short"][idx] = res["ttft_s"]

    threads = [threading.Thread(target=send, args=("long", None, long_prompt(r, n_words), 0.0))]
    for k, at in enumerate(offsets):
        threads.append(threading.Thread(
            target=send, args=(f"short@{at}", k, f"Round {r}, question {k}: say hi.", at)))
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return out


def loadavg():
    try:
        return float(open("/proc/loadavg").read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def start_server(name, zinc, model, args, a, log_dir):
    port = free_port()
    argv = [str(zinc), "serve", "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
            "--parallel", str(a.parallel), "-c", str(a.ctx), "-t", str(a.threads)] + args
    srv = Server(name, argv, port, log_dir / f"{name}.log").start()
    req = urllib.request.Request(srv.base_url + "/tokenize",
                                 data=json.dumps({"content": long_prompt(0, a.words)}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        srv.n_long = len(json.loads(resp.read())["tokens"])
    return srv


def idle_ttfts(srv, n):
    out = []
    for k in range(n):
        res = tl.post_stream(srv.base_url, "none", "/v1/completions",
                             completion(srv.model_id, f"Idle question {k}: say hi.", 1))
        if res["ttft_s"] is not None:
            out.append(res["ttft_s"])
    return out


def summary(name, srv, idle, rounds):
    short = [t for rd in rounds for t in rd["short"] if t is not None]
    longs = [rd["long"] for rd in rounds if rd["long"] is not None]
    return {"setting": name, "argv": srv.argv, "long_prompt_tokens": srv.n_long,
            "idle_ttft_s": idle, "rounds": rounds, "short_ttft_s": short,
            "short_p50_s": tl.pct(short, 0.5), "short_p99_s": tl.pct(short, 0.99),
            "long_ttft_p50_s": tl.pct(longs, 0.5), "idle_p50_s": tl.pct(idle, 0.5),
            "n_short": len(short), "n_failed": sum(len(rd["errors"]) for rd in rounds)}


def fmt(x):
    return "—" if x is None else f"{x:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zinc", required=True, help="the zinc binary")
    ap.add_argument("--zinc-before", help="a zinc built from the commit before step sharing")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--words", type=int, default=1030, help="words of the long prompt (~3000 tokens)")
    ap.add_argument("--offsets", type=lambda s: [float(x) for x in s.split(",")],
                    default=[0.5, 2.0, 3.5, 5.0, 6.5, 8.0, 9.5, 11.0],
                    help="seconds after the long request at which the short ones are sent")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--idle", type=int, default=4, help="short requests on the idle server first")
    ap.add_argument("--settings", default="shared,one-step",
                    help="comma-separated: shared, one-step (and before, with --zinc-before)")
    ap.add_argument("--out", default="ttft-out")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    names = a.settings.split(",")
    if a.zinc_before and "before" not in names:
        names.append("before")
    plan = []
    for name in names:
        if name == "before":
            if not a.zinc_before:
                sys.exit("ttft_neighbour: setting 'before' needs --zinc-before BIN")
            plan.append((name, a.zinc_before, ["--max-batch-tokens", "512"]))
        elif name in SETTINGS:
            plan.append((name, a.zinc, SETTINGS[name]))
        else:
            sys.exit(f"ttft_neighbour: unknown setting '{name}'; expected shared, one-step, before")
    # Every server up at once, idle but for its own rounds, which alternate (setting 1, 2, ...,
    # then again), so that a shared machine's load swings fall on all settings alike.
    servers = []
    try:
        for name, zinc, args in plan:
            servers.append(start_server(name, zinc, a.model, args, a, out))
        idle = {srv.name: idle_ttfts(srv, a.idle) for srv in servers}
        rounds = {srv.name: [] for srv in servers}
        for r in range(a.rounds):
            for srv in servers:
                load = loadavg()
                rd = one_round(srv, r, a.offsets, a.words)
                rd["loadavg_1m"] = load
                rounds[srv.name].append(rd)
                print(f"ttft_neighbour: round {r} {srv.name}: long TTFT {fmt(rd['long'])} s, short "
                      f"{' '.join(fmt(t) for t in rd['short'])} s (load {load})", file=sys.stderr)
    finally:
        for srv in servers:
            srv.stop()
    results = [summary(srv.name, srv, idle[srv.name], rounds[srv.name]) for srv in servers]
    for res in results:
        print(f"ttft_neighbour: {res['setting']}: short TTFT p50 {fmt(res['short_p50_s'])} s, p99 "
              f"{fmt(res['short_p99_s'])} s ({res['n_short']} requests, {res['n_failed']} failed); "
              f"long ({res['long_prompt_tokens']} tokens) TTFT p50 {fmt(res['long_ttft_p50_s'])} s; "
              f"idle short TTFT p50 {fmt(res['idle_p50_s'])} s", file=sys.stderr)
    doc = {"command": " ".join(sys.argv), "machine": platform.node(), "cpus": platform.machine(),
           "offsets_s": a.offsets, "rounds": a.rounds, "parallel": a.parallel, "threads": a.threads,
           "results": results}
    (out / "ttft_neighbour.json").write_text(json.dumps(doc, indent=1))
    lines = ["| setting | flags | short TTFT p50 (s) | short TTFT p99 (s) | short requests | "
             "long prompt TTFT p50 (s) | idle short TTFT p50 (s) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        lines.append(f"| {r['setting']} | `{' '.join(r['argv'][-2:])}` | {fmt(r['short_p50_s'])} | "
                     f"{fmt(r['short_p99_s'])} | {r['n_short']} | {fmt(r['long_ttft_p50_s'])} | "
                     f"{fmt(r['idle_p50_s'])} |")
    (out / "ttft_neighbour.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
