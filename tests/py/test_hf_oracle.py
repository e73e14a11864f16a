"""The second oracle of issue 15: Hugging Face `transformers` running the same random weights as
zinc's synthetic GGUF models (scripts/gguf-to-hf.py converts llama.cpp's layout back into a
transformers model directory), for qwen35 (Qwen 3.5 Gated DeltaNet hybrid), qwen35moe and
gpt-oss, on the tiny presets in f32 (`zinc synth --type f32 --seed 1`: no weight rounding, and
zinc's CPU tier does no 8-bit packing of matmul inputs for f32 weights, so both engines compute
in f32 and differ by summation order and zinc's f16 K/V cache).

Checks, for each architecture:
  * the converted directory loads into the architecture's real HF class with no missing and no
    unexpected weights (the NextN block is written as HF's mtp.*, which HF ignores at load);
  * logits of every prompt position, zinc (logits_tool, one forward) vs transformers (one
    forward), at prompt lengths 7 to 150 (qwen35: 100 and 150 are longer than the DeltaNet chunk
    of 64; gpt-oss: all but 7 are longer than the sliding window of 16):
    max |zinc - hf| <= LOGIT_TOL * max |hf|;
  * teacher-forced along transformers' own 64-token greedy continuation (generate() with its
    cache), zinc decoding one token at a time (its recurrent step / KV cache): top-1 equal to
    transformers' teacher-forced argmax at >= 99 % of the steps, every disagreement a near-tie,
    and zinc's top-5 logits at each step within LOGIT_TOL;
  * MoE: transformers runs with zinc's expert choices imposed (scripts/hf-oracle-gpu.py's
    ImposedRouting says why: random routers have near-ties that 1e-4 flips); the router logits
    agree within ROUTER_TOL and a choice differs only where transformers' margin is a near-tie.
gpt-oss is compared with YaRN's correction range rounded as llama.cpp and zinc do (truncate =
true); with the published config (truncate = false) they differ: a strict xfail.
Measured (docs/models.md has the table): 9e-5 / 1e-4 / 6e-4 of the scale, 256 / 256 / 255 of
256 steps. And, without torch (these run in CI): the converter's minimal GGUF reader (the one the
GPU script uses) gives bit-identical arrays to the gguf package's for F32, BF16, Q8_0 and MXFP4
tensors; unsupported input is refused with a precise error.

transformers and torch are not installed by scripts/install-deps (CI must not install torch):
the oracle tests carry the optional_oracle marker and skip, naming what is missing; conftest.py
does not count those skips as failures under ZINC_STRICT. To run them, a venv with
transformers 5.17 and torch (CPU): /path/to/venv/bin/python -m pytest tests/py/test_hf_oracle.py
"""
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from test_synth import SRC, TOOL, need, synth

LOGIT_TOL = 2e-3     # of the largest |logit| (measured up to 1.0e-3: gpt-oss, f16 K/V)
NEAR_TIE = 2e-3      # of max |logit|: a top-1 margin below this is decided by rounding
ROUTER_TOL = 1e-2    # max |zinc - hf| of the router logits (O(1) values; measured 3.1e-3)
AGREE_MIN = 0.99
N_STEPS = 64
LENGTHS = [7, 40, 100, 150]
# (preset, YaRN truncate in the HF config): gpt-oss is checked with truncate = true, llama.cpp's
# (and so zinc's) rounding of the YaRN correction range; with the published config's false
# transformers differs from both engines (test_gpt_oss_published_yarn_differs).
CASES = [("qwen35-tiny", False), ("qwen35moe-tiny", False), ("gpt-oss-tiny", True)]


def load_script(name):
    spec = importlib.util.spec_from_file_location(
        name.replace("-", "_").replace(".py", ""), os.path.join(SRC, "scripts", name))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def converter():
    return load_script("gguf-to-hf.py")


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return str(tmp_path_factory.mktemp("hf_oracle"))


def prompt_tokens(n, n_vocab, seed):
    return [int(t) for t in np.random.default_rng(seed).integers(0, n_vocab, n)]


def zinc_logits(path, toks, forced):
    """All prompt positions' logits (one forward) and the top-5 per forced step."""
    need(TOOL)
    dump = path + f".{len(toks)}.logits"
    cmd = [TOOL, "--model", path, "--tokens", ",".join(map(str, toks)), "--top-positions",
           str(len(toks)), "--top-k", "1", "--threads", "2", "--n-ctx",
           str(len(toks) + len(forced) + 8), "--dump-logits", dump,
           "--forced", ",".join(map(str, forced))]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    rows = np.fromfile(dump, dtype=np.float32).reshape(len(toks), out["n_vocab"])
    return rows, out["forced_top"]


# --- without torch: the readers and the converter's errors -----------------------------------

@pytest.mark.parametrize("preset,typ", [("qwen35-tiny", "f32"), ("gpt-oss-tiny", "q8_0"),
                                        ("qwen35moe-tiny", "bf16")])
def test_minimal_reader_matches_gguf_package(tmp, preset, typ):
    pytest.importorskip("gguf")
    conv = converter()
    path = synth(tmp, preset, typ)
    pkg, mini = conv.open_gguf(path, "gguf"), conv.open_gguf(path, "mini")
    assert set(pkg.tensors) == set(mini.tensors)
    types = set()
    for name in pkg.tensors:
        a, b = pkg.tensor(name), mini.tensor(name)
        assert a.shape == b.shape, name
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), f"{name}: values differ"
        types.add(mini.tensors[name][1])
    # the minimal reader has the metadata the mapping reads, and the same configs come out
    cfg_pkg, t_pkg = conv.convert_tensors(pkg)
    cfg_mini, t_mini = conv.convert_tensors(mini)
    assert cfg_pkg == cfg_mini
    names = [n for n, _ in t_mini]  # every GGUF tensor mapped (else convert_tensors raises)
    assert len(names) == len(set(names))
    expect = {"f32": {0}, "q8_0": {0, 8, 39}, "bf16": {0, 30}}[typ]
    assert types == expect, types


def test_converter_refuses_what_it_cannot_convert(tmp):
    pytest.importorskip("gguf")
    conv = converter()
    with pytest.raises(ValueError, match=r"architecture 'llama' not supported"):
        conv.convert_tensors(conv.open_gguf(synth(tmp, "llama-tiny", "q8_0"), "mini"))
    g = conv.open_gguf(synth(tmp, "qwen35-tiny", "q4_k_m"), "mini")
    with pytest.raises(ValueError, match=r"token_embd.weight has ggml type 14, which the "
                                         r"minimal reader does not"):
        dict(conv.convert_tensors(g)[1])
    r = subprocess.run([sys.executable, os.path.join(SRC, "scripts", "gguf-to-hf.py"),
                        os.path.join(tmp, "nope.gguf"), os.path.join(tmp, "out")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "nope.gguf" in r.stderr, r.stderr


# --- the oracle: transformers -----------------------------------------------------------------

def hf_modules():
    missing = [m for m in ("torch", "transformers", "safetensors")
               if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"optional oracle: {', '.join(missing)} not importable (not installed by "
                    f"scripts/install-deps; run this file with a venv holding transformers 5.17 "
                    f"and CPU torch)")
    import torch
    import transformers
    return torch, transformers


@pytest.mark.optional_oracle
@pytest.mark.parametrize("preset,yarn_truncate", CASES, ids=[c[0] for c in CASES])
def test_transformers_matches_zinc(tmp, preset, yarn_truncate):
    compare(tmp, preset, yarn_truncate)


@pytest.mark.optional_oracle
@pytest.mark.xfail(strict=True, reason=(
    "known difference: gpt-oss's published config has YaRN truncate = false (the correction "
    "range 2.51 .. 11.81 on this preset, 8.09 .. 17.40 on gpt-oss-20b, not rounded: OpenAI's "
    "reference, transformers, vLLM, SGLang); llama.cpp (0.3.36) and zinc round it to 2 .. 12 "
    "(8 .. 18). Measured: logits off by up to 0.63 of the scale at 40 tokens, llama.cpp the same. "
    "Strict: if this passes, zinc changed and docs/models.md must say so"))
def test_gpt_oss_published_yarn_differs(tmp):
    compare(tmp, "gpt-oss-tiny", False)


def compare(tmp, preset, yarn_truncate):
    torch, transformers = hf_modules()
    conv, gpu = converter(), load_script("hf-oracle-gpu.py")
    path = synth(tmp, preset, "f32")
    out_dir = os.path.join(tmp, f"{preset}.t{int(yarn_truncate)}.hf")
    cfg = conv.convert(path, out_dir, yarn_truncate=yarn_truncate)
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        out_dir, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    assert type(model).__name__ == cfg["architectures"][0]
    assert not info["missing_keys"] and not info["mismatched_keys"], info
    assert not [k for k in info["unexpected_keys"] if not k.startswith("mtp.")], info
    model.eval()
    moe = "num_experts_per_tok" in cfg
    n_vocab = cfg["vocab_size"]
    worst = worst_forced = 0.0
    agree = steps = 0
    route_diffs = []
    router_diff = 0.0
    for i, n in enumerate(LENGTHS):
        toks = prompt_tokens(n, n_vocab, seed=i)
        with torch.no_grad():  # transformers' greedy continuation: the tokens zinc is forced on
            gen = model.generate(torch.tensor([toks]), max_new_tokens=N_STEPS, do_sample=False,
                                 use_cache=True, pad_token_id=0, eos_token_id=None)
        greedy = gen[0, n:].tolist()
        assert len(greedy) == N_STEPS
        seq = toks + greedy
        with torch.no_grad():  # teacher-forced logits of prompt + continuation, one forward
            if moe:
                with gpu.ImposedRouting(torch, model, gpu.zinc_router_logits(
                        TOOL, path, seq, 2)) as imp:
                    hf = model(gen).logits[0].double().numpy()
                route_diffs += [(n,) + d for d in imp.diffs]
                router_diff = max(router_diff, imp.logit_diff)
            else:
                hf = model(gen).logits[0].double().numpy()
        zrows, forced_top = zinc_logits(path, toks, greedy)
        ref = hf[:n]
        worst = max(worst, np.abs(zrows - ref).max() / np.abs(ref).max())
        for s in range(N_STEPS):
            row = hf[n - 1 + s]
            top2 = np.argsort(-row)[:2]
            margin = row[top2[0]] - row[top2[1]]
            scale = np.abs(row).max()
            zt = forced_top[s][0][0]
            steps += 1
            if zt == top2[0]:
                agree += 1
            else:
                assert margin < NEAR_TIE * scale, (
                    f"{preset} prompt {n} step {s}: zinc picks {zt}, transformers {top2[0]} by "
                    f"a margin {margin:.2e}")
            for tid, logit in forced_top[s]:
                worst_forced = max(worst_forced, abs(logit - row[tid]) / scale)
    ties = ", ".join(f"prompt {n} layer {il} token {t} margin {m:.1e}"
                     for n, il, t, m in route_diffs)
    print(f"PRINT {preset} (yarn truncate {yarn_truncate}): prompt logits max|zinc-hf|/max|hf| "
          f"= {worst:.2e}, decode-step top-5 {worst_forced:.2e}; teacher-forced top-1 "
          f"{agree}/{steps}" + (f"; router logits max|zinc-hf| {router_diff:.1e}, expert "
                                f"choices differing: {len(route_diffs)} ({ties})" if moe else ""))
    assert router_diff <= ROUTER_TOL, f"{preset}: router logits off by {router_diff:.2e}"
    # a choice decided by less than twice the engines' router-logit difference is a near-tie
    assert all(m < 2 * router_diff for *_, m in route_diffs), \
        f"{preset}: zinc chose other experts than transformers where it is no near-tie: {ties}"
    assert worst <= LOGIT_TOL, f"{preset}: prompt logits off by {worst:.2e} of the scale"
    assert worst_forced <= LOGIT_TOL, f"{preset}: decode logits off by {worst_forced:.2e}"
    assert agree >= AGREE_MIN * steps, f"{preset}: {agree}/{steps} steps agree"


@pytest.mark.optional_oracle
@pytest.mark.parametrize("preset,typ,extra", [("qwen35moe-tiny", "f32", []),
                                              ("gpt-oss-tiny", "q8_0", ["--yarn-truncate"])])
def test_gpu_script_runs_on_cpu(tmp, preset, typ, extra):
    # scripts/hf-oracle-gpu.py with --device cpu: its own reader (MXFP4 and Q8_0 for the gpt-oss
    # file), the in-memory model build, imposed routing and its PASS line
    hf_modules()
    need(TOOL)
    path = synth(tmp, preset, typ)
    r = subprocess.run([sys.executable,
                        os.path.join(SRC, "scripts", "hf-oracle-gpu.py"), path, "--device", "cpu",
                        "--threads", "2", "--prompts", "7,40", "--steps", "16",
                        "--logits-tool", TOOL] + extra, capture_output=True, text=True,
                       timeout=900)
    line = [x for x in r.stdout.splitlines() if x.startswith("hf-oracle: ")]
    print("PRINT", line)
    assert r.returncode == 0 and line and line[0].startswith("hf-oracle: PASS"), \
        r.stdout + r.stderr[-2000:]
