#!/usr/bin/env python3
"""Write small synthetic qwen2 / qwen3 GGUF models for the forward-pass oracle tests.

No real Qwen model is available on this machine, so tests/py/test_model_goldens.py checks zinc's
qwen2 and qwen3 forward passes on these files against llama.cpp (llama-cpp-python), which reads
them like any other GGUF. Weights are seeded random normals (deterministic for a given seed);
hyperparameters are small but exercise every feature of the architectures:

  qwen2: Q/K/V biases, GQA (4 heads, 2 KV heads), NEOX RoPE, untied output.weight
  qwen3: per-head Q/K RMS norms, head_dim (attention.key_length) != n_embd / n_head,
         GQA (4 heads, 1 KV head), NEOX RoPE, tied embeddings (no output.weight)

Tensor types mix F32 (norms, biases), F16, Q8_0, Q5_0 and Q4_1 (quantized with gguf.quants).
The tokenizer metadata (gpt2 BPE vocabulary, merges, special ids) is copied from the SmolLM2
GGUF so the files load anywhere; the vocabulary size is therefore 49152.

Usage: scripts/make-synthetic.py [--source models/SmolLM2-135M-Instruct.Q4_1.gguf]
                                 [--out-dir models/synthetic] [--seed 1234]
"""
import argparse
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize


def copy_tokenizer(w: gguf.GGUFWriter, src: gguf.GGUFReader) -> int:
    f = src.fields
    tokens = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode("utf-8")
              for i in f["tokenizer.ggml.tokens"].data]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    merges = [bytes(f["tokenizer.ggml.merges"].parts[i]).decode("utf-8")
              for i in f["tokenizer.ggml.merges"].data]
    w.add_tokenizer_model(f["tokenizer.ggml.model"].contents())
    w.add_tokenizer_pre(f["tokenizer.ggml.pre"].contents())
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(int(f["tokenizer.ggml.bos_token_id"].contents()))
    w.add_eos_token_id(int(f["tokenizer.ggml.eos_token_id"].contents()))
    w.add_add_bos_token(False)
    return len(tokens)


def add(w, name, arr, qtype):
    """arr has numpy shape (rows, cols) = GGUF ne (cols, rows)."""
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if qtype == T.F32:
        w.add_tensor(name, arr)
    elif qtype == T.F16:
        w.add_tensor(name, arr.astype(np.float16))
    else:
        w.add_tensor(name, quantize(arr, qtype), raw_dtype=qtype)


def write_model(path, arch, src, seed):
    rng = np.random.default_rng(seed)
    n_layer, n_embd, n_ff = 3, 256, 512
    if arch == "qwen2":
        n_head, n_head_kv, head_dim = 4, 2, 64
    else:
        n_head, n_head_kv, head_dim = 4, 1, 96  # q dim 384 != n_embd 256
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"zinc synthetic {arch}")
    n_vocab = copy_tokenizer(w, src)
    w.add_block_count(n_layer)
    w.add_context_length(4096)
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1000000.0)
    if arch == "qwen3":
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)

    def mat(rows, cols, scale=1.0):
        return rng.standard_normal((rows, cols)) * (scale / np.sqrt(cols))

    def norm(n):
        return 1.0 + 0.2 * rng.standard_normal(n)

    add(w, "token_embd.weight", rng.standard_normal((n_vocab, n_embd)), T.Q8_0)
    add(w, "output_norm.weight", norm(n_embd), T.F32)
    if arch == "qwen2":
        add(w, "output.weight", mat(n_vocab, n_embd, 4.0), T.Q8_0)
    qd, kvd = n_head * head_dim, n_head_kv * head_dim
    for il in range(n_layer):
        p = f"blk.{il}."
        add(w, p + "attn_norm.weight", norm(n_embd), T.F32)
        add(w, p + "attn_q.weight", mat(qd, n_embd, 2.0), T.Q8_0)
        add(w, p + "attn_k.weight", mat(kvd, n_embd, 2.0), T.Q5_0)
        add(w, p + "attn_v.weight", mat(kvd, n_embd), T.F16)
        add(w, p + "attn_output.weight", mat(n_embd, qd, 3.0), T.Q4_1 if il % 2 else T.Q8_0)
        if arch == "qwen2":
            add(w, p + "attn_q.bias", 0.5 * rng.standard_normal(qd), T.F32)
            add(w, p + "attn_k.bias", 0.5 * rng.standard_normal(kvd), T.F32)
            add(w, p + "attn_v.bias", 0.2 * rng.standard_normal(kvd), T.F32)
        else:
            add(w, p + "attn_q_norm.weight", norm(head_dim), T.F32)
            add(w, p + "attn_k_norm.weight", norm(head_dim), T.F32)
        add(w, p + "ffn_norm.weight", norm(n_embd), T.F32)
        add(w, p + "ffn_gate.weight", mat(n_ff, n_embd), T.Q5_0)
        add(w, p + "ffn_up.weight", mat(n_ff, n_embd), T.Q8_0)
        add(w, p + "ffn_down.weight", mat(n_embd, n_ff, 3.0), T.Q4_1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", default=os.path.join(here, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--out-dir", default=os.path.join(here, "models", "synthetic"))
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    if not os.path.exists(a.source):
        sys.exit(f"make-synthetic: tokenizer source {a.source} not found (run scripts/fetch-models)")
    os.makedirs(a.out_dir, exist_ok=True)
    src = gguf.GGUFReader(a.source)
    for i, arch in enumerate(["qwen2", "qwen3"]):
        path = os.path.join(a.out_dir, f"{arch}-synthetic.gguf")
        tmp = path + ".tmp"
        write_model(tmp, arch, src, a.seed + i)
        os.replace(tmp, path)
        print(path)


if __name__ == "__main__":
    main()
