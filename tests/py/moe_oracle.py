"""Shared checks of the routed-expert architectures against llama.cpp (llama-cpp-python, the
oracle): test_moe.py (qwen3moe), test_gpt_oss.py (gpt-oss), test_qwen35moe.py (qwen35moe).

  * llama_run: llama.cpp's top-20 logits at the first 8 prompt positions and its own greedy
    continuation (with each step's top-5);
  * teacher_forced: zinc's prompt logits within the golden tolerance (test_model_goldens.compare)
    and zinc teacher-forced along llama.cpp's continuation: at least agree_min of the steps pick
    llama.cpp's token, and at most max_jumps of the others are not llama.cpp near-ties (margin
    >= NEAR_TIE);
  * missing_expert_count: the file with <arch>.expert_count renamed is refused naming the key.
"""
import os
import subprocess

import numpy as np
import pytest

from test_model_goldens import BUILD, NEAR_TIE, compare, run_zinc
from test_synth import need


def llama_run(path, toks, n_steps):
    llama_cpp = pytest.importorskip("llama_cpp")
    llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_batch=512, n_ubatch=512, n_threads=2,
                          n_threads_batch=2, logits_all=True, flash_attn=False, seed=0,
                          verbose=False)
    llm.eval(toks)
    top = []
    for i in range(min(8, len(toks))):
        row = np.asarray(llm.scores[i], dtype=np.float64)
        idx = np.lexsort((np.arange(len(row)), -row))[:20]
        top.append([[int(j), float(row[j])] for j in idx])
    greedy, step_top = [], []
    for _ in range(n_steps):
        row = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        best = np.lexsort((np.arange(len(row)), -row))[:5]
        greedy.append(int(best[0]))
        step_top.append([[int(j), float(row[j])] for j in best])
        llm.eval([int(best[0])])
    return top, greedy, step_top


def tokenize(path, text):
    llama_cpp = pytest.importorskip("llama_cpp")
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    return llm.tokenize(text.encode(), add_bos=True, special=False)


def teacher_forced(name, path, text, report, n_steps, agree_min, max_jumps):
    """Returns the prompt's token count (callers check it against the length they meant)."""
    need(os.path.join(BUILD, "logits_tool"))
    toks = tokenize(path, text)
    top, greedy, step_top = llama_run(path, toks, n_steps)
    prompt = {"text": text, "tokens": toks, "top_logits": top, "greedy": greedy,
              "greedy_top": step_top}
    union = sorted({i for pos in top for i, _ in pos})
    z = run_zinc(path, toks, n_steps, union, forced=greedy)
    compare(name, prompt, z, report)
    agree, jumps = 0, []
    for s, g in enumerate(greedy):
        pick = z["forced_top"][s][0][0]
        if pick == g:
            agree += 1
            continue
        margin = step_top[s][0][1] - dict((t, v) for t, v in step_top[s]).get(pick, -1e30)
        if margin < NEAR_TIE:
            report.append(f"{name} {len(toks)}-token prompt: near-tie at step {s} "
                          f"(margin {margin:.4f})")
        else:
            jumps.append((s, pick, g, margin))
    report.append(f"{name} {len(toks)}-token prompt: teacher-forced top-1 {agree}/{n_steps}, "
                  f"steps where zinc's pick is not a llama.cpp near-tie: {[j[0] for j in jumps]}")
    assert len(jumps) <= max_jumps, (
        f"{name} {len(toks)}-token prompt: at steps (step, zinc, llama.cpp, margin) {jumps} zinc "
        f"picks a token llama.cpp does not have near its top (at most {max_jumps} allowed)")
    assert agree >= agree_min * n_steps, f"{agree}/{n_steps} teacher-forced steps agree"
    return len(toks)


def missing_expert_count(path, tmp, arch):
    need(os.path.join(BUILD, "logits_tool"))
    data = open(path, "rb").read()
    key = f"{arch}.expert_count".encode()
    assert data.count(key) == 1
    out = os.path.join(tmp, "no-expert-count.gguf")
    with open(out, "wb") as f:  # the same bytes with the key renamed (same length)
        f.write(data.replace(key, f"{arch}.expert_cxunt".encode()))
    r = subprocess.run([os.path.join(BUILD, "logits_tool"), "--model", out, "--tokens", "1,2"],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert f"missing metadata key {arch}.expert_count" in r.stderr, r.stderr
