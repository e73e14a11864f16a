#!/usr/bin/env python3
"""Multi-tenant scheduling on a live `zinc serve` (docs/benchmarks.md, "Tenancy"), CPU or GPU.

(a) isolation: an interactive tenant sends one short streamed chat at a time, on an idle server
    and then while a batch tenant floods long requests; TTFT p50/p99 of each, and the same flood
    on the FCFS server (no --tenants) for comparison.
(b) fair share: two tenants with weights 1 and 2, each with C closed-loop clients, for D seconds;
    rows served per tenant (zinc_tenant_served_rows_total) scraped every W seconds: the b/a
    ratio of every window.
(d) throughput: output tokens/s of (b)'s load under tenancy and under FCFS.
Writes a JSON result and prints a markdown table. Usage:
  bench/tenancy.py --zinc build/zinc -m models/SmolLM2-135M-Instruct.Q4_1.gguf --out r.json
"""
import argparse
import hashlib
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import openai

LISTEN = re.compile(r"listening on http://([0-9.]+):(\d+)")


def digest(k):
    return "sha256:" + hashlib.sha256(k.encode()).hexdigest()


CONFIG = f"""
[[tenant]]
id = "inter"
class = "interactive"
api_keys = ["{digest('k-inter')}"]

[[tenant]]
id = "batch"
class = "batch"
api_keys = ["{digest('k-batch')}"]

[[tenant]]
id = "w1"
weight = 1
api_keys = ["{digest('k-w1')}"]

[[tenant]]
id = "w2"
weight = 2
api_keys = ["{digest('k-w2')}"]
"""


class Zinc:
    def __init__(self, args, tenants):
        self.log = tempfile.NamedTemporaryFile(prefix="zinc-bench-", suffix=".log", delete=False)
        cmd = [args.zinc, "serve", "-m", args.model, "--port", "0", "--alias", "m",
               "--parallel", str(args.parallel), "-c", str(args.ctx)]
        if args.threads:
            cmd += ["-t", str(args.threads)]
        if tenants:
            cfg = Path(tempfile.mkdtemp()) / "tenants.toml"
            cfg.write_text(CONFIG)
            cmd += ["--tenants", str(cfg)]
        self.p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log)
        t0 = time.monotonic()
        while True:
            m = LISTEN.search(Path(self.log.name).read_text(errors="replace"))
            if m:
                self.url = f"http://{m.group(1)}:{m.group(2)}"
                break
            if self.p.poll() is not None or time.monotonic() - t0 > 300:
                sys.exit("zinc did not start:\n" + Path(self.log.name).read_text())
            time.sleep(0.1)

    def client(self, key):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, timeout=600)

    def metrics(self):
        import urllib.request
        return urllib.request.urlopen(self.url + "/metrics").read().decode()

    def stop(self):
        self.p.terminate()
        self.p.wait(60)


def ttft(client, prompt, max_tokens=8):
    t0 = time.monotonic()
    first = None
    for ch in client.chat.completions.create(model="m", messages=[{"role": "user", "content": prompt}],
                                             max_tokens=max_tokens, temperature=0, stream=True):
        if first is None and ch.choices and ch.choices[0].delta.content:
            first = time.monotonic() - t0
    return first if first is not None else time.monotonic() - t0


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def scenario_a(z, args, tenants):
    ki = "k-inter" if tenants else "x"
    kb = "k-batch" if tenants else "x"
    ci = z.client(ki)
    idle = [ttft(ci, f"Say hello number {i}.") for i in range(args.n_inter)]
    stop = threading.Event()
    long_prompt = " ".join(f"item{i}" for i in range(args.long_words))

    def flood():
        cb = z.client(kb)
        while not stop.is_set():
            cb.completions.create(model="m", prompt=long_prompt, max_tokens=64, temperature=0,
                                  extra_body={"ignore_eos": True})

    ths = [threading.Thread(target=flood, daemon=True) for _ in range(args.flood)]
    for t in ths:
        t.start()
    time.sleep(args.warm)
    busy = [ttft(ci, f"Say hello number {i}.") for i in range(args.n_inter)]
    stop.set()
    for t in ths:
        t.join()
    return {"idle_p50": pct(idle, 0.5), "idle_p99": pct(idle, 0.99), "flood_p50": pct(busy, 0.5),
            "flood_p99": pct(busy, 0.99), "ratio_p99": pct(busy, 0.99) / pct(idle, 0.99)}


def rows(metrics, tenant):
    n = 0.0
    for line in metrics.splitlines():
        if line.startswith(f'zinc_tenant_served_rows_total{{tenant="{tenant}"'):
            n += float(line.split()[-1])
    return n


def scenario_b(z, args, tenants):
    stop = threading.Event()
    out_tokens = [0]
    lock = threading.Lock()

    def client_loop(key):
        c = z.client(key)
        while not stop.is_set():
            r = c.completions.create(model="m", prompt="Write about the sea.", max_tokens=32,
                                     temperature=0, extra_body={"ignore_eos": True})
            with lock:
                out_tokens[0] += r.usage.completion_tokens

    keys = ["k-w1", "k-w2"] if tenants else ["x", "x"]
    ths = [threading.Thread(target=client_loop, args=(keys[i % 2],), daemon=True)
           for i in range(2 * args.clients)]
    for t in ths:
        t.start()
    time.sleep(args.warm)
    windows = []
    t_start = time.monotonic()
    tok0 = out_tokens[0]
    if tenants:
        m = z.metrics()
        a0, b0 = rows(m, "w1"), rows(m, "w2")
    while time.monotonic() - t_start < args.duration:
        time.sleep(args.window)
        if tenants:
            m = z.metrics()
            a1, b1 = rows(m, "w1"), rows(m, "w2")
            windows.append({"w1_rows": a1 - a0, "w2_rows": b1 - b0,
                            "ratio": (b1 - b0) / max(1.0, a1 - a0)})
            a0, b0 = a1, b1
    elapsed = time.monotonic() - t_start
    tps = (out_tokens[0] - tok0) / elapsed
    stop.set()
    for t in ths:
        t.join()
    return {"windows": windows, "output_tok_s": tps}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zinc", default="build/zinc")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--n-inter", type=int, default=10)
    ap.add_argument("--flood", type=int, default=6)
    ap.add_argument("--long-words", type=int, default=200)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--duration", type=float, default=40)
    ap.add_argument("--window", type=float, default=10)
    ap.add_argument("--warm", type=float, default=3)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    res = {}
    for tenants in (True, False):
        z = Zinc(args, tenants)
        try:
            name = "tenants" if tenants else "fcfs"
            res[name] = {"a": scenario_a(z, args, tenants), "b": scenario_b(z, args, tenants)}
        finally:
            z.stop()
    res["args"] = vars(args)
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1))
    t, f = res["tenants"], res["fcfs"]
    print("| | tenants (interactive vs batch) | FCFS (no --tenants) |")
    print("| --- | ---: | ---: |")
    for k in ("idle_p50", "idle_p99", "flood_p50", "flood_p99"):
        print(f"| interactive TTFT {k}, s | {t['a'][k]:.2f} | {f['a'][k]:.2f} |")
    print(f"| TTFT p99 flood / idle | {t['a']['ratio_p99']:.2f} | {f['a']['ratio_p99']:.2f} |")
    print(f"| (b) load output tok/s | {t['b']['output_tok_s']:.1f} | {f['b']['output_tok_s']:.1f} |")
    print()
    print("| window | w1 rows | w2 rows | w2 / w1 |")
    print("| --- | ---: | ---: | ---: |")
    for i, w in enumerate(t["b"]["windows"]):
        print(f"| {i} | {w['w1_rows']:.0f} | {w['w2_rows']:.0f} | {w['ratio']:.2f} |")


if __name__ == "__main__":
    main()
