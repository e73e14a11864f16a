#!/usr/bin/env python3
"""How stable is llama.cpp's own greedy output? Evidence for the near-tie rule of the golden test.

Re-runs the greedy continuations of tests/goldens/<model>.json with llama.cpp itself, changing
only an implementation detail that should not matter mathematically (flash attention on instead
of off), and prints, per prompt, for how many of the 64 tokens llama.cpp agrees with its own
golden. If llama.cpp cannot reproduce its own 64 greedy tokens under such a change, exact 64-token
identity is not a meaningful requirement for a second engine; divergence at near-ties is.

Run: python3 scripts/llama-self-consistency.py [--models-dir models] [--goldens tests/goldens]
Needs llama-cpp-python (scripts/install-deps puts it in .venv: source .venv/bin/activate first).
Takes about a minute per model on 2 cores.
"""
import argparse
import json
import os

import llama_cpp


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", default="models")
    ap.add_argument("--goldens", default="tests/goldens")
    args = ap.parse_args()
    for name in sorted(os.listdir(args.goldens)):
        if not name.endswith(".json"):
            continue
        golden = json.load(open(os.path.join(args.goldens, name)))
        path = os.path.join(args.models_dir, name[:-5] + ".gguf")
        if not os.path.exists(path):
            print(f"{name}: model {path} missing, skipped")
            continue
        llm = llama_cpp.Llama(path, n_ctx=2048, n_threads=2, flash_attn=True, verbose=False)
        agree = []
        for p in golden["prompts"]:
            llm.reset()
            llm.eval(p["tokens"])
            out = []
            for _ in range(len(p["greedy"])):
                t = llm.sample(temp=0.0, top_k=1)
                out.append(t)
                llm.eval([t])
            agree.append(next((i for i, (a, b) in enumerate(zip(out, p["greedy"])) if a != b),
                              len(out)))
        print(f"{name[:-5]}: llama.cpp flash_attn=on agrees with its flash_attn=off golden for "
              f"the first {agree} of {len(golden['prompts'][0]['greedy'])} greedy tokens")


if __name__ == "__main__":
    main()
