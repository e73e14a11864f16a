"""qwen35moe (issue 15): zinc's CPU tier on `zinc synth --preset qwen35moe-tiny` against
llama.cpp (llama-cpp-python 0.3.36, the oracle; its qwen35moe graph: the qwen35 Gated DeltaNet
hybrid (3 DeltaNet layers, 1 gated attention layer) with every FFN replaced by softmax top-2 of 8
renormalised experts plus a shared expert scaled by sigmoid(ffn_gate_inp_shexp . h)).

Checks:
  * the file has llama.cpp's qwen35moe layout (experts and shared expert in every block, the
    NextN block included);
  * logits: at the first 8 prompt positions llama.cpp's top-20 logits within the golden
    tolerance (tests/py/test_model_goldens.py's compare());
  * teacher-forced top-1 along llama.cpp's own greedy continuation, 64 steps, at two prompt
    lengths (7 and 200+ tokens): at least AGREE_MIN agreeing, at most MAX_JUMPS disagreements that
    are not near-ties;
  (batched against alone is not run here: the CPU Runner test gives no recurrent state slots;
  the engine's hybrid batching: tests/unit/engine/hybrid_engine_test.cpp.)
  * bad input: a file without qwen35moe.expert_count is refused with an error naming the key.
"""
import os
import subprocess

import pytest

from test_model_goldens import BUILD, NEAR_TIE, compare, report, run_zinc  # noqa: F401
from test_moe import llama_run, tokenize
from test_synth import need, synth

N_STEPS = 64
# Measured 2026-12-02: see the report lines (docs/architecture.md "qwen35moe").
AGREE_MIN = 0.88
MAX_JUMPS = 3
SHORT = "Hello world, this is a test"
LONG = ("The quick brown fox jumps over the lazy dog while the experts route every token. " * 13)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return str(tmp_path_factory.mktemp("qwen35moe"))


@pytest.fixture(scope="module")
def tiny(tmp):
    return synth(tmp, "qwen35moe-tiny", "q8_0")


def test_tiny_has_the_qwen35moe_structure(tiny):
    gguf = pytest.importorskip("gguf")
    T = gguf.GGMLQuantizationType
    r = gguf.GGUFReader(tiny)
    f = r.fields
    assert f["general.architecture"].contents() == "qwen35moe"
    assert f["qwen35moe.expert_count"].contents() == 8
    assert f["qwen35moe.expert_used_count"].contents() == 2
    assert f["qwen35moe.expert_shared_feed_forward_length"].contents() == 128
    t = {x.name: x for x in r.tensors}
    for il in range(5):  # 4 layers and the NextN block
        b = f"blk.{il}."
        assert list(t[b + "ffn_down_exps.weight"].shape) == [128, 256, 8]
        assert t[b + "ffn_gate_inp.weight"].tensor_type == T.F32
        for n in ("ffn_gate_inp_shexp.weight", "ffn_gate_shexp.weight", "ffn_up_shexp.weight",
                  "ffn_down_shexp.weight"):
            assert b + n in t, n
        assert b + "ffn_gate.weight" not in t


@pytest.mark.parametrize("text", [SHORT, LONG], ids=["short", "long"])
def test_matches_llama_cpp(tiny, text, report):  # noqa: F811
    need(os.path.join(BUILD, "logits_tool"))
    toks = tokenize(tiny, text)
    if text is LONG:
        assert len(toks) >= 150, len(toks)
    else:
        assert len(toks) < 16, len(toks)
    top, greedy, step_top = llama_run(tiny, toks, N_STEPS)
    prompt = {"text": text, "tokens": toks, "top_logits": top, "greedy": greedy,
              "greedy_top": step_top}
    union = sorted({i for pos in top for i, _ in pos})
    z = run_zinc(tiny, toks, N_STEPS, union, forced=greedy)
    compare("qwen35moe-tiny", prompt, z, report)
    agree, jumps = 0, []
    for s, g in enumerate(greedy):
        pick = z["forced_top"][s][0][0]
        if pick == g:
            agree += 1
            continue
        d = dict((t, v) for t, v in step_top[s])
        margin = step_top[s][0][1] - d.get(pick, -1e30)
        if margin < NEAR_TIE:
            report.append(f"qwen35moe-tiny {len(toks)}-token prompt: near-tie at step {s} "
                          f"(margin {margin:.4f})")
        else:
            jumps.append(s)
    report.append(f"qwen35moe-tiny {len(toks)}-token prompt: teacher-forced top-1 {agree}/{N_STEPS}, "
                  f"steps where zinc's pick is not a llama.cpp near-tie: {jumps}")
    assert len(jumps) <= MAX_JUMPS, (f"qwen35moe-tiny {len(toks)}-token prompt: at steps {jumps} zinc "
                                     "picks a token llama.cpp does not have near its top")
    assert agree >= AGREE_MIN * N_STEPS, f"{agree}/{N_STEPS} teacher-forced steps agree"


def test_missing_expert_count_is_a_precise_error(tiny, tmp):
    need(os.path.join(BUILD, "logits_tool"))
    data = open(tiny, "rb").read()
    key = b"qwen35moe.expert_count"
    assert data.count(key) == 1
    out = os.path.join(tmp, "no-expert-count.gguf")
    with open(out, "wb") as f:  # the same bytes with the key renamed (same length)
        f.write(data.replace(key, b"qwen35moe.expert_cxunt"))
    r = subprocess.run([os.path.join(BUILD, "logits_tool"), "--model", out, "--tokens", "1,2"],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "missing metadata key qwen35moe.expert_count" in r.stderr, r.stderr
