"""`zinc synth` writes GGUFs that llama.cpp (llama-cpp-python) and the `gguf` package read, with
the shapes and tensor types the presets and type recipes promise, deterministically, and on which
zinc's CPU tier agrees with llama.cpp (independent oracle).

Checks:
  * tensor names, shapes and types vs the preset table and the Q4_K_M recipe (use_more_bits);
  * the tokenizer is SmolLM2's, padded with control tokens up to the preset's vocabulary;
  * the same seed gives the same bytes with 1 and 2 threads; another seed gives other weights;
  * llama.cpp loads every tiny preset (llama, qwen3, gemma3, llama3) in q4_k_m (llama also in
    q4_0, q8_0 and bf16), and zinc's logits at llama.cpp's top-20 ids of the first prompt positions
    agree within the golden tests' tolerance (|d| <= 1.0 + 0.06 |logit|); teacher-forced on
    llama.cpp's 24 greedy tokens, zinc picks the same token except at near-ties (margin < 1.0).
"""
import hashlib
import json
import os
import subprocess

import numpy as np
import pytest

SRC = os.environ.get("ZINC_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ.get("ZINC_BUILD_DIR", os.path.join(SRC, "build"))
ZINC = os.path.join(BUILD, "zinc")
TOOL = os.path.join(BUILD, "logits_tool")
VOCAB = os.path.join(SRC, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

LOGIT_ABS_TOL = 1.0
LOGIT_REL_TOL = 0.06
NEAR_TIE = 1.0

# preset -> (arch, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, vocab (0: tokenizer's), tied)
PRESETS = {
    "llama-tiny": ("llama", 256, 4, 4, 2, 64, 768, 0, False),
    "qwen3-tiny": ("qwen3", 256, 4, 8, 2, 64, 768, 0, True),
    "gemma3-tiny": ("gemma3", 256, 7, 4, 1, 64, 768, 0, True),
    "llama3-tiny": ("llama", 256, 2, 4, 2, 64, 768, 128256, False),
}
PROMPTS = ["Hello world, this is a test of the synthetic model",
           "def add(a, b):\n    return a + b\n"]


def need(path):
    if not os.path.exists(path):
        pytest.skip(f"{path} missing (build zinc / fetch models)")


def synth(tmp, preset, typ, seed=1, threads=2):
    need(ZINC)
    need(VOCAB)
    out = os.path.join(tmp, f"{preset}.{typ}.s{seed}.t{threads}.gguf")
    if not os.path.exists(out):
        r = subprocess.run([ZINC, "synth", "--preset", preset, "--type", typ, "--seed", str(seed),
                            "-t", str(threads), "--vocab-from", VOCAB, "-o", out],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return str(tmp_path_factory.mktemp("synth"))


def use_more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


@pytest.mark.parametrize("preset", list(PRESETS))
def test_shapes_types_and_tokenizer(tmp, preset):
    gguf = pytest.importorskip("gguf")
    T = gguf.GGMLQuantizationType
    arch, E, L, H, HKV, HD, F, V, tied = PRESETS[preset]
    r = gguf.GGUFReader(synth(tmp, preset, "q4_k_m"))
    src = gguf.GGUFReader(VOCAB)
    n_tok = len(src.fields["tokenizer.ggml.tokens"].data)
    vocab = V or n_tok
    f = r.fields
    assert f["general.architecture"].contents() == arch
    assert f[f"{arch}.embedding_length"].contents() == E
    assert f[f"{arch}.block_count"].contents() == L
    assert f[f"{arch}.attention.head_count_kv"].contents() == HKV
    toks = f["tokenizer.ggml.tokens"].contents()
    assert len(toks) == vocab
    assert toks[:n_tok] == src.fields["tokenizer.ggml.tokens"].contents()
    if vocab > n_tok:
        assert toks[n_tok] == "<|synth_pad_0|>"
        assert f["tokenizer.ggml.token_type"].contents()[-1] == 3  # CONTROL
    t = {x.name: x for x in r.tensors}
    emb = t["token_embd.weight"]
    assert list(emb.shape) == [E, vocab]
    assert ("output.weight" in t) == (not tied)
    assert emb.tensor_type == (T.Q6_K if tied else T.Q4_K)
    if not tied:
        assert t["output.weight"].tensor_type == T.Q6_K
    for il in range(L):
        b = f"blk.{il}."
        assert list(t[b + "attn_q.weight"].shape) == [E, H * HD]
        assert list(t[b + "attn_k.weight"].shape) == [E, HKV * HD]
        assert list(t[b + "ffn_down.weight"].shape) == [F, E]
        want = T.Q6_K if use_more_bits(il, L) else T.Q4_K
        assert t[b + "attn_v.weight"].tensor_type == want
        assert t[b + "ffn_down.weight"].tensor_type == want
        assert t[b + "attn_q.weight"].tensor_type == T.Q4_K
        assert t[b + "attn_norm.weight"].tensor_type == T.F32
        assert (b + "attn_q_norm.weight" in t) == (arch != "llama")
        assert (b + "post_ffw_norm.weight" in t) == (arch == "gemma3")


def test_deterministic_across_threads_and_seeds(tmp):
    def sha(p):
        return hashlib.sha256(open(p, "rb").read()).hexdigest()
    a = synth(tmp, "qwen3-tiny", "q4_0", seed=5, threads=1)
    b = synth(tmp, "qwen3-tiny", "q4_0", seed=5, threads=2)
    c = synth(tmp, "qwen3-tiny", "q4_0", seed=6, threads=2)
    assert sha(a) == sha(b)
    assert sha(a) != sha(c)


def test_bad_input_is_one_line():
    need(ZINC)
    for args in (["--preset", "nope", "-o", "/tmp/x.gguf"],
                 ["--preset", "llama-tiny", "--type", "q3", "-o", "/tmp/x.gguf"],
                 ["--preset", "llama-tiny", "--arch", "gemma3", "-o", "/tmp/x.gguf"]):
        r = subprocess.run([ZINC, "synth"] + args, capture_output=True, text=True)
        assert r.returncode == 2
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


CASES = [("llama-tiny", t) for t in ("q4_k_m", "q4_0", "q8_0", "bf16")]
CASES += [("qwen3-tiny", "q4_k_m"), ("gemma3-tiny", "q4_k_m"), ("llama3-tiny", "q4_k_m")]


@pytest.mark.parametrize("preset,typ", CASES)
def test_llama_cpp_loads_and_agrees_with_zinc(tmp, preset, typ):
    llama_cpp = pytest.importorskip("llama_cpp")
    need(TOOL)
    path = synth(tmp, preset, typ)
    llm = llama_cpp.Llama(model_path=path, n_ctx=256, n_batch=256, n_ubatch=256, n_threads=2,
                          n_threads_batch=2, logits_all=True, flash_attn=False, seed=0,
                          verbose=False)
    n_predict = 24
    worst, ties, agree, steps = 0.0, 0, 0, 0
    for text in PROMPTS:
        toks = llm.tokenize(text.encode(), add_bos=True, special=False)
        llm.reset()
        llm.eval(toks)
        P = min(8, len(toks))
        tops = []
        for i in range(P):
            row = np.asarray(llm.scores[i], dtype=np.float64)
            tops.append(np.lexsort((np.arange(len(row)), -row))[:20])
        greedy, margins = [], []
        for _ in range(n_predict):
            row = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            best = np.lexsort((np.arange(len(row)), -row))[:2]
            greedy.append(int(best[0]))
            margins.append(row[best[0]] - row[best[1]])
            llm.eval([int(best[0])])
        ids = sorted({int(i) for t in tops for i in t})
        cmd = [TOOL, "--model", path, "--tokens", ",".join(map(str, toks)), "--top-positions",
               str(P), "--top-k", "20", "--n-predict", "1", "--threads", "2",
               "--n-ctx", str(len(toks) + n_predict + 8), "--logit-ids", ",".join(map(str, ids)),
               "--forced", ",".join(map(str, greedy))]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        z = json.loads(r.stdout)
        for i in range(P):
            row = np.asarray(llm.scores[i], dtype=np.float64)
            zl = dict(zip(ids, z["logits_at_ids"][i]))
            for j in tops[i]:
                d = abs(zl[int(j)] - row[j])
                worst = max(worst, d / (LOGIT_ABS_TOL + LOGIT_REL_TOL * abs(row[j])))
        for s, g in enumerate(greedy):
            steps += 1
            if z["forced_top"][s][0][0] == g:
                agree += 1
            elif margins[s] < NEAR_TIE:
                ties += 1
            else:
                pytest.fail(f"{preset} {typ} '{text[:20]}' step {s}: zinc picks "
                            f"{z['forced_top'][s][0][0]}, llama.cpp {g} by a margin {margins[s]:.3f}")
    assert worst <= 1.0, f"{preset} {typ}: logits off by {worst:.2f}x the tolerance"
    print(f"{preset} {typ}: {agree}/{steps} greedy steps equal, {ties} near-ties, worst logit "
          f"diff {worst:.2f}x tolerance")


def synth_extra(tmp, preset, typ, extra, seed=1):
    need(ZINC)
    need(VOCAB)
    out = os.path.join(tmp, f"{preset}.{typ}.s{seed}{''.join(extra)}.gguf")
    if not os.path.exists(out):
        r = subprocess.run([ZINC, "synth", "--preset", preset, "--type", typ, "--seed", str(seed),
                            "-t", "2", "--vocab-from", VOCAB, "-o", out] + extra,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        assert ("random blocks" in r.stderr) == ("--from-floats" not in extra), r.stderr
    return out


@pytest.mark.parametrize("typ", ["q4_k_m", "q4_0", "q8_0"])
def test_random_blocks_have_the_float_paths_statistics(tmp, typ):
    """Q8_0/Q4_0/Q4_K/Q6_K tensors are written as random blocks; dequantized by the `gguf`
    package (independent of zinc) each weight tensor has mean ~0 and the standard deviation of
    the quantized-float path (--from-floats), within 10%."""
    gguf = pytest.importorskip("gguf")
    from gguf import quants
    direct = {t.name: t for t in gguf.GGUFReader(synth_extra(tmp, "llama-tiny", typ, [])).tensors}
    floats = {t.name: t for t in gguf.GGUFReader(synth_extra(tmp, "llama-tiny", typ, ["--from-floats"])).tensors}
    seen = set()
    # (blk.3 attn_v / ffn_down are Q6_K in q4_k_m: use_more_bits)
    for name in ["blk.0.attn_q.weight", "blk.0.attn_v.weight", "blk.3.attn_v.weight",
                 "blk.0.ffn_down.weight", "blk.3.ffn_down.weight", "blk.3.ffn_gate.weight"]:
        a, b = direct[name], floats[name]
        assert a.tensor_type == b.tensor_type
        seen.add(a.tensor_type.name)
        x = quants.dequantize(a.data, a.tensor_type).astype(np.float64).ravel()
        y = quants.dequantize(b.data, b.tensor_type).astype(np.float64).ravel()
        assert np.isfinite(x).all()
        assert abs(x.mean()) < 0.1 * y.std(), f"{name} ({a.tensor_type.name}): mean {x.mean():.3g}"
        assert abs(x.std() / y.std() - 1) < 0.10, \
            f"{name} ({a.tensor_type.name}): sd {x.std():.4g} vs {y.std():.4g} on the float path"
        assert not np.array_equal(np.asarray(a.data), np.asarray(b.data))
    want = {"q4_k_m": {"Q4_K", "Q6_K"}, "q4_0": {"Q4_0"}, "q8_0": {"Q8_0"}}[typ]
    assert want <= seen, seen


@pytest.mark.parametrize("preset,typ", [("llama-tiny", "q4_k_m"), ("llama-tiny", "q4_0"),
                                        ("llama-tiny", "q8_0"), ("qwen3-tiny", "q4_k_m")])
def test_random_blocks_decode_is_not_degenerate(tmp, preset, typ):
    """On llama.cpp: no NaN, logits with a spread like the float path's (sd within 20%), and a
    greedy continuation that is not one repeated token."""
    llama_cpp = pytest.importorskip("llama_cpp")
    sds = []
    for extra in ([], ["--from-floats"]):
        llm = llama_cpp.Llama(model_path=synth_extra(tmp, preset, typ, extra), n_ctx=128,
                              logits_all=True, n_threads=2, verbose=False)
        toks = llm.tokenize(PROMPTS[0].encode(), add_bos=True, special=False)
        llm.eval(toks)
        sc = np.asarray(llm.scores[:len(toks)], dtype=np.float64)
        assert np.isfinite(sc).all()
        sds.append(sc.std(axis=1).mean())
        greedy = []
        for _ in range(16):
            t = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            greedy.append(t)
            llm.eval([t])
        if not extra:
            assert len(set(greedy)) >= 3, greedy
    assert 1.0 < sds[0] < 10.0, sds
    assert abs(sds[0] / sds[1] - 1) < 0.2, sds


def zinc_logits(path, toks, ids, P):
    r = subprocess.run([TOOL, "--model", path, "--tokens", ",".join(map(str, toks)),
                        "--top-positions", str(P), "--top-k", "1", "--n-predict", "1",
                        "--threads", "2", "--logit-ids", ",".join(map(str, ids))],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return np.asarray(json.loads(r.stdout)["logits_at_ids"], dtype=np.float64)


def test_gemma_final_logit_softcap_matches_llama_cpp(tmp):
    """gemma3.final_logit_softcapping = 3 (zinc synth --final-logit-softcap): llama.cpp caps the
    logits at 3 * tanh(l / 3); zinc's CPU tier must too (max |logit| <= 3, zinc's logits equal
    3 tanh(l / 3) of its uncapped ones, and they agree with llama.cpp's within 0.25 + 0.06 |l|). gemma3.attn_logit_softcapping is ignored by llama.cpp for gemma3, and by zinc."""
    llama_cpp = pytest.importorskip("llama_cpp")
    need(TOOL)
    plain = synth_extra(tmp, "gemma3-tiny", "q8_0", [])
    capped = synth_extra(tmp, "gemma3-tiny", "q8_0", ["--final-logit-softcap", "3"])
    attn = synth_extra(tmp, "gemma3-tiny", "q8_0", ["--attn-logit-softcap", "0.5"])
    P = 6
    out = {}
    for name, path in (("plain", plain), ("capped", capped), ("attn", attn)):
        llm = llama_cpp.Llama(model_path=path, n_ctx=128, logits_all=True, n_threads=2,
                              verbose=False)
        toks = llm.tokenize(PROMPTS[0].encode(), add_bos=True, special=False)[:P]
        llm.eval(toks)
        ref = np.asarray(llm.scores[:P], dtype=np.float64)
        ids = list(range(0, ref.shape[1], 3))
        z = zinc_logits(path, toks, ids, P)
        out[name] = (ref[:, ids], z)
    ref, z = out["capped"]
    assert np.abs(ref).max() <= 3.0 + 1e-6 and np.abs(z).max() <= 3.0 + 1e-6
    assert np.abs(out["plain"][1]).max() > 6.0  # the cap matters
    # llama.cpp's capped logits are its plain ones through the cap; so are zinc's; the cap is a
    # contraction, so the two engines agree at least as well as without it (and within the
    # golden tolerance).
    assert np.abs(ref - 3 * np.tanh(out["plain"][0] / 3)).max() < 1e-5
    assert np.abs(z - 3 * np.tanh(out["plain"][1] / 3)).max() < 1e-5
    d_plain = np.abs(out["plain"][1] - out["plain"][0]).max()
    assert np.abs(z - ref).max() <= d_plain + 1e-5
    assert (np.abs(z - ref) <= LOGIT_ABS_TOL * 0.25 + LOGIT_REL_TOL * np.abs(ref)).all()
    ref_a, z_a = out["attn"]
    assert np.array_equal(ref_a, out["plain"][0]) and np.array_equal(z_a, out["plain"][1])
