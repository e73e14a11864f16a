#!/usr/bin/env python3
"""The agreement floor: how closely two independent, correct implementations agree.

The CUDA tier's fast path is held to teacher-forced top-1 agreement and mean KL against the CPU
tier (tests/cuda/test_agreement.cpp). What bound is fair? This script measures the same two
numbers between llama.cpp (llama-cpp-python, CPU) and zinc's CPU tier on the same file and the
same token stream: neither is "wrong", so their disagreement is the noise any valid
reimplementation of the quantized model shows (other summation orders, other activation
rounding). Random-weight synthetic models have flat, near-tied distributions and show much more
of it than trained models.

Usage: bench/agreement_floor.py [--positions 512] [--zinc-build build] MODEL.gguf ...
Prints one line per model: positions, top-1 agreement, near-ties, mean and max KL(llama.cpp || zinc).
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CORPUS = (
    "The history of the printing press begins long before Gutenberg. Block printing was used in "
    "China by the ninth century, and movable type made of fired clay appeared there around 1040. "
    "def merge_sort(xs):\n    if len(xs) <= 1:\n        return xs\n    mid = len(xs) // 2\n"
    "    return merge(merge_sort(xs[:mid]), merge_sort(xs[mid:]))\n"
    "In Europe, the combination of a screw press, oil-based ink and a hand mould for casting "
    "metal type made printing fast enough to change how knowledge travelled. ")


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def compare(ref, got):
    lp, lq = log_softmax(ref), log_softmax(got)
    kl = np.maximum((np.exp(lp) * (lp - lq)).sum(axis=-1), 0.0)
    ar, ag = ref.argmax(axis=-1), got.argmax(axis=-1)
    differ = ar != ag
    rows = np.arange(len(ref))
    gap = ref[rows, ar] - ref[rows, ag]
    near = differ & (gap < 1e-2 * np.maximum(1.0, np.abs(ref.max(axis=-1))))
    return {"n": len(ref), "top1": float(1 - differ.mean()), "differ": int(differ.sum()),
            "near_ties": int(near.sum()), "kl_mean": float(kl.mean()), "kl_max": float(kl.max())}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--positions", type=int, default=512)
    ap.add_argument("--zinc-build", default="build")
    a = ap.parse_args()
    import llama_cpp
    tool = Path(a.zinc_build) / "logits_tool"
    if not tool.exists():
        sys.exit(f"agreement_floor: {tool} not found (cmake --build {a.zinc_build} --target logits_tool)")
    for path in a.models:
        llm = llama_cpp.Llama(model_path=path, n_ctx=a.positions + 16, n_batch=a.positions,
                              logits_all=True, verbose=False, n_threads=os.cpu_count())
        toks = llm.tokenize(CORPUS.encode(), add_bos=True, special=False)
        rep = 1
        while len(toks) < a.positions:
            toks += llm.tokenize(f"Part {rep}. {CORPUS}".encode(), add_bos=False, special=False)
            rep += 1
        toks = toks[:a.positions]
        llm.eval(toks)
        ref = np.array(llm.scores[:len(toks)], dtype=np.float32)
        with tempfile.TemporaryDirectory() as d:
            dump = Path(d) / "logits.f32"
            subprocess.run([str(tool), "--model", path, "--tokens", ",".join(map(str, toks)),
                            "--top-positions", str(len(toks)), "--top-k", "1",
                            "--n-ctx", str(a.positions + 16), "--dump-logits", str(dump)],
                           check=True, stdout=subprocess.DEVNULL)
            got = np.fromfile(dump, dtype=np.float32).reshape(len(toks), -1)
        r = compare(ref, got)
        print(f"{Path(path).name}: {r['n']} positions, top-1 {r['top1']:.4f} ({r['differ']} differ, "
              f"{r['near_ties']} near-ties), mean KL {r['kl_mean']:.3g}, max KL {r['kl_max']:.3g}",
              flush=True)


if __name__ == "__main__":
    main()
