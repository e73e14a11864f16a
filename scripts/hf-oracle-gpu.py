#!/usr/bin/env python3
"""Hugging Face `transformers` on CUDA against zinc's logits, for the full-size synthetic models
of issue 15 (qwen35, qwen35moe, gpt-oss): the same random weights in both engines.

    scripts/hf-oracle-gpu.py MODEL.gguf [--logits-tool build/logits_tool] [--prompt 100]
                             [--steps 64] [--dtype float32] [--device cuda] [--save DIR]

Needs only torch, transformers, numpy (and safetensors for --save): the GGUF is read by the
minimal reader of scripts/gguf-to-hf.py (F32, F16, BF16, Q8_0, MXFP4: synthesize with
`zinc synth --type f32`, `bf16` or `q8_0`; gpt-oss q8_0 files have MXFP4 experts), each tensor
dequantized to f32, mapped back to its HF name and copied straight into the HF model built from
the converted config on the device (no checkpoint on disk unless --save DIR).

Steps: a deterministic random prompt of --prompt ids (--seed); transformers' greedy continuation
of --steps tokens (generate(), its cache); transformers' logits of prompt + continuation in one
forward; zinc's logits of the same ids (logits_tool: zinc's CPU tier, one forward, all positions;
or --zinc-logits FILE, raw f32 rows (positions, n_vocab) as `logits_tool --dump-logits FILE
--top-positions N --tokens IDS` writes them, with --tokens FILE holding the comma-separated ids).
Compared: every position's logits, and teacher-forced top-1 at the continuation's positions.

Tolerance: f32 files (every weight F32): max |zinc - hf| <= 1e-3 of max |hf|, as the CPU test
(tests/py/test_hf_oracle.py; both engines f32, only the summation order differs); otherwise
(quantized weights: zinc packs matmul inputs to 8 bits, transformers computes on the dequantized
weights in f32) the golden tolerance |zinc - hf| <= 1.0 + 0.06 |hf| at transformers' top-20 ids
of each position (tests/py/test_synth.py). Top-1 at >= 99 % of the continuation's steps, every
disagreement a near-tie (margin < 1e-3 for f32 files, < 1.0 otherwise). Prints one line,
`hf-oracle: PASS|FAIL ...` with the numbers; exit status 0 on PASS, 1 on FAIL, 2 on bad input.
"""
import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def converter():
    spec = importlib.util.spec_from_file_location("gguf_to_hf", os.path.join(HERE, "gguf-to-hf.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def build_hf(conv, g, device, dtype, attn, save_dir):
    import torch
    import transformers
    cfg, tensors = conv.convert_tensors(g)
    config = transformers.AutoConfig.for_model(**cfg)
    torch_dtype = getattr(torch, dtype)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(
            config, dtype=torch_dtype, attn_implementation=attn)
    params = dict(model.named_parameters())
    assigned, saved = set(), {}
    for name, arr in tensors:
        if save_dir:
            saved[name] = arr
        if name.startswith("mtp."):
            continue  # the NextN block: HF's forward does not run it (nor zinc's, nor llama.cpp's)
        p = params.get(name)
        if p is None:
            raise ValueError(f"converted tensor {name} is no parameter of {type(model).__name__}")
        if tuple(p.shape) != arr.shape:
            raise ValueError(f"{name}: converted shape {arr.shape}, model expects {tuple(p.shape)}")
        with torch.no_grad():
            p.copy_(torch.from_numpy(arr))
        assigned.add(name)
    tied = {"lm_head.weight"} if cfg["tie_word_embeddings"] else set()
    left = sorted(set(params) - assigned - tied)
    if left:
        raise ValueError(f"{len(left)} parameters of {type(model).__name__} have no GGUF tensor: "
                         f"{', '.join(left[:8])}")
    if save_dir:
        import json
        from safetensors.numpy import save_file
        os.makedirs(save_dir, exist_ok=True)
        with open(os.path.join(save_dir, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        save_file(saved, os.path.join(save_dir, "model.safetensors"), metadata={"format": "pt"})
    model.eval()
    return cfg, model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("--logits-tool", default=os.path.join(HERE, "..", "build", "logits_tool"))
    ap.add_argument("--zinc-logits", help="precomputed logits_tool --dump-logits file")
    ap.add_argument("--tokens", help="file with the comma-separated ids of --zinc-logits")
    ap.add_argument("--prompt", type=int, default=100, help="prompt length (random ids)")
    ap.add_argument("--steps", type=int, default=64, help="greedy continuation length")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--attn", default="eager", help="transformers attn_implementation")
    ap.add_argument("--threads", type=int, default=0, help="logits_tool threads (0: all)")
    ap.add_argument("--save", help="also write the HF directory (config.json, model.safetensors)")
    a = ap.parse_args()
    import torch

    conv = converter()
    try:
        g = conv.MiniGGUF(a.gguf)
        t0 = time.time()
        cfg, model = build_hf(conv, g, a.device, a.dtype, a.attn, a.save)
    except (ValueError, OSError) as e:
        print(f"hf-oracle: bad input: {e}", file=sys.stderr)
        return 2
    t_load = time.time() - t0
    exact = all(t == 0 for _, t, _ in g.tensors.values())
    n_vocab = cfg["vocab_size"]
    if a.zinc_logits:
        if not a.tokens:
            print("hf-oracle: bad input: --zinc-logits needs --tokens FILE", file=sys.stderr)
            return 2
        seq = [int(x) for x in open(a.tokens).read().replace("\n", ",").split(",") if x.strip()]
        n_prompt = max(1, len(seq) - a.steps)
    else:
        seq = [int(t) for t in np.random.default_rng(a.seed).integers(0, n_vocab, a.prompt)]
        n_prompt = len(seq)
    t0 = time.time()
    with torch.no_grad():
        ids = torch.tensor([seq], device=a.device)
        if not a.zinc_logits and a.steps > 0:
            ids = model.generate(ids, max_new_tokens=a.steps, do_sample=False, use_cache=True,
                                 pad_token_id=0, eos_token_id=None)
            seq = ids[0].tolist()
        hf = model(ids).logits[0].double().cpu().numpy()
    t_hf = time.time() - t0
    if a.zinc_logits:
        z = np.fromfile(a.zinc_logits, dtype=np.float32)
        if z.size != len(seq) * n_vocab:
            print(f"hf-oracle: bad input: {a.zinc_logits} holds {z.size} floats, expected "
                  f"{len(seq)} positions x {n_vocab}", file=sys.stderr)
            return 2
        z = z.reshape(len(seq), n_vocab)
    else:
        dump = os.path.join(tempfile.mkdtemp(prefix="hf-oracle."), "zinc.logits")
        cmd = [a.logits_tool, "--model", a.gguf, "--tokens", ",".join(map(str, seq)),
               "--top-positions", str(len(seq)), "--top-k", "1", "--threads", str(a.threads),
               "--n-ctx", str(len(seq) + 8), "--dump-logits", dump]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"hf-oracle: bad input: {' '.join(cmd[:3])} ... failed: {r.stderr.strip()}",
                  file=sys.stderr)
            return 2
        z = np.fromfile(dump, dtype=np.float32).reshape(len(seq), n_vocab).astype(np.float64)
    near_tie = 1e-3 if exact else 1.0
    if exact:
        err = float(np.abs(z - hf).max() / np.abs(hf).max())
        logits_ok = err <= 1e-3
        what = f"max|zinc-hf|/max|hf| {err:.2e} (tol 1e-3)"
    else:
        top = np.argsort(-hf, axis=1)[:, :20]
        zt, ht = np.take_along_axis(z, top, 1), np.take_along_axis(hf, top, 1)
        err = float((np.abs(zt - ht) / (1.0 + 0.06 * np.abs(ht))).max())
        logits_ok = err <= 1.0
        what = f"worst top-20 logit diff {err:.2f}x tolerance (1.0 + 0.06|l|)"
    agree = steps = jumps = 0
    for pos in range(n_prompt - 1, len(seq) - 1):
        row = hf[pos]
        h2 = np.argsort(-row)[:2]
        margin = row[h2[0]] - row[h2[1]]
        steps += 1
        if int(np.argmax(z[pos])) == int(h2[0]):
            agree += 1
        elif margin >= near_tie:
            jumps += 1
    top1_ok = steps == 0 or (agree >= 0.99 * steps and jumps == 0)
    ok = logits_ok and top1_ok
    print(f"hf-oracle: {'PASS' if ok else 'FAIL'} {os.path.basename(a.gguf)} "
          f"({cfg['architectures'][0]}, {'f32' if exact else 'quantized'}, {a.dtype} on "
          f"{a.device}): {len(seq)} positions, {what}; teacher-forced top-1 {agree}/{steps} "
          f"({jumps} not near-ties, margin >= {near_tie:g}); load {t_load:.0f} s, hf {t_hf:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
