#!/usr/bin/env python3
"""Convert a GGUF in llama.cpp's layout back into a Hugging Face `transformers` model directory,
for the second oracle of the hybrid / MoE architectures (tests/py/test_hf_oracle.py,
scripts/hf-oracle-gpu.py): the same random weights as a `zinc synth` model, run by transformers.

    scripts/gguf-to-hf.py MODEL.gguf OUT_DIR [--reader auto|gguf|mini]

Architectures: qwen35 (Qwen3_5ForCausalLM, model_type qwen3_5_text), qwen35moe
(Qwen3_5MoeForCausalLM, qwen3_5_moe_text) and gpt-oss (GptOssForCausalLM, gpt_oss). OUT_DIR gets
config.json (the architecture's HF config class fields, from the GGUF metadata) and
model.safetensors (f32, every GGUF tensor under its HF checkpoint name).

What llama.cpp's convert_hf_to_gguf.py did to these architectures, undone here (facts from its
Qwen3NextModel, _LinearAttentionVReorderBase, _Qwen35MtpMixin and GptOssModel converters):
  * qwen35 / qwen35moe: RMSNorm weights of the (1 + w) kind were stored +1 (every `*norm.weight`
    except the DeltaNet's gated `linear_attn.norm`): HF = GGUF - 1. A_log was stored as
    ssm_a = -exp(A_log): A_log = log(-ssm_a). dt_bias is ssm_dt.bias. conv1d (C, 1, K) was
    squeezed to (C, K). The DeltaNet V heads were reordered from HF's grouped order (v heads of
    K head 0, then of K head 1, ...) to ggml's tiled order (v head 0 of every K head, then v head
    1, ...): the V rows of in_proj_qkv and conv1d, the rows of in_proj_z / in_proj_a /
    in_proj_b, A_log, dt_bias and the columns of out_proj; undone with the inverse permutation.
    The joint Q + gate projection (per head [q | gate]) is stored as is. The NextN block
    blk.<n_layer + j> is HF's mtp.layers.<j> (eh_proj = mtp.fc, enorm / hnorm =
    mtp.pre_fc_norm_embedding / _hidden, shared_head_norm = mtp.norm; all its norms +1); HF
    ignores mtp.* at load. qwen35moe experts: HF's fused experts.gate_up_proj (E, 2F, H) is
    [gate_exps; up_exps] along its rows, experts.down_proj (E, H, F) is down_exps.
  * gpt-oss: HF's experts.gate_up_proj (E, H, 2F) interleaves gate and up along its last axis
    (gate = [..., ::2], up = [..., 1::2]) and was transposed and split into ffn_gate_exps /
    ffn_up_exps (E, F, H); its bias likewise; down_proj (E, F, H) was transposed to
    ffn_down_exps (E, H, F). sinks are attn_sinks.weight, the router ffn_gate_inp. No Q/K
    permutation anywhere (all three use NEOX RoPE).
    YaRN: the GGUF has no `truncate`; the config gets the published gpt-oss value (false: the
    correction range not rounded), or with --yarn-truncate true (rounded outward, as llama.cpp's
    ggml_rope_yarn_corr_dims and zinc do: docs/models.md, "Found").

Reading: the `gguf` package when importable (its numpy dequantization of every type), else the
minimal reader below (F32, F16, BF16, Q8_0, MXFP4: what `zinc synth --type f32|bf16|q8_0` writes,
MXFP4 for gpt-oss experts); --reader forces one. tests/py/test_hf_oracle.py checks that both
readers give the same arrays.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

# --- a minimal GGUF reader (the GGUF v3 layout of ggml's docs/gguf.md) -------------------------

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
           11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
# ggml type id -> (name, block size, bytes per block)
_TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 8: ("Q8_0", 32, 34), 30: ("BF16", 1, 2),
          39: ("MXFP4", 32, 17)}
_MXFP4_VALUES = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], np.float32)


class MiniGGUF:
    """Metadata (dict) and tensors (name -> (numpy shape, ggml type id, byte offset)) of a GGUF
    file, memory-mapped; tensor(name) dequantizes to f32 in numpy order (ne reversed)."""

    def __init__(self, path):
        self.path = path
        self.buf = np.memmap(path, dtype=np.uint8, mode="r")
        self.pos = 0
        if bytes(self.buf[:4]) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file (magic {bytes(self.buf[:4])!r})")
        self.pos = 4
        version = self._scalar("<I")
        if version != 3:
            raise ValueError(f"{path}: GGUF version {version}, expected 3")
        n_tensors, n_kv = self._scalar("<Q"), self._scalar("<Q")
        self.metadata = {}
        for _ in range(n_kv):
            key = self._string()
            self.metadata[key] = self._value(self._scalar("<I"))
        infos = []
        for _ in range(n_tensors):
            name = self._string()
            n_dims = self._scalar("<I")
            ne = [self._scalar("<Q") for _ in range(n_dims)]
            typ, off = self._scalar("<I"), self._scalar("<Q")
            infos.append((name, ne, typ, off))
        align = int(self.metadata.get("general.alignment", 32))
        start = (self.pos + align - 1) // align * align
        self.tensors = {n: (tuple(reversed(ne)), t, start + off) for n, ne, t, off in infos}

    def _scalar(self, fmt):
        n = struct.calcsize(fmt)
        v = struct.unpack(fmt, bytes(self.buf[self.pos:self.pos + n]))[0]
        self.pos += n
        return v

    def _string(self):
        n = self._scalar("<Q")
        s = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8", errors="replace")
        self.pos += n
        return s

    def _value(self, vt):
        if vt in _SCALAR:
            return self._scalar(_SCALAR[vt])
        if vt == _STRING:
            return self._string()
        if vt == _ARRAY:
            et, n = self._scalar("<I"), self._scalar("<Q")
            if et in _SCALAR and et != 7:  # numeric arrays in one read (token types, scores)
                dt = np.dtype(_SCALAR[et])
                a = np.frombuffer(bytes(self.buf[self.pos:self.pos + n * dt.itemsize]), dt)
                self.pos += n * dt.itemsize
                return a.tolist()
            return [self._value(et) for _ in range(n)]
        raise ValueError(f"{self.path}: metadata value type {vt} unknown at byte {self.pos}")

    def tensor(self, name):
        shape, typ, off = self.tensors[name]
        if typ not in _TYPES:
            raise ValueError(f"{self.path}: tensor {name} has ggml type {typ}, which the minimal "
                             f"reader does not dequantize (it reads "
                             f"{', '.join(v[0] for v in _TYPES.values())}); install the gguf "
                             f"package or synthesize the model with --type f32, bf16 or q8_0")
        tname, bs, bb = _TYPES[typ]
        n = int(np.prod(shape))
        raw = self.buf[off:off + n // bs * bb]
        if tname == "F32":
            out = raw.view(np.float32).copy()
        elif tname == "F16":
            out = raw.view(np.float16).astype(np.float32)
        elif tname == "BF16":
            out = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif tname == "Q8_0":  # per 32 values: f16 scale d, 32 int8 q; x = d * q
            b = np.asarray(raw).reshape(-1, bb)
            d = b[:, :2].copy().view(np.float16).astype(np.float32)
            out = (d * b[:, 2:].view(np.int8).astype(np.float32)).reshape(-1)
        else:  # MXFP4, per 32 values: E8M0 scale e, 16 bytes of nibbles (low: 0..15, high: 16..31)
            b = np.asarray(raw).reshape(-1, bb)
            # ggml's GGML_E8M0_TO_FP32_HALF: 2^(e - 127) / 2 (the table holds 2x the e2m1 values)
            d = np.ldexp(np.float32(1), b[:, 0].astype(np.int32) - 128).astype(np.float32)[:, None]
            q = b[:, 1:]
            vals = np.concatenate([_MXFP4_VALUES[q & 0x0F], _MXFP4_VALUES[q >> 4]], axis=1)
            out = (vals * d).reshape(-1)
        return out.reshape(shape)


class PkgGGUF:
    """The same interface over the gguf package's GGUFReader and its numpy dequantization."""

    def __init__(self, path):
        import gguf
        self._gguf = gguf
        self.path = path
        r = gguf.GGUFReader(path)
        self.metadata = {k: f.contents() for k, f in r.fields.items()}
        self._t = {t.name: t for t in r.tensors}
        self.tensors = {t.name: (tuple(int(x) for x in reversed(t.shape)), int(t.tensor_type), 0)
                        for t in r.tensors}

    def tensor(self, name):
        t = self._t[name]
        a = self._gguf.quants.dequantize(t.data, t.tensor_type)
        return np.asarray(a, dtype=np.float32).reshape(self.tensors[name][0])


def open_gguf(path, reader="auto"):
    if reader == "gguf" or reader == "auto":
        try:
            return PkgGGUF(path)
        except ImportError:
            if reader == "gguf":
                raise
    return MiniGGUF(path)


# --- the mapping -----------------------------------------------------------------------------


def _key(md, arch, k, default=None):
    v = md.get(f"{arch}.{k}", default)
    if v is None:
        raise ValueError(f"missing metadata key {arch}.{k}")
    return v


def _untile_v(a, axis, n_k, n_vper, hd):
    """Inverse of llama.cpp's _reorder_v_heads: ggml's tiled V-head order (index v * n_k + k)
    back to HF's grouped order (k * n_vper + v) along `axis`, heads of `hd` elements."""
    a = np.moveaxis(a, axis, 0)
    rest = a.shape[1:]
    a = a.reshape(n_vper, n_k, hd, *rest).swapaxes(0, 1).reshape(n_vper * n_k * hd, *rest)
    return np.ascontiguousarray(np.moveaxis(a, 0, axis))


def _qwen35(g, md, arch, yarn_truncate):
    moe = arch == "qwen35moe"
    n_block = int(_key(md, arch, "block_count"))
    n_nextn = int(md.get(f"{arch}.nextn_predict_layers", 0))
    n_layer = n_block - n_nextn
    E = int(_key(md, arch, "embedding_length"))
    n_head = int(_key(md, arch, "attention.head_count"))
    head_dim = int(_key(md, arch, "attention.key_length"))
    n_rot = int(_key(md, arch, "rope.dimension_count"))
    interval = int(md.get(f"{arch}.full_attention_interval", 4))
    d_conv = int(_key(md, arch, "ssm.conv_kernel"))
    hk = int(_key(md, arch, "ssm.state_size"))
    n_k = int(_key(md, arch, "ssm.group_count"))
    n_v = int(_key(md, arch, "ssm.time_step_rank"))
    hv = int(_key(md, arch, "ssm.inner_size")) // n_v
    sections = [int(x) for x in md.get(f"{arch}.rope.dimension_sections", [11, 11, 10, 0])][:3]
    tied = "output.weight" not in g.tensors
    vocab = int(g.tensors["token_embd.weight"][0][0])
    cfg = {
        "vocab_size": vocab, "hidden_size": E, "num_hidden_layers": n_layer,
        "num_attention_heads": n_head,
        "num_key_value_heads": int(_key(md, arch, "attention.head_count_kv")),
        "head_dim": head_dim, "hidden_act": "silu",
        "max_position_embeddings": int(_key(md, arch, "context_length")),
        "rms_norm_eps": float(_key(md, arch, "attention.layer_norm_rms_epsilon")),
        "tie_word_embeddings": tied, "attention_bias": False,
        "rope_parameters": {"rope_type": "default",
                            "rope_theta": float(_key(md, arch, "rope.freq_base")),
                            "partial_rotary_factor": n_rot / head_dim,
                            "mrope_section": sections, "mrope_interleaved": True},
        "linear_conv_kernel_dim": d_conv, "linear_key_head_dim": hk, "linear_value_head_dim": hv,
        "linear_num_key_heads": n_k, "linear_num_value_heads": n_v,
        "layer_types": ["linear_attention" if (i + 1) % interval else "full_attention"
                        for i in range(n_layer)],
        "dtype": "float32",
    }
    if n_nextn:
        cfg["mtp_num_hidden_layers"] = n_nextn
    if moe:
        cfg.update({"model_type": "qwen3_5_moe_text", "architectures": ["Qwen3_5MoeForCausalLM"],
                    "num_experts": int(_key(md, arch, "expert_count")),
                    "num_experts_per_tok": int(_key(md, arch, "expert_used_count")),
                    "moe_intermediate_size": int(_key(md, arch, "expert_feed_forward_length")),
                    "shared_expert_intermediate_size": int(md.get(
                        f"{arch}.expert_shared_feed_forward_length",
                        md.get(f"{arch}.feed_forward_length")))})
    else:
        cfg.update({"model_type": "qwen3_5_text", "architectures": ["Qwen3_5ForCausalLM"],
                    "intermediate_size": int(_key(md, arch, "feed_forward_length"))})
    vper = n_v // n_k
    qk = 2 * n_k * hk

    def layer(il, hf):
        b = f"blk.{il}."
        yield b + "attn_norm.weight", hf + "input_layernorm.weight", lambda a: a - 1
        yield b + "post_attention_norm.weight", hf + "post_attention_layernorm.weight", \
            lambda a: a - 1
        if b + "attn_qkv.weight" in g.tensors:
            la = hf + "linear_attn."
            yield b + "attn_qkv.weight", la + "in_proj_qkv.weight", \
                lambda a: np.concatenate([a[:qk], _untile_v(a[qk:], 0, n_k, vper, hv)])
            yield b + "attn_gate.weight", la + "in_proj_z.weight", \
                lambda a: _untile_v(a, 0, n_k, vper, hv)
            yield b + "ssm_conv1d.weight", la + "conv1d.weight", lambda a: np.concatenate(
                [a[:qk], _untile_v(a[qk:], 0, n_k, vper, hv)])[:, None, :]
            yield b + "ssm_dt.bias", la + "dt_bias", lambda a: _untile_v(a, 0, n_k, vper, 1)
            yield b + "ssm_a", la + "A_log", lambda a: np.log(-_untile_v(a, 0, n_k, vper, 1))
            yield b + "ssm_beta.weight", la + "in_proj_b.weight", \
                lambda a: _untile_v(a, 0, n_k, vper, 1)
            yield b + "ssm_alpha.weight", la + "in_proj_a.weight", \
                lambda a: _untile_v(a, 0, n_k, vper, 1)
            yield b + "ssm_norm.weight", la + "norm.weight", None
            yield b + "ssm_out.weight", la + "out_proj.weight", \
                lambda a: _untile_v(a, 1, n_k, vper, hv)
        else:
            sa = hf + "self_attn."
            for gn, hn in (("attn_q", "q_proj"), ("attn_k", "k_proj"), ("attn_v", "v_proj"),
                           ("attn_output", "o_proj")):
                yield b + gn + ".weight", sa + hn + ".weight", None
            yield b + "attn_q_norm.weight", sa + "q_norm.weight", lambda a: a - 1
            yield b + "attn_k_norm.weight", sa + "k_norm.weight", lambda a: a - 1
        m = hf + "mlp."
        if moe:
            yield b + "ffn_gate_inp.weight", m + "gate.weight", None
            yield (b + "ffn_gate_exps.weight", b + "ffn_up_exps.weight"), \
                m + "experts.gate_up_proj", lambda gt, up: np.concatenate([gt, up], axis=1)
            yield b + "ffn_down_exps.weight", m + "experts.down_proj", None
            yield b + "ffn_gate_inp_shexp.weight", m + "shared_expert_gate.weight", \
                lambda a: a.reshape(1, E)
            for p in ("gate", "up", "down"):
                yield b + f"ffn_{p}_shexp.weight", m + f"shared_expert.{p}_proj.weight", None
        else:
            for p in ("gate", "up", "down"):
                yield b + f"ffn_{p}.weight", m + f"{p}_proj.weight", None

    def plan():
        yield "token_embd.weight", "model.embed_tokens.weight", None
        yield "output_norm.weight", "model.norm.weight", lambda a: a - 1
        if not tied:
            yield "output.weight", "lm_head.weight", None
        for il in range(n_layer):
            yield from layer(il, f"model.layers.{il}.")
        for j in range(n_nextn):
            il = n_layer + j
            yield from layer(il, f"mtp.layers.{j}.")
            b = f"blk.{il}.nextn."
            yield b + "eh_proj.weight", "mtp.fc.weight", None
            yield b + "enorm.weight", "mtp.pre_fc_norm_embedding.weight", lambda a: a - 1
            yield b + "hnorm.weight", "mtp.pre_fc_norm_hidden.weight", lambda a: a - 1
            yield b + "shared_head_norm.weight", "mtp.norm.weight", lambda a: a - 1

    return cfg, plan()


def _gpt_oss(g, md, arch, yarn_truncate):
    n_layer = int(_key(md, arch, "block_count"))
    tied = "output.weight" not in g.tensors
    swa = int(_key(md, arch, "attention.sliding_window"))
    rope = {"rope_type": "default", "rope_theta": float(_key(md, arch, "rope.freq_base"))}
    if md.get(f"{arch}.rope.scaling.type") == "yarn":
        # gpt-oss's published config: beta_fast 32, beta_slow 1, truncate false (the correction
        # range's bounds not rounded); yarn_truncate: rounded outward (floor / ceil), as
        # llama.cpp's ggml_rope_yarn_corr_dims and zinc do
        rope.update({"rope_type": "yarn", "factor": float(_key(md, arch, "rope.scaling.factor")),
                     "beta_fast": 32.0, "beta_slow": 1.0, "truncate": bool(yarn_truncate),
                     "original_max_position_embeddings":
                         int(_key(md, arch, "rope.scaling.original_context_length"))})
    cfg = {
        "model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"],
        "vocab_size": int(g.tensors["token_embd.weight"][0][0]),
        "hidden_size": int(_key(md, arch, "embedding_length")),
        "intermediate_size": int(_key(md, arch, "expert_feed_forward_length")),
        "num_hidden_layers": n_layer,
        "num_attention_heads": int(_key(md, arch, "attention.head_count")),
        "num_key_value_heads": int(_key(md, arch, "attention.head_count_kv")),
        "head_dim": int(_key(md, arch, "attention.key_length")),
        "num_local_experts": int(_key(md, arch, "expert_count")),
        "num_experts_per_tok": int(_key(md, arch, "expert_used_count")),
        "sliding_window": swa,
        # llama.cpp's gpt-oss: sliding-window attention on even layers (swa pattern 2)
        "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention"
                        for i in range(n_layer)],
        "max_position_embeddings": int(_key(md, arch, "context_length")),
        "rms_norm_eps": float(_key(md, arch, "attention.layer_norm_rms_epsilon")),
        "rope_parameters": rope, "tie_word_embeddings": tied, "attention_bias": True,
        "hidden_act": "silu", "dtype": "float32",
    }

    def interleave(gt, up):  # (E, F, H) x2 -> (E, H, 2F), gate at even, up at odd columns
        out = np.empty((gt.shape[0], gt.shape[2], 2 * gt.shape[1]), np.float32)
        out[:, :, 0::2] = gt.transpose(0, 2, 1)
        out[:, :, 1::2] = up.transpose(0, 2, 1)
        return out

    def interleave_bias(gt, up):
        out = np.empty((gt.shape[0], 2 * gt.shape[1]), np.float32)
        out[:, 0::2], out[:, 1::2] = gt, up
        return out

    def plan():
        yield "token_embd.weight", "model.embed_tokens.weight", None
        yield "output_norm.weight", "model.norm.weight", None
        if not tied:
            yield "output.weight", "lm_head.weight", None
        for il in range(n_layer):
            b, hf = f"blk.{il}.", f"model.layers.{il}."
            yield b + "attn_norm.weight", hf + "input_layernorm.weight", None
            yield b + "post_attention_norm.weight", hf + "post_attention_layernorm.weight", None
            for gn, hn in (("attn_q", "q_proj"), ("attn_k", "k_proj"), ("attn_v", "v_proj"),
                           ("attn_output", "o_proj")):
                yield b + gn + ".weight", hf + "self_attn." + hn + ".weight", None
                yield b + gn + ".bias", hf + "self_attn." + hn + ".bias", None
            yield b + "attn_sinks.weight", hf + "self_attn.sinks", None
            m = hf + "mlp."
            yield b + "ffn_gate_inp.weight", m + "router.weight", None
            yield b + "ffn_gate_inp.bias", m + "router.bias", None
            yield (b + "ffn_gate_exps.weight", b + "ffn_up_exps.weight"), \
                m + "experts.gate_up_proj", interleave
            yield (b + "ffn_gate_exps.bias", b + "ffn_up_exps.bias"), \
                m + "experts.gate_up_proj_bias", interleave_bias
            yield b + "ffn_down_exps.weight", m + "experts.down_proj", \
                lambda a: np.ascontiguousarray(a.transpose(0, 2, 1))
            yield b + "ffn_down_exps.bias", m + "experts.down_proj_bias", None

    return cfg, plan()


ARCHS = {"qwen35": _qwen35, "qwen35moe": _qwen35, "gpt-oss": _gpt_oss}


def convert_tensors(g, yarn_truncate=False):
    """(config dict, iterator of (hf_name, f32 numpy array)) for the GGUF opened as `g`. Every
    tensor of the file must be consumed by the mapping, else ValueError names the leftovers.
    yarn_truncate (gpt-oss): write YaRN's truncate = true (llama.cpp's rounding of the correction
    range) instead of the published config's false."""
    arch = g.metadata.get("general.architecture")
    if arch not in ARCHS:
        raise ValueError(f"{g.path}: architecture {arch!r} not supported (one of "
                         f"{', '.join(ARCHS)})")
    cfg, plan = ARCHS[arch](g, g.metadata, arch, yarn_truncate)

    def tensors():
        used = set()
        for src, dst, fn in plan:
            srcs = src if isinstance(src, tuple) else (src,)
            if any(s not in g.tensors for s in srcs):
                if all(s not in g.tensors for s in srcs) and dst.startswith("mtp.") and \
                        "shared_head_norm" in srcs[0]:
                    continue  # optional in llama.cpp's NextN block
                missing = [s for s in srcs if s not in g.tensors]
                raise ValueError(f"{g.path}: tensor {missing[0]} missing (needed for {dst})")
            arrs = [g.tensor(s) for s in srcs]
            used.update(srcs)
            a = fn(*arrs) if fn else arrs[0]
            yield dst, np.ascontiguousarray(a, dtype=np.float32)
        left = sorted(set(g.tensors) - used)
        if left:
            raise ValueError(f"{g.path}: {len(left)} tensors not mapped to HF names: "
                             f"{', '.join(left[:8])}")
    return cfg, tensors()


def convert(path, out_dir, reader="auto", yarn_truncate=False):
    """Write OUT_DIR/config.json and OUT_DIR/model.safetensors; returns the config dict."""
    g = open_gguf(path, reader)
    cfg, tensors = convert_tensors(g, yarn_truncate)
    state = dict(tensors)
    from safetensors.numpy import save_file
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    save_file(state, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    return cfg


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("out_dir")
    ap.add_argument("--reader", choices=["auto", "gguf", "mini"], default="auto")
    ap.add_argument("--yarn-truncate", action="store_true",
                    help="gpt-oss: YaRN truncate = true (llama.cpp's and zinc's rounding of the "
                         "correction range) instead of the published config's false")
    a = ap.parse_args()
    try:
        cfg = convert(a.gguf, a.out_dir, a.reader, a.yarn_truncate)
    except (ValueError, OSError, ImportError) as e:
        print(f"gguf-to-hf: {e}", file=sys.stderr)
        return 2
    print(f"gguf-to-hf: {a.gguf} -> {a.out_dir} ({cfg['architectures'][0]}, "
          f"{cfg['num_hidden_layers']} layers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
