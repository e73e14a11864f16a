"""zinc's CPU forward pass against llama.cpp (the oracle), end to end.

Real models (SmolLM2 llama, Gemma 3 gemma3): compared to the committed goldens in tests/goldens/
(made by scripts/make-goldens.py with llama-cpp-python; see its docstring for exact settings).
Synthetic qwen2/qwen3: the models are written at test time by scripts/make-synthetic.py and the
oracle runs at test time through llama-cpp-python with the same settings as the goldens.

Checks (zinc is driven through build/logits_tool with the golden's prompt token ids):
  * greedy tokens identical to llama.cpp's for every prompt (64 tokens for real models). A
    divergence is accepted only at a true near-tie: zinc's pick is in llama.cpp's top-5 at that
    step with a logit less than NEAR_TIE (1.0) below llama.cpp's best. After such a divergence zinc is
    teacher-forced along llama.cpp's tokens and must pick llama.cpp's token at every remaining
    step, again except near-ties. Every exception is printed (pytest -s) and written to
    $ZINC_BUILD_DIR/model_goldens_report.txt.
  * top-20 logits at the first 8 prompt positions: for each of llama.cpp's top-20 ids,
    |zinc - llama.cpp| <= 1.0 + 0.06 * |llama.cpp logit|; where zinc's top-1 differs, llama.cpp
    must rank zinc's choice within that tolerance (for both logits) of its best.
Tolerances (docs/architecture.md explains the choice): both engines pack every matmul input to
8 bits (Q8_0/Q8_1/Q8_K, one scale per 32 or 256 values) and store K/V in f16; Gemma 3's residual
stream carries outliers in the thousands, so 8-bit packing errors of a few percent per block
compound over the layers. Measured: up to 1.09 for SmolLM2 (logits ~20-27), up to 3.2 for
Gemma 3 at a logit of -63.7 (5.0%) and 1.5 at 17.3 (8.7%, the largest relative gap). A float64
re-computation with the same quantized weights (no activation packing) is as far from llama.cpp
as it is from zinc (e.g. chat prompt position 2: float64 -17.0, llama.cpp -14.3, zinc -14.9).
"""
import json
import os
import subprocess
import sys

import pytest

SRC = os.environ.get("ZINC_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ.get("ZINC_BUILD_DIR", os.path.join(SRC, "build"))
TOOL = os.path.join(BUILD, "logits_tool")
MODELS = os.path.join(SRC, "models")
GOLDENS = os.path.join(SRC, "tests", "goldens")

# |zinc - llama.cpp| <= LOGIT_ABS_TOL + LOGIT_REL_TOL * |llama.cpp logit|
LOGIT_ABS_TOL = 1.0
LOGIT_REL_TOL = 0.06
# A "near-tie" is a margin inside the numerical noise floor shared by both engines: measured
# against a float64 re-computation (tests/py/test_model_float64.py), llama.cpp's own top-20
# logits are up to 0.5-1.1 away from exact math at 8-bit activation packing, so its choice
# between two tokens closer than that is not better founded than zinc's.
NEAR_TIE = 1.0
REAL = ["SmolLM2-135M-Instruct.Q4_1", "gemma-3-270m-q4_k_m"]


def run_zinc(model_path, tokens, n_predict, logit_ids=None, top_positions=8, forced=None):
    cmd = [TOOL, "--model", model_path, "--tokens", ",".join(map(str, tokens)),
           "--top-positions", str(top_positions), "--top-k", "20", "--n-predict", str(n_predict),
           "--threads", "2", "--n-ctx", str(len(tokens) + n_predict + 8)]
    if logit_ids:
        cmd += ["--logit-ids", ",".join(map(str, logit_ids))]
    if forced:
        cmd += ["--forced", ",".join(map(str, forced))]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, f"logits_tool failed: {r.stderr}"
    return json.loads(r.stdout)


def compare(name, prompt, z, report):
    """prompt: golden-style dict; z: logits_tool output. Returns nothing; asserts."""
    union = sorted({i for pos in prompt["top_logits"] for i, _ in pos})
    col = {t: j for j, t in enumerate(union)}
    worst = 0.0
    for p, top in enumerate(prompt["top_logits"]):
        got = z["logits_at_ids"][p]
        for tid, want in top:
            d = abs(got[col[tid]] - want)
            tol = LOGIT_ABS_TOL + LOGIT_REL_TOL * abs(want)
            worst = max(worst, d / tol)
            assert d <= tol, (f"{name} prompt {prompt['text'][:40]!r} position {p}: logit of "
                              f"token {tid} is {got[col[tid]]:.4f}, llama.cpp {want:.4f} "
                              f"(|delta| {d:.4f} > {tol:.4f})")
        z_top1 = z["prompt_top"][p][0][0]
        if z_top1 != top[0][0]:
            # The top-1 may only swap with a token whose llama.cpp logit is within the combined
            # tolerance of both logits (otherwise one of them would already have failed above).
            llama_of_z = dict((t, v) for t, v in top).get(z_top1)
            gap = None if llama_of_z is None else top[0][1] - llama_of_z
            allowed = 2 * (LOGIT_ABS_TOL + LOGIT_REL_TOL * abs(top[0][1]))
            assert gap is not None and gap < allowed, (
                f"{name} position {p}: zinc top-1 {z_top1}, llama.cpp {top[0][0]} "
                f"(llama.cpp ranks zinc's choice {gap} below its best, allowed {allowed:.3f})")
            report.append(f"{name} prompt {prompt['text'][:30]!r}: position {p} top-1 differs "
                          f"(llama.cpp gap {gap:.4f}, within tolerance)")
    report.append(f"{name} prompt {prompt['text'][:30]!r}: top-20 logits within "
                  f"{100 * worst:.0f}% of the tolerance")


def near_tie(llama_top, zinc_pick):
    """llama.cpp's gap between its best logit and its logit for zinc's pick (None: not in top-5)."""
    d = dict((t, v) for t, v in llama_top)
    return None if zinc_pick not in d else llama_top[0][1] - d[zinc_pick]


def check_greedy(name, prompt, z, forced, report):
    """Free-running greedy must match until a near-tie; from there on, zinc teacher-forced along
    llama.cpp's tokens must pick llama.cpp's token at every step except near-ties."""
    g, zg = prompt["greedy"], z["greedy"]
    label = f"{name} prompt {prompt['text'][:30]!r}"
    s = next((i for i in range(len(g)) if zg[i] != g[i]), None)
    if s is None:
        report.append(f"{label}: all {len(g)} greedy tokens identical")
        return
    gap = near_tie(prompt["greedy_top"][s], zg[s])
    assert gap is not None and gap < NEAR_TIE, (
        f"{label}: greedy diverges at step {s}: zinc {zg[s]}, llama.cpp {g[s]} (llama.cpp top-5 "
        f"{prompt['greedy_top'][s]}); zinc {zg[:s + 1]} vs llama.cpp {g[:s + 1]}")
    ties = [f"step {s} (gap {gap:.4f})"]
    for i in range(s + 1, len(g)):
        pick = forced[i][0][0]
        if pick != g[i]:
            gi = near_tie(prompt["greedy_top"][i], pick)
            assert gi is not None and gi < NEAR_TIE, (
                f"{label}: teacher-forced along llama.cpp's tokens, zinc picks {pick} at step {i} "
                f"where llama.cpp picks {g[i]} (llama.cpp top-5 {prompt['greedy_top'][i]})")
            ties.append(f"step {i} (gap {gi:.4f})")
    report.append(f"{label}: free-running greedy identical for {s} of {len(g)} tokens; "
                  f"near-tie picks at {', '.join(ties)}; all other steps identical when "
                  f"teacher-forced")


def need(path):
    if not os.path.exists(path):
        pytest.skip(f"{path} not present (scripts/fetch-models)")


@pytest.fixture(scope="module")
def report():
    """Collected exceptions and measurements; printed (pytest -s) and written to
    $ZINC_BUILD_DIR/model_goldens_report.txt so near-tie exceptions are never silent."""
    lines = []
    yield lines
    text = "\n".join(lines) + "\n"
    sys.stderr.write("\n" + text)
    try:
        with open(os.path.join(BUILD, "model_goldens_report.txt"), "w") as f:
            f.write(text)
    except OSError:
        pass


@pytest.mark.parametrize("name", REAL)
def test_real_model_matches_llama_cpp_goldens(name, report):
    model = os.path.join(MODELS, name + ".gguf")
    need(model)
    with open(os.path.join(GOLDENS, name + ".json")) as f:
        golden = json.load(f)
    assert len(golden["prompts"]) >= 5 and golden["n_predict"] >= 64
    for prompt in golden["prompts"]:
        union = sorted({i for pos in prompt["top_logits"] for i, _ in pos})
        z = run_zinc(model, prompt["tokens"], golden["n_predict"], union, forced=prompt["greedy"])
        compare(name, prompt, z, report)
        check_greedy(name, prompt, z, z["forced_top"], report)


SYNTH_PROMPTS = ["Hello world, this is a test of the synthetic model",
                 "def add(a, b):\n    return a + b\n",
                 "Numbers: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12"]


@pytest.fixture(scope="module")
def synthetic_models():
    src = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")
    need(src)
    out = os.path.join(MODELS, "synthetic")
    r = subprocess.run([sys.executable, os.path.join(SRC, "scripts", "make-synthetic.py"),
                        "--source", src, "--out-dir", out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.parametrize("arch", ["qwen2", "qwen3"])
def test_synthetic_model_matches_llama_cpp(arch, synthetic_models, report):
    llama_cpp = pytest.importorskip("llama_cpp")
    import numpy as np
    name = f"{arch}-synthetic"
    model = os.path.join(synthetic_models, name + ".gguf")
    llm = llama_cpp.Llama(model_path=model, n_ctx=512, n_batch=512, n_ubatch=512, n_threads=2,
                          n_threads_batch=2, logits_all=True, flash_attn=False, seed=0,
                          verbose=False)
    n_predict = 32
    for text in SYNTH_PROMPTS:
        toks = llm.tokenize(text.encode(), add_bos=True, special=False)
        llm.reset()
        llm.eval(toks)
        top = []
        for i in range(min(8, len(toks))):
            row = np.asarray(llm.scores[i], dtype=np.float64)
            idx = np.lexsort((np.arange(len(row)), -row))[:20]
            top.append([[int(j), float(row[j])] for j in idx])
        greedy, step_top = [], []
        for _ in range(n_predict):
            row = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            best = np.lexsort((np.arange(len(row)), -row))[:5]
            greedy.append(int(best[0]))
            step_top.append([[int(j), float(row[j])] for j in best])
            llm.eval([int(best[0])])
        prompt = {"text": text, "tokens": toks, "top_logits": top, "greedy": greedy,
                  "greedy_top": step_top}
        union = sorted({i for pos in top for i, _ in pos})
        z = run_zinc(model, toks, n_predict, union, forced=greedy)
        compare(name, prompt, z, report)
        check_greedy(name, prompt, z, z["forced_top"], report)
