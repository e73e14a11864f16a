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
import pytest

from moe_oracle import missing_expert_count, teacher_forced
from test_model_goldens import report  # noqa: F401
from test_synth import synth

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
    n = teacher_forced("qwen35moe-tiny", tiny, text, report, N_STEPS, AGREE_MIN, MAX_JUMPS)
    if text is LONG:
        assert n >= 150, n
    else:
        assert n < 16, n

def test_missing_expert_count_is_a_precise_error(tiny, tmp):
    missing_expert_count(tiny, tmp, "qwen35moe")


def test_validation_is_clean_on_the_cpu_tier(tiny):
    """ZINC_VALIDATE compares every named intermediate with the CPU oracle. The shared expert's
    down projection is `ffn_shexp` (llama.cpp's name) and the sum `ffn_out`; when both were named
    ffn_out, the capture of one was compared with the other and every validated step failed."""
    import os
    import subprocess
    from test_synth import ZINC
    r = subprocess.run([ZINC, "-m", tiny, "-t", "2", "--temp", "0", "-p", SHORT, "-n", "4",
                        "--tier", "cpu"], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "ZINC_VALIDATE": "2"})
    assert r.returncode == 0, r.stderr
    assert "validated=2/2 failures=0 trust=promoted" in r.stderr, r.stderr
    assert "validation failed" not in r.stderr
