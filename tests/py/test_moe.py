"""Mixture of experts (issue 15): zinc's CPU tier on `zinc synth --preset qwen3moe-tiny` against
llama.cpp (llama-cpp-python 0.3.36, the oracle; its qwen3moe graph is build_moe_ffn with softmax
gating, top-4 of 16 experts, renormalised weights).

Checks:
  * the file has the real model's structure: router ffn_gate_inp (n_embd, n_expert) f32 (llama.cpp
    never quantizes it), 3-D experts ffn_{gate,up}_exps (n_embd, n_ff_exp, n_expert) and
    ffn_down_exps (n_ff_exp, n_embd, n_expert), and the expert keys (the qwen3-30b-a3b preset,
    ~17 GB, is for the GPU machine: docs/cuda.md);
  * logits: at the first 8 prompt positions llama.cpp's top-20 logits within the golden tolerance
    (|d| <= 1.0 + 0.06 |logit|, tests/py/test_model_goldens.py's compare());
  * teacher-forced top-1 along llama.cpp's own greedy continuation, 64 steps, at two prompt
    lengths (14 and 225 tokens): every disagreement must be a near-tie (llama.cpp's top-2 margin
    < NEAR_TIE) and at least AGREE_MIN of the steps must agree (see AGREE_MIN for the measured
    numbers and why not 99 %);
  * batched equal to alone, bit for bit (the CPU Runner, tests/unit/model/runner_test.cpp's
    batched_equals_alone on this file through ZINC_TEST_MODEL);
  * bad input: a file without qwen3moe.expert_count is refused with an error naming the key.
"""
import os
import subprocess

import pytest

from moe_oracle import missing_expert_count, teacher_forced
from test_model_goldens import BUILD, report  # noqa: F401
from test_synth import need, synth

N_STEPS = 64
# Teacher-forced top-1 agreement per prompt. Measured 59/64 (short) and 62/64 (long): every
# disagreement is at a near-tie of llama.cpp itself (its top-2 margin 0.01-0.2), the same noise
# floor as the dense models (qwen3-tiny: 63/64 and 64/64 on the same prompts), plus the MoE's own:
# where a row's k-th and (k+1)-th expert probabilities are within the engines' shared packing
# noise the two engines can route it differently, which moves that step's logits by up to ~0.7
# (seen at 3 of 128 steps). So the bar here is: all disagreements are near-ties, and at least
# 90 % agreement; the 99 % is not met on these random weights (docs/architecture.md).
AGREE_MIN = 0.90
SHORT = "Hello world, this is a test of the synthetic mixture of experts model"
LONG = ("The quick brown fox jumps over the lazy dog while the experts route every token. " * 14)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return str(tmp_path_factory.mktemp("moe"))


@pytest.fixture(scope="module")
def tiny(tmp):
    return synth(tmp, "qwen3moe-tiny", "q4_k_m")


def test_tiny_has_the_qwen3moe_structure(tiny):
    gguf = pytest.importorskip("gguf")
    T = gguf.GGMLQuantizationType
    r = gguf.GGUFReader(tiny)
    f = r.fields
    assert f["general.architecture"].contents() == "qwen3moe"
    assert f["qwen3moe.expert_count"].contents() == 16
    assert f["qwen3moe.expert_used_count"].contents() == 4
    assert f["qwen3moe.expert_feed_forward_length"].contents() == 256
    t = {x.name: x for x in r.tensors}
    assert "blk.0.ffn_gate.weight" not in t
    for il in range(4):
        b = f"blk.{il}."
        assert list(t[b + "ffn_gate_inp.weight"].shape) == [256, 16]
        assert t[b + "ffn_gate_inp.weight"].tensor_type == T.F32
        assert list(t[b + "ffn_gate_exps.weight"].shape) == [256, 256, 16]
        assert list(t[b + "ffn_up_exps.weight"].shape) == [256, 256, 16]
        assert list(t[b + "ffn_down_exps.weight"].shape) == [256, 256, 16]
        assert t[b + "ffn_gate_exps.weight"].tensor_type == T.Q4_K
        assert b + "attn_q_norm.weight" in t


@pytest.mark.parametrize("text", [SHORT, LONG], ids=["short", "long"])
def test_matches_llama_cpp(tiny, text, report):  # noqa: F811
    n = teacher_forced("qwen3moe-tiny", tiny, text, report, N_STEPS, AGREE_MIN, max_jumps=0)
    if text is LONG:
        assert n >= 150, n


def test_batched_equals_alone(tiny):
    tool = os.path.join(BUILD, "test_model")
    need(tool)
    r = subprocess.run([tool, "--gtest_filter=CpuRunner.BatchedEqualsAloneBitForBitEnvModel"],
                       capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, ZINC_TEST_MODEL=tiny))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "[  PASSED  ] 1 test" in r.stdout and "SKIPPED" not in r.stdout, r.stdout[-2000:]


def test_missing_expert_count_is_a_precise_error(tiny, tmp):
    missing_expert_count(tiny, tmp, "qwen3moe")
