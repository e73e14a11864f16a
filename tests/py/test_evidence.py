"""Runtime evidence from the `zinc` command (issue 6), on the CPU tier, so it runs in CI.

The evidence line (docs/runtime.md) must not be able to claim work that did not happen:
  * ops counted = the ops the architecture's forward issues, computed here from the GGUF's
    block_count (read with the gguf package) and the steps the run reports;
  * ZINC_SKIP_LAYERS really skips (the text changes), removes exactly those layers' ops and
    reports shortcut_free=false;
  * ZINC_VALIDATE runs the CPU oracle beside the tier: clean runs promote trust, a fault injected
    with the test-only ZINC_TEST_CORRUPT is named by step, layer and op, and with
    ZINC_VALIDATE_STRICT=1 the run finishes on the oracle with the fallback counted and the clean
    text delivered;
  * tier selection says why in one line; a bad ZINC_TIER or an impossible --tier cuda is one error
    line.
"""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

gguf = pytest.importorskip("gguf")

BUILD = Path(os.environ.get("ZINC_BUILD_DIR", "build")).resolve()
SOURCE = Path(os.environ.get("ZINC_SOURCE_DIR", Path(__file__).resolve().parents[2]))
ZINC = BUILD / "zinc"
SMOL = SOURCE / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA = SOURCE / "models" / "gemma-3-270m-q4_k_m.gguf"

STATS_RE = re.compile(r"^prefill: (\d+) tok in [0-9.]+ s \([0-9.]+ tok/s\) \| "
                      r"decode: (\d+) tok in [0-9.]+ s \([0-9.]+ tok/s\)$")
RUNTIME_ENV = ("ZINC_TIER", "ZINC_VALIDATE", "ZINC_VALIDATE_STRICT", "ZINC_VALIDATE_TOL",
               "ZINC_SKIP_LAYERS", "ZINC_CPU_OPS", "ZINC_TEST_CORRUPT")


def need(path):
    if not path.exists():
        pytest.skip(f"{path} missing (scripts/fetch-models)")
    return path


def zinc(*args, env=None, timeout=600):
    if not ZINC.exists():
        pytest.skip(f"{ZINC} not built")
    e = {k: v for k, v in os.environ.items() if k not in RUNTIME_ENV}
    e.update(env or {})
    return subprocess.run([str(ZINC), *map(str, args)], capture_output=True, timeout=timeout,
                          env=e)


def parse_evidence(line):
    """'evidence: tier=cpu steps=3 ops=cuda:0,cpu:10 ...' -> dict (quoted values unquoted)."""
    assert line.startswith("evidence: "), line
    out = {}
    for m in re.finditer(r'(\w+)=("[^"]*"|\S+)', line[len("evidence: "):]):
        out[m.group(1)] = m.group(2).strip('"')
    for k in ("ops", "bytes"):
        out[k] = dict(kv.split(":", 1) for kv in out[k].split(","))
    return out


def run_generate(model, env=None, n=6, prompt="The capital of France is", extra=()):
    r = zinc("-m", need(model), "--prompt", prompt, "-n", n, "--temp", "0", "-t", "2",
             "--no-echo", *extra, env=env)
    err = r.stderr.decode()
    assert r.returncode == 0, err
    lines = err.strip().splitlines()
    stats = STATS_RE.match(lines[-1])
    assert stats, lines[-1]
    ev = [ln for ln in lines if ln.startswith("evidence: ")]
    assert len(ev) == 1, err
    tier = [ln for ln in lines if ln.startswith("zinc: tier ")]
    assert len(tier) == 1, err
    return r.stdout.decode(), parse_evidence(ev[0]), int(stats.group(1)), int(stats.group(2)), tier[0]


def arch_info(model):
    r = gguf.GGUFReader(str(model))
    arch = str(bytes(r.fields["general.architecture"].parts[-1]), "utf-8")
    n_layer = int(r.fields[f"{arch}.block_count"].parts[-1][0])
    return arch, n_layer


def ops_per_step(arch, n_layer_run, n_rows, n_out=1):
    """The ops one step of the forward issues on the CPU tier (docs/runtime.md), from the
    architecture alone: embedding; per layer 2 norms (Gemma 3: 4, with the post-norms), 4
    projection calls (QKV together, output, gate+up together, down), RoPE/KV, attention, GLU,
    2 residual adds; the output-row gather when not every row is an output row; final norm and
    LM head."""
    per_layer = (4 if arch == "gemma3" else 2) + 4 + 1 + 1 + 1 + 2
    return 1 + per_layer * n_layer_run + (1 if n_out != n_rows else 0) + (2 if n_out else 0)


@pytest.mark.parametrize("model", [SMOL, GEMMA], ids=["smollm2", "gemma3"])
def test_cpu_ops_equal_the_architectures_ops(model):
    arch, n_layer = arch_info(need(model))
    _, ev, n_prompt, n_decode, tier = run_generate(model, extra=("--tier", "cpu"))
    assert ev["tier"] == "cpu" and "--tier=cpu" in tier, tier
    assert int(ev["steps"]) == 1 + n_decode  # one prefill chunk (< 512 tokens), then decodes
    want = ops_per_step(arch, n_layer, n_prompt) + n_decode * ops_per_step(arch, n_layer, 1)
    assert int(ev["ops"]["cpu"]) == want
    assert int(ev["ops"]["cuda"]) == 0
    assert ev["bytes"]["cuda"] == "0B"
    assert ev["cpu_fallback"] == "0"
    assert ev["shortcut_free"] == "true"
    assert ev["validated"] == "off"


def test_skip_layers_is_reported_and_really_skips():
    arch, n_layer = arch_info(need(SMOL))
    clean, ev0, _, _, _ = run_generate(SMOL, extra=("--tier", "cpu"))
    out, ev, n_prompt, n_decode, _ = run_generate(SMOL, env={"ZINC_SKIP_LAYERS": "2,4,6"},
                                                  extra=("--tier", "cpu"))
    assert ev0["shortcut_free"] == "true"
    assert ev["shortcut_free"] == "false"
    assert "layer 2 skipped" in ev["shortcuts"] and "layer 6 skipped" in ev["shortcuts"]
    want = ops_per_step(arch, n_layer - 3, n_prompt) + n_decode * ops_per_step(arch, n_layer - 3, 1)
    assert int(ev["ops"]["cpu"]) == want
    assert out != clean


def test_tier_auto_says_why_and_env_selects():
    need(SMOL)
    _, ev, _, _, tier = run_generate(SMOL, n=2)
    assert tier.startswith("zinc: tier ") and "auto" in tier
    if ev["tier"] == "cpu":
        assert "because" in tier, tier  # no usable device: the reason is given
    _, ev, _, _, tier = run_generate(SMOL, n=2, env={"ZINC_TIER": "cpu"})
    assert ev["tier"] == "cpu" and "ZINC_TIER=cpu" in tier


def test_bad_tier_is_one_error_line():
    need(SMOL)
    for args, env, needle in [(("--tier", "gpu"), {}, "--tier"),
                              ((), {"ZINC_TIER": "tpu"}, "ZINC_TIER"),
                              ((), {"ZINC_VALIDATE": "many"}, "ZINC_VALIDATE"),
                              ((), {"ZINC_TEST_CORRUPT": "l_out"}, "ZINC_TEST_CORRUPT")]:
        r = zinc("-m", SMOL, "--prompt", "Hi", "-n", "1", *args, env=env)
        err = r.stderr.decode().strip().splitlines()
        assert r.returncode == 2, (args, env, err)
        assert len(err) == 1 and err[0].startswith("zinc: error:") and needle in err[0], err


def test_tier_cuda_without_a_device_is_one_error_line():
    need(SMOL)
    chk = zinc("--check", "-m", SMOL).stdout.decode()
    tier_line = [ln for ln in chk.splitlines() if " tier: " in ln]
    assert len(tier_line) == 1, chk
    r = zinc("-m", SMOL, "--prompt", "Hi", "-n", "1", "--tier", "cuda")
    if "tier: cuda:" in tier_line[0]:  # a usable device (tests/py/test_evidence_cuda.py)
        assert r.returncode == 0, r.stderr.decode()
        assert "evidence: tier=cuda" in r.stderr.decode()
        return
    err = r.stderr.decode().strip().splitlines()
    assert r.returncode != 0
    assert len(err) == 1 and "cannot use the CUDA tier" in err[0], err
    # --check honours --tier: the FAIL line and status, not a silent auto.
    c = zinc("--check", "-m", SMOL, "--tier", "cuda")
    assert c.returncode == 1, c.stdout.decode()
    assert "FAIL  tier: --tier=cuda: cannot use the CUDA tier" in c.stdout.decode(), c.stdout
    c = zinc("--check", "-m", SMOL, "--tier", "bogus")
    assert c.returncode != 0 and "bogus" in (c.stdout + c.stderr).decode()


def test_validation_clean_promotes_and_does_not_change_the_text():
    clean, _, _, _, _ = run_generate(SMOL, extra=("--tier", "cpu"))
    out, ev, _, n_decode, _ = run_generate(SMOL, env={"ZINC_VALIDATE": "3"},
                                           extra=("--tier", "cpu"))
    assert out == clean
    assert ev["validated"] == "3/3" and ev["failures"] == "0" and ev["trust"] == "promoted"
    assert ev["validation"] == "bitwise"  # the CPU tier against the CPU oracle
    assert ev["cpu_fallback"] == "0"


@pytest.mark.parametrize("spec,words", [
    ("attn_out:3", "layer 3 op attn_output matmul: blk.3.attn_out"),
    ("ffn_inp:11", "layer 11 op attention residual add: blk.11.ffn_inp"),
    ("l_out:20", "layer 20 op ffn residual add: blk.20.l_out"),
    ("Vcur:0", "layer 0 op attn_v matmul: blk.0.Vcur"),
    ("ffn_glu:4", "layer 4 op glu: blk.4.ffn_glu"),
])
def test_validation_names_the_corrupted_op_and_layer(spec, words):
    clean, _, _, _, _ = run_generate(SMOL, extra=("--tier", "cpu"))
    out, ev, _, _, _ = run_generate(SMOL, env={"ZINC_VALIDATE": "2", "ZINC_TEST_CORRUPT": spec},
                                    extra=("--tier", "cpu"))
    assert ev["validated"] == "2/2" and ev["failures"] == "2" and ev["trust"] == "unpromoted"
    assert ev["first_failure"].startswith("step 0 " + words), ev["first_failure"]
    assert ev["cpu_fallback"] == "0"


def test_strict_validation_finishes_on_the_oracle():
    clean, _, _, _, _ = run_generate(SMOL, extra=("--tier", "cpu"))
    env = {"ZINC_VALIDATE": "4", "ZINC_VALIDATE_STRICT": "1", "ZINC_TEST_CORRUPT": "attn_out:3"}
    out, ev, _, n_decode, _ = run_generate(SMOL, env=env, extra=("--tier", "cpu"))
    assert out == clean  # the oracle's logits from the failing step on
    assert ev["failures"] == "1" and ev["validated"] == "1/4"
    assert int(ev["cpu_fallback"]) == 1 + n_decode
    assert ev["fallback_ops"] == f"forward:{1 + n_decode}"
    # Corrupted and not strict: the wrong values reach the text.
    bad, _, _, _, _ = run_generate(SMOL, env={"ZINC_TEST_CORRUPT": "attn_out:3"},
                                   extra=("--tier", "cpu"))
    assert bad != clean


def test_bench_json_carries_evidence_per_test():
    arch, n_layer = arch_info(need(SMOL))
    r = zinc("bench", "-m", SMOL, "-p", "8", "-n", "3", "-r", "2", "-t", "2", "--json",
             "--tier", "cpu")
    assert r.returncode == 0, r.stderr.decode()
    res = json.loads(r.stdout.decode())
    pp, tg = res
    # pp8: warm-up + 2 repetitions, one 8-row step each; tg3: warm-up (1 token) + 2 x 3 tokens.
    assert pp["evidence"]["steps"] == 3
    assert pp["evidence"]["devices"]["cpu"]["ops"] == 3 * ops_per_step(arch, n_layer, 8)
    assert tg["evidence"]["steps"] == 7
    assert tg["evidence"]["devices"]["cpu"]["ops"] == 7 * ops_per_step(arch, n_layer, 1)
    assert tg["evidence"]["devices"]["cpu"]["by_op"]["matmul"] == 7 * (4 * n_layer + 1)
    for x in res:
        assert x["evidence"]["execution_tier"] == "cpu"
        assert x["evidence"]["devices"]["cuda"]["ops"] == 0
        assert x["evidence"]["shortcut_free"] is True
    assert r.stderr.decode().strip().splitlines()[-1].startswith("evidence: tier=cpu")
