"""gpt-oss (issue 15): zinc's CPU tier on `zinc synth --preset gpt-oss-tiny` against llama.cpp
(llama-cpp-python 0.3.36, the oracle; its openai-moe graph: Q/K/V/O biases, attention sinks,
a sliding window of 16 on even layers and full attention on odd ones, YaRN RoPE (factor 8 over
512 positions), router with bias, top-2 of 8 experts weighted by the softmax over the selected
logits, MXFP4 experts with per-expert biases, swiglu_oai).

Checks:
  * the file has the real model's structure (MXFP4 experts, biases, sinks, the expert and YaRN
    keys), so the full-size gpt-oss-20b preset is the same layout;
  * logits: at the first 8 prompt positions llama.cpp's top-20 logits within the golden
    tolerance (tests/py/test_model_goldens.py's compare());
  * teacher-forced top-1 along llama.cpp's own greedy continuation, 64 steps, at two prompt
    lengths (a short one inside the window of 16 and one of 200+ tokens, past the window): at
    least AGREE_MIN agreeing, at most MAX_JUMPS disagreements that are not near-ties;
  * batched equal to alone, bit for bit (CpuRunner.BatchedEqualsAloneBitForBitEnvModel);
  * the experts alone (attention output zeroed): logits equal to llama.cpp's up to float noise;
  * bad input: a file without gpt-oss.expert_count is refused with an error naming the key.
"""
import os
import shutil
import subprocess

import pytest

from moe_oracle import missing_expert_count, teacher_forced, tokenize
from test_model_goldens import BUILD, report  # noqa: F401
from test_synth import need, synth

N_STEPS = 64
# Measured 2026-12-02: 7-token prompt 59/64 (5 differences: 3 near-ties, steps 59 and 63 not),
# 209-token prompt 59/64 (all 5 near-ties). The non-near-tie steps are isolated single-step jumps
# (the engines agree again at the next step), most likely a router near-tie sending that token to
# another expert in one engine (top-2 of 8 on random weights; not verified per step), which moves
# the logits by ~1.4; the MoE path alone is checked to float noise by
# test_experts_match_llama_cpp_without_attention.
AGREE_MIN = 0.88
MAX_JUMPS = 3
SHORT = "Hello world, this is a test"
LONG = ("The quick brown fox jumps over the lazy dog while the experts route every token. " * 13)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return str(tmp_path_factory.mktemp("gptoss"))


@pytest.fixture(scope="module")
def tiny(tmp):
    return synth(tmp, "gpt-oss-tiny", "q8_0")


def test_tiny_has_the_gpt_oss_structure(tiny):
    gguf = pytest.importorskip("gguf")
    T = gguf.GGMLQuantizationType
    r = gguf.GGUFReader(tiny)
    f = r.fields
    assert f["general.architecture"].contents() == "gpt-oss"
    assert f["gpt-oss.expert_count"].contents() == 8
    assert f["gpt-oss.expert_used_count"].contents() == 2
    assert f["gpt-oss.attention.sliding_window"].contents() == 16
    assert f["gpt-oss.rope.scaling.type"].contents() == "yarn"
    assert f["gpt-oss.rope.scaling.original_context_length"].contents() == 512
    t = {x.name: x for x in r.tensors}
    for il in range(4):
        b = f"blk.{il}."
        assert t[b + "ffn_gate_exps.weight"].tensor_type == T.MXFP4
        assert list(t[b + "ffn_down_exps.weight"].shape) == [256, 256, 8]
        assert list(t[b + "ffn_gate_exps.bias"].shape) == [256, 8]
        assert list(t[b + "attn_sinks.weight"].shape) == [8]
        for n in ("attn_q.bias", "attn_output.bias", "ffn_gate_inp.bias", "post_attention_norm.weight"):
            assert b + n in t, n
        assert b + "ffn_norm.weight" not in t


@pytest.mark.parametrize("text", [SHORT, LONG], ids=["short", "long"])
def test_matches_llama_cpp(tiny, text, report):  # noqa: F811
    n = teacher_forced("gpt-oss-tiny", tiny, text, report, N_STEPS, AGREE_MIN, MAX_JUMPS)
    if text is LONG:
        assert n >= 150, n
    else:
        assert n < 16, n

def test_experts_match_llama_cpp_without_attention(tiny, tmp):
    """The MoE path alone (router + bias, top-k then softmax, MXFP4 experts with biases,
    swiglu_oai, the weighted sum): with attn_output zeroed the attention contributes only its
    bias, and every position's logits must equal llama.cpp's up to float noise."""
    gguf = pytest.importorskip("gguf")
    np = pytest.importorskip("numpy")
    need(os.path.join(BUILD, "logits_tool"))
    out = os.path.join(tmp, "no-attention.gguf")
    shutil.copy(tiny, out)
    r = gguf.GGUFReader(out, "r+")
    for t in r.tensors:
        if t.name.endswith("attn_output.weight"):
            t.data[...] = 0  # Q8_0 blocks of zero bytes: d = 0
    del r
    toks = tokenize(out, SHORT)
    llama_cpp = pytest.importorskip("llama_cpp")
    llm = llama_cpp.Llama(model_path=out, n_ctx=512, logits_all=True, verbose=False, n_threads=2)
    llm.eval(toks)
    dump = os.path.join(tmp, "no-attention.logits")
    subprocess.run([os.path.join(BUILD, "logits_tool"), "--model", out, "--tokens",
                    ",".join(map(str, toks)), "--top-positions", str(len(toks)), "--dump-logits",
                    dump], check=True, capture_output=True)
    z = np.fromfile(dump, dtype=np.float32).reshape(len(toks), -1)
    for i in range(len(toks)):
        d = np.abs(np.asarray(llm.scores[i]) - z[i]).max()
        assert d < 0.05, f"position {i}: max |logit difference| {d}"


def test_batched_equals_alone(tiny):
    tool = os.path.join(BUILD, "test_model")
    need(tool)
    r = subprocess.run([tool, "--gtest_filter=CpuRunner.BatchedEqualsAloneBitForBitEnvModel"],
                       capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, ZINC_TEST_MODEL=tiny))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "[  PASSED  ] 1 test" in r.stdout and "SKIPPED" not in r.stdout, r.stdout[-2000:]


def test_missing_expert_count_is_a_precise_error(tiny, tmp):
    missing_expert_count(tiny, tmp, "gpt-oss")
