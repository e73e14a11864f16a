#!/usr/bin/env python3
"""Prompt-lookup speculative decoding, measured (docs/benchmarks.md, "Speculative decoding").

For each task (a real model and a prompt whose answer repeats text it was shown: Qwen2.5-Coder
editing and reviewing code, SmolLM2 summarising a text), greedy generation of N tokens through
the chat template:
  zinc   `zinc -m M -f PROMPT --chat -n N --temp 0 --spec off|lookup` (decode tok/s from its
         timing line; the texts of both runs must be identical: exactness is checked, not assumed);
  llama  llama-cpp-python with and without draft_model=LlamaPromptLookupDecoding (its own prompt
         lookup, num_pred_tokens as --spec-max), same file, same threads; tok/s of the whole
         completion call minus its prompt evaluation (llama's timings).
Runs alternate off/on `--reps` times; the best of each is reported (this machine is shared).

  bench/spec_bench.py --zinc build/zinc --threads 2 --out docs/bench/spec      # CPU here
  bench/spec_bench.py --zinc build/zinc --tier cuda --no-llama --out OUT       # on the H200
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CODE = '''def parse_config(path):
    """Read a key=value config file into a dict."""
    result = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, value = line.split("=", 1)
            result[key.strip()] = value.strip()
    return result


def merge_configs(base, override):
    merged = dict(base)
    for key, value in override.items():
        merged[key] = value
    return merged
'''

TEXT = ("The city council met on Monday evening to discuss the proposed expansion of the public "
        "library. After two hours of debate, the council voted seven to two in favour of the plan, "
        "which will add a children's wing, a study hall and a small auditorium to the existing "
        "building. Construction is expected to begin in the spring and to last about eighteen "
        "months. The cost, estimated at four million dollars, will be covered by a state grant and "
        "by a bond approved by voters last year. Several residents spoke against the plan, "
        "arguing that the money would be better spent on road repairs, while parents and teachers "
        "spoke in favour, pointing to the crowded reading rooms and the long waiting lists for "
        "after-school programmes.")

TASKS = [
    ("qwen-edit", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
     "Rename the function parse_config to load_config everywhere in this code and print the "
     "whole updated code:\n\n" + CODE),
    ("qwen-review", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
     "Review this code. Quote each line you comment on, then say what to change:\n\n" + CODE),
    ("smol-summary", "SmolLM2-135M-Instruct.Q4_1.gguf",
     "Summarise this text in a few sentences, reusing its wording:\n\n" + TEXT),
]

TIMING = re.compile(r"decode: (\d+) tok in ([0-9.]+) s")
SPEC = re.compile(r"speculative: \w+, (\d+) drafted, (\d+) accepted")


def run_zinc(args, model, prompt_file, mode, n):
    cmd = [args.zinc, "-m", str(model), "-f", prompt_file, "--chat", "-n", str(n), "--temp", "0",
           "-t", str(args.threads), "--spec", mode, "--spec-max", str(args.spec_max)]
    if args.tier:
        cmd += ["--tier", args.tier]
    env = dict(os.environ)
    env.pop("ZINC_SPEC", None)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env)
    if r.returncode != 0:
        sys.exit(f"zinc failed: {' '.join(cmd)}\n{r.stderr}")
    m = TIMING.search(r.stderr)
    toks, secs = int(m.group(1)), float(m.group(2))
    out = {"text": r.stdout, "decode_tokens": toks, "decode_s": secs,
           "tok_s": toks / secs if secs > 0 else 0.0}
    s = SPEC.search(r.stderr)
    if s:
        out["drafted"], out["accepted"] = int(s.group(1)), int(s.group(2))
    return out


def run_llama(args, model, prompt, lookup, n):
    from llama_cpp import Llama
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding
    kw = dict(model_path=str(model), n_ctx=2048, n_threads=args.threads, verbose=False, seed=0)
    if lookup:
        kw["draft_model"] = LlamaPromptLookupDecoding(num_pred_tokens=args.spec_max)
    llm = Llama(**kw)
    t0 = time.perf_counter()
    r = llm.create_chat_completion(messages=[{"role": "user", "content": prompt}],
                                   max_tokens=n, temperature=0.0)
    total = time.perf_counter() - t0
    toks = r["usage"]["completion_tokens"]
    # Prompt evaluation time is not split out by the Python API; time a 1-token call for it.
    t1 = time.perf_counter()
    llm.reset()
    llm.create_chat_completion(messages=[{"role": "user", "content": prompt}], max_tokens=1,
                               temperature=0.0)
    prefill = time.perf_counter() - t1
    dec = max(total - prefill, 1e-9)
    return {"text": r["choices"][0]["message"]["content"], "decode_tokens": toks - 1,
            "decode_s": dec, "tok_s": (toks - 1) / dec}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--zinc", default=str(ROOT / "build" / "zinc"))
    ap.add_argument("--models", default=str(ROOT / "models"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tier", default="")
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--spec-max", type=int, default=8)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--tasks", default="", help="comma-separated task names (default: all)")
    ap.add_argument("--no-llama", action="store_true")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    rows = []
    for name, model_file, prompt in TASKS:
        if args.tasks and name not in args.tasks.split(","):
            continue
        model = Path(args.models) / model_file
        if not model.exists():
            print(f"skip {name}: {model} missing", file=sys.stderr)
            continue
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(prompt)
            pf = f.name
        best = {}
        for _ in range(args.reps):
            for mode in ("off", "lookup"):
                r = run_zinc(args, model, pf, mode, args.n)
                if mode not in best or r["tok_s"] > best[mode]["tok_s"]:
                    best[mode] = r
            if not args.no_llama:
                for lk in (False, True):
                    key = "llama_lookup" if lk else "llama_off"
                    r = run_llama(args, model, prompt, lk, args.n)
                    if key not in best or r["tok_s"] > best[key]["tok_s"]:
                        best[key] = r
        os.unlink(pf)
        row = {"task": name, "model": model_file, "n": args.n, "threads": args.threads,
               "tier": args.tier or "auto",
               "zinc_identical": best["off"]["text"] == best["lookup"]["text"]}
        for k, r in best.items():
            row[k] = {kk: v for kk, v in r.items() if kk != "text"}
        if "llama_off" in best:
            row["llama_identical"] = best["llama_off"]["text"] == best["llama_lookup"]["text"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\n| task | zinc off tok/s | zinc lookup tok/s | speedup | accepted/drafted | identical "
          "| llama.cpp off | llama.cpp lookup | speedup |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        z0, z1 = r["off"]["tok_s"], r["lookup"]["tok_s"]
        acc = f'{r["lookup"].get("accepted", 0)}/{r["lookup"].get("drafted", 0)}'
        l0 = r.get("llama_off", {}).get("tok_s")
        l1 = r.get("llama_lookup", {}).get("tok_s")
        ll = (f"{l0:.1f} | {l1:.1f} | {l1 / l0:.2f}x" if l0 and l1 else "- | - | -")
        print(f'| {r["task"]} | {z0:.1f} | {z1:.1f} | {z1 / z0:.2f}x | {acc} | '
              f'{"yes" if r["zinc_identical"] else "NO"} | {ll} |')
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "spec_bench.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
