"""Runtime evidence per request in the server (issue 6 item 2), on the CPU tier, so it runs in CI.

Every completion (chat and legacy, streamed and not) carries `zinc.evidence` next to `usage`
(docs/runtime.md, "Evidence per request"); the real `openai` client keeps it as an extra field.
The numbers must not be able to lie:
  * steps and rows follow from the request alone (prompt tokens, max_tokens with ignore_eos);
  * whole-step op counts follow from the architecture (n_layer read with the gguf package);
  * concurrent requests of different lengths get different counts, and their row shares sum
    exactly to what /health says the process ran in the same interval;
  * validation (ZINC_VALIDATE) and a shortcut (ZINC_SKIP_LAYERS) are reported by the request
    whose steps had them, not by the one after.
The forced-CPU-op case needs the CUDA tier: test_evidence_cuda.py (and a CPU-only gtest with a
test runner, tests/unit/runtime/test_request_evidence.cpp).
"""
import json
import threading

import pytest

from server_harness import MODEL_ID, SMOL, Server

gguf = pytest.importorskip("gguf")
openai = pytest.importorskip("openai")


def n_layer():
    r = gguf.GGUFReader(str(SMOL))
    return int(r.fields["llama.block_count"].parts[-1][0])


@pytest.fixture(scope="module")
def server():
    s = Server("--tier", "cpu", "--parallel", "4", "-c", "512", "--no-prefix-cache", env={})
    yield s
    assert s.stop() == 0
    s.close()


def check_formula(ev, prompt_tokens, max_tokens, L):
    # One prefill step (the prompt fits the step budget), then one decode step per generated
    # token but the last; every step produces logits, so each runs 4 projection calls per layer
    # plus the LM head, one attention per layer and 2 norms per layer plus the final one.
    assert ev["execution_tier"] == "cpu"
    assert ev["steps"] == max_tokens
    assert ev["prompt_rows"] == prompt_tokens
    assert ev["generated_rows"] == max_tokens - 1
    st = ev["step_totals"]["cpu"]["by_op"]
    assert st["matmul"] == ev["steps"] * (4 * L + 1)
    assert st["attention"] == ev["steps"] * L
    assert st["rms_norm"] == ev["steps"] * (2 * L + 1)
    assert ev["devices"]["cuda"]["ops"] == 0 and ev["step_totals"]["cuda"]["ops"] == 0
    assert ev["devices"]["cpu"]["ops"] <= ev["step_totals"]["cpu"]["ops"]
    assert ev["shortcut_free"] is True and ev["cpu_fallback"] == 0
    assert ev["validated_steps"] == 0 and ev["validation_failures"] == 0


def test_openai_client_sees_the_evidence_chat_and_completions(server):
    L = n_layer()
    c = server.client()
    r = c.chat.completions.create(model=MODEL_ID, temperature=0, max_tokens=6,
                                  messages=[{"role": "user", "content": "Name a colour."}],
                                  extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 6
    ev = r.model_extra["zinc"]["evidence"]
    check_formula(ev, r.usage.prompt_tokens, 6, L)
    # Alone on the server: its row share is the whole of every step it took part in.
    assert ev["devices"] == ev["step_totals"]
    r = c.completions.create(model=MODEL_ID, prompt="One, two, three,", max_tokens=9,
                             temperature=0, extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 9
    check_formula(r.model_extra["zinc"]["evidence"], r.usage.prompt_tokens, 9, L)


def test_streamed_final_chunk_carries_the_evidence(server):
    L = n_layer()
    c = server.client()
    for include_usage in (False, True):
        kw = {"stream_options": {"include_usage": True}} if include_usage else {}
        chunks = list(c.chat.completions.create(
            model=MODEL_ID, temperature=0, max_tokens=5, stream=True,
            messages=[{"role": "user", "content": "Count to ten."}],
            extra_body={"ignore_eos": True}, **kw))
        with_ev = [i for i, ch in enumerate(chunks) if (ch.model_extra or {}).get("zinc")]
        # Exactly one chunk, the last one (the usage chunk, or the one with finish_reason).
        assert with_ev == [len(chunks) - 1], with_ev
        last = chunks[-1]
        if include_usage:
            assert last.choices == [] and last.usage.completion_tokens == 5
        else:
            assert last.choices[0].finish_reason == "length"
        ev = last.model_extra["zinc"]["evidence"]
        assert ev["steps"] == 5 and ev["generated_rows"] == 4
        assert ev["step_totals"]["cpu"]["by_op"]["matmul"] == 5 * (4 * L + 1)
    # Legacy completions stream too.
    chunks = list(c.completions.create(model=MODEL_ID, prompt="Hello", max_tokens=4,
                                       temperature=0, stream=True,
                                       extra_body={"ignore_eos": True}))
    assert chunks[-1].model_extra["zinc"]["evidence"]["steps"] == 4


def test_stop_string_request_reports_its_steps(server):
    # A stop string cancels the engine request: the evidence waits for that cancel and covers
    # exactly the steps that ran (at least the tokens delivered, at most max_tokens).
    r = server.post("/v1/completions", {"model": MODEL_ID, "prompt": "1, 2, 3, 4, 5,",
                                        "max_tokens": 40, "temperature": 0, "stop": [" 8"]})
    assert r.status == 200, r.text
    j = r.json()
    assert j["choices"][0]["finish_reason"] == "stop"
    ev = j["zinc"]["evidence"]
    assert j["usage"]["completion_tokens"] <= ev["steps"] < 40


def health_ev(server):
    return server.wait_idle()["evidence"]


def test_concurrent_requests_differ_and_sum_to_the_process(server):
    L = n_layer()
    before = health_ev(server)
    jobs = [("The capital of France is", 4), ("Once upon a time, in a land far away,", 40),
            ("def fib(n):", 11)]
    out = [None] * len(jobs)
    barrier = threading.Barrier(len(jobs))

    def run(i):
        prompt, n = jobs[i]
        barrier.wait()
        r = server.post("/v1/completions", {"model": MODEL_ID, "prompt": prompt, "max_tokens": n,
                                            "temperature": 0, "ignore_eos": True})
        out[i] = r

    ts = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    evs = []
    for (prompt, n), r in zip(jobs, out):
        assert r is not None and r.status == 200, r and r.text
        j = r.json()
        ev = j["zinc"]["evidence"]
        check_formula(ev, j["usage"]["prompt_tokens"], n, L)
        evs.append(ev)
    after = health_ev(server)
    # They shared steps: the process ran fewer steps than the requests took part in.
    assert after["steps"] - before["steps"] < sum(e["steps"] for e in evs)
    # Row shares sum exactly to the process counters of the interval.
    cpu_b, cpu_a = before["devices"]["cpu"], after["devices"]["cpu"]
    for key in ("ops", "weight_bytes", "act_bytes"):
        assert sum(e["devices"]["cpu"][key] for e in evs) == cpu_a[key] - cpu_b[key], key
    for op, v in cpu_a["by_op"].items():
        got = sum(e["devices"]["cpu"]["by_op"].get(op, 0) for e in evs)
        assert got == v - cpu_b["by_op"].get(op, 0), op
    # Different lengths, different work.
    ops = [e["devices"]["cpu"]["ops"] for e in evs]
    assert ops[0] < ops[2] < ops[1], ops


def test_validation_and_shortcuts_belong_to_the_request_that_ran_them():
    env = {"ZINC_SKIP_LAYERS": "4", "ZINC_VALIDATE": "3"}
    srv = Server("--tier", "cpu", "--parallel", "1", "-c", "256", env=env)
    try:
        def one(n):
            r = srv.post("/v1/completions", {"model": MODEL_ID, "prompt": "Hello there",
                                             "max_tokens": n, "temperature": 0,
                                             "ignore_eos": True})
            assert r.status == 200, r.text
            return r.json()["zinc"]["evidence"]
        a, b = one(5), one(4)
        assert a["validated_steps"] == 3 and a["validation_failures"] == 3
        assert a["finiteness_checks"] == 2
        assert a["shortcut_free"] is False
        assert a["shortcuts"] == {"layer 4 skipped (ZINC_SKIP_LAYERS)": 5}
        assert b["validated_steps"] == 0 and b["validation_failures"] == 0
        assert b["finiteness_checks"] == 4
        assert b["shortcut_free"] is False  # the skip is taken on every step
        proc = srv.wait_idle()["evidence"]
        assert proc["validated_steps"] == a["validated_steps"] + b["validated_steps"]
        assert proc["validation_failures"] == a["validation_failures"] + b["validation_failures"]
        assert proc["steps"] == a["steps"] + b["steps"]
    finally:
        assert srv.stop() == 0
        srv.close()


def test_n_choices_sum_their_evidence(server):
    r = server.post("/v1/completions", {"model": MODEL_ID, "prompt": "Hi", "max_tokens": 3,
                                        "temperature": 0.8, "seed": 1, "n": 2,
                                        "ignore_eos": True})
    assert r.status == 200, r.text
    ev = r.json()["zinc"]["evidence"]
    # Each choice: 3 steps, 2 generated rows, its prompt rows (the prefix cache is off).
    assert ev["steps"] == 6 and ev["generated_rows"] == 4
    assert ev["prompt_rows"] == 2 * r.json()["usage"]["prompt_tokens"]
    json.dumps(ev)  # plain JSON
