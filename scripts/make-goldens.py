#!/usr/bin/env python3
"""Produce tests/goldens/<model>.json: llama.cpp's greedy continuations and top-20 logits.

The oracle is llama.cpp through llama-cpp-python 0.3.36, built from its pip source archive on
this machine's CPU (`pip install --no-binary llama-cpp-python llama-cpp-python==0.3.36` with
CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON": AVX2/FMA/F16C, OpenMP,
llamafile sgemm, CPU repack, no AVX-512; see scripts/install-deps). Exactly how each golden file was made:

  llama_cpp.Llama(model_path, n_ctx=2048, n_batch=512, n_ubatch=512, n_threads=2,
                  n_threads_batch=2, logits_all=True, flash_attn=False, seed=0,
                  verbose=False)            # KV cache f16 (default type_k/type_v), CPU only
  prompt ids = llm.tokenize(text, add_bos=True, special=<prompt's "special" flag>)
               (add_bos=True adds BOS only where the GGUF's tokenizer.ggml.add_bos_token says so)
  llm.reset(); llm.eval(prompt ids)                      # one prefill call
  top_logits[i] = the 20 largest raw logits (id, value) of prompt position i, i < 8
  greedy: 64 times: t = argmax(last logits) (lowest id on ties), record t and the best five
          (id, logit) pairs, llm.eval([t])               # temperature 0, no sampler, no stop

Run: python3 scripts/make-goldens.py [--models-dir models] [--out-dir tests/goldens]
The JSON records the llama_cpp version and llama.cpp's system info string, and the sha256 of
the model file, so a test can refuse a golden made for a different file.
"""
import argparse
import hashlib
import json
import os
import platform

import numpy as np
import llama_cpp

N_PREDICT = 64
TOP_K = 20
TOP_POSITIONS = 8


def long_prompt():
    # About 650 tokens: longer than gemma3's 512-token sliding window, so local layers must
    # drop old positions during prefill and generation.
    parts = ["Here is a long list of facts about numbers, one per line.\n"]
    for i in range(1, 23):
        parts.append(f"Fact {i}: the square of {i} is {i * i}, and {i} plus {i} is {2 * i}.\n")
    parts.append("Now a short story about the number seven:")
    return "".join(parts)


PROMPTS = {
    "SmolLM2-135M-Instruct.Q4_1.gguf": [
        ("The three most useful things to know about the Rust borrow checker are", False),
        ("def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n", False),
        ("Once upon a time, in a small village by the sea, there lived", False),
        ("Q: What is the boiling point of water at sea level, in degrees Celsius?\nA:", False),
        ("List of prime numbers: 2, 3, 5, 7, 11, 13,", False),
        ("<|im_start|>user\nExplain photosynthesis in two sentences.<|im_end|>\n"
         "<|im_start|>assistant\n", True),
        (long_prompt(), False),
    ],
    "gemma-3-270m-q4_k_m.gguf": [
        ("The three most useful things to know about the Rust borrow checker are", False),
        ("def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n", False),
        ("Once upon a time, in a small village by the sea, there lived", False),
        ("Q: What is the boiling point of water at sea level, in degrees Celsius?\nA:", False),
        ("Les fleurs du jardin de ma grand-mère sont", False),
        ("<start_of_turn>user\nExplain photosynthesis in two sentences.<end_of_turn>\n"
         "<start_of_turn>model\n", True),
        (long_prompt(), False),
    ],
}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def top_pairs(row, k):
    idx = np.lexsort((np.arange(len(row)), -row))[:k]  # by logit desc, then id asc
    return [[int(i), float(row[i])] for i in idx]


def make(model_path):
    llm = llama_cpp.Llama(model_path=model_path, n_ctx=2048, n_batch=512, n_ubatch=512,
                          n_threads=2, n_threads_batch=2, logits_all=True, flash_attn=False,
                          seed=0, verbose=False)
    out = {
        "model": os.path.basename(model_path),
        "model_sha256": sha256(model_path),
        "generator": {
            "script": "scripts/make-goldens.py",
            "llama_cpp_python": llama_cpp.__version__,
            "llama_cpp_system_info": llama_cpp.llama_print_system_info().decode().strip(),
            "params": {"n_ctx": 2048, "n_batch": 512, "n_ubatch": 512, "n_threads": 2,
                       "logits_all": True, "flash_attn": False, "kv_type": "f16"},
            "host": platform.machine(),
        },
        "n_predict": N_PREDICT,
        "top_k": TOP_K,
        "prompts": [],
    }
    for text, special in PROMPTS[os.path.basename(model_path)]:
        toks = llm.tokenize(text.encode("utf-8"), add_bos=True, special=special)
        llm.reset()
        llm.eval(toks)
        scores = np.asarray(llm.scores[: len(toks)], dtype=np.float64)
        top = [top_pairs(scores[i], TOP_K) for i in range(min(TOP_POSITIONS, len(toks)))]
        greedy, step_top = [], []
        for _ in range(N_PREDICT):
            row = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            best = top_pairs(row, 5)
            greedy.append(best[0][0])
            step_top.append(best)
            llm.eval([best[0][0]])
        out["prompts"].append({
            "text": text,
            "special": special,
            "tokens": [int(t) for t in toks],
            "top_logits": top,
            "greedy": greedy,
            "greedy_top": step_top,
            "greedy_text": llm.detokenize(greedy).decode("utf-8", errors="replace"),
        })
        print(f"{os.path.basename(model_path)}: {len(toks)} prompt tokens -> "
              f"{out['prompts'][-1]['greedy_text'][:60]!r}")
    return out


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models-dir", default=os.path.join(here, "models"))
    ap.add_argument("--out-dir", default=os.path.join(here, "tests", "goldens"))
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    for name in PROMPTS:
        g = make(os.path.join(a.models_dir, name))
        stem = name[: -len(".gguf")]
        path = os.path.join(a.out_dir, stem + ".json")
        with open(path + ".tmp", "w") as f:
            json.dump(g, f, indent=1)
            f.write("\n")
        os.replace(path + ".tmp", path)
        print("wrote", path)


if __name__ == "__main__":
    main()
