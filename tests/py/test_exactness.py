"""The CPU tier computes the same bits on every kernel path (docs/exactness.md).

Every float operation on the path from a token to its logits follows the canonical order of
src/backend/canon.h (and src/quant/canon_dot.h for the matrix products), so the scalar reference
kernels (ZINC_SIMD=0), the AVX2 kernels (ZINC_AVX512=0), the AVX-512 VNNI kernels (the default
where the CPU has them), any thread count and any prefill chunk size give bitwise-identical
logits: tests/tools/exact_digest hashes the raw bytes of every step's logits. The CUDA tier follows
the same order (tests/cuda/test_exact.cpp checks it on a GPU), so this is also what makes the CUDA
tier's greedy text equal the CPU tier's.

A test fails if any one operation on any path rounds differently: e.g. a libm call instead of
canon::exp, a different reduction tree, or a fused multiply-add the other path does not do.
"""
import json
import os
import subprocess

import pytest

SRC = os.environ.get("ZINC_SOURCE_DIR",
                     os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ.get("ZINC_BUILD_DIR", os.path.join(SRC, "build"))
ZINC = os.path.join(BUILD, "zinc")
TOOL = os.path.join(BUILD, "exact_digest")
MODELS = os.path.join(SRC, "models")
SMOL = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")
GEMMA = os.path.join(MODELS, "gemma-3-270m-q4_k_m.gguf")
QWEN = os.path.join(MODELS, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")

PROMPT = "The quick brown fox jumps over the lazy dog. In 1905, Albert Einstein"


def need(path):
    if not os.path.exists(path):
        pytest.skip(f"{path} missing (build zinc / fetch models)")


def digest(model, env=None, n=8, n_batch=512, threads=2, prompt=PROMPT):
    need(TOOL)
    e = dict(os.environ)
    for k in ("ZINC_SIMD", "ZINC_AVX512"):
        e.pop(k, None)
    e.update(env or {})
    r = subprocess.run([TOOL, "--model", model, "--prompt", prompt, "--n", str(n),
                        "--n-batch", str(n_batch), "--threads", str(threads)],
                       capture_output=True, text=True, timeout=600, env=e)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def synth_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("exact"))


def synth(d, preset, typ):
    need(ZINC)
    need(SMOL)
    out = os.path.join(d, f"{preset}.{typ}.gguf")
    if not os.path.exists(out):
        r = subprocess.run([ZINC, "synth", "--preset", preset, "--type", typ, "--seed", "3",
                            "--vocab-from", SMOL, "-o", out],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
    return out


VARIANTS = {
    "scalar reference (ZINC_SIMD=0)": ({"ZINC_SIMD": "0"}, {}),
    "AVX2 (ZINC_AVX512=0)": ({"ZINC_AVX512": "0"}, {}),
    "1 thread": ({}, {"threads": 1}),
    "prefill in chunks of 5": ({}, {"n_batch": 5}),
}


def check_all_paths(model, n=8):
    base = digest(model, n=n)
    assert len(base["greedy"]) == n
    for name, (env, kw) in VARIANTS.items():
        other = digest(model, env=env, n=n, **{k: v for k, v in kw.items()})
        assert other["digest"] == base["digest"], (
            f"{os.path.basename(model)}: {name} gives other logits bits than the default path: "
            f"first logits {other['first']} vs {base['first']}, greedy {other['greedy']} vs "
            f"{base['greedy']}")


def test_smollm2_q4_1_every_path_same_bits():
    need(SMOL)
    check_all_paths(SMOL, n=12)


def test_gemma3_q4_k_m_every_path_same_bits():
    need(GEMMA)
    check_all_paths(GEMMA, n=6)


def test_qwen2_q4_k_m_every_path_same_bits():
    need(QWEN)
    check_all_paths(QWEN, n=4)


@pytest.mark.parametrize("preset,typ", [
    ("llama-tiny", "q4_0"), ("llama-tiny", "q8_0"), ("llama-tiny", "bf16"),
    ("qwen3-tiny", "q4_k_m"), ("gemma3-tiny", "q4_k_m"), ("llama-tiny", "q4_k_m"),
])
def test_synthetic_every_path_same_bits(synth_dir, preset, typ):
    check_all_paths(synth(synth_dir, preset, typ), n=8)


def test_digest_is_deterministic_and_discriminating():
    """The digest is not blind: a different prompt (other logits) changes it, and the same run
    twice gives the same digest."""
    need(SMOL)
    a = digest(SMOL, n=2)
    b = digest(SMOL, n=2)
    c = digest(SMOL, n=2, prompt=PROMPT + ".")
    assert a["digest"] == b["digest"]
    assert a["digest"] != c["digest"]
