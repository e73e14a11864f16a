"""Runtime evidence in the server (issue 6): /health carries an `evidence` object and /metrics
the zinc_evidence_* series, and both say what the Runner really executed for the requests
served (ops computed here from the architecture, as in test_evidence.py), on the CPU tier.
"""
import re

import pytest

from server_harness import MODEL_ID, SMOL, Server

gguf = pytest.importorskip("gguf")


def n_layer():
    r = gguf.GGUFReader(str(SMOL))
    return int(r.fields["llama.block_count"].parts[-1][0])


def ops_per_step(n_layer_run, n_rows, n_out=1):
    # llama: embedding; per layer 2 norms, 4 projection calls, RoPE/KV, attention, GLU, 2 adds;
    # the output-row gather when not every row is an output row; final norm and LM head.
    return 1 + 11 * n_layer_run + (1 if n_out != n_rows else 0) + (2 if n_out else 0)


def complete(srv, prompt, n):
    r = srv.post("/v1/completions", {"model": MODEL_ID, "prompt": prompt, "max_tokens": n,
                                     "temperature": 0, "ignore_eos": True})
    assert r.status == 200, r.text
    return r.json()["usage"]


def metric(text, name, labels=""):
    m = re.search(r"^zinc_evidence_" + re.escape(name) + re.escape(labels) + r" (\d+)$", text, re.M)
    assert m, f"{name}{labels} missing:\n{text}"
    return int(m.group(1))


def test_health_and_metrics_report_the_work_done():
    srv = Server("--tier", "cpu", "--parallel", "2", "-c", "512", env={})
    try:
        ev0 = srv.health()["evidence"]
        assert ev0["execution_tier"] == "cpu" and "--tier=cpu" in ev0["tier_reason"]
        assert ev0["steps"] == 0 and ev0["devices"]["cpu"]["ops"] == 0
        u = complete(srv, "The capital of France is", 5)
        ev = srv.wait_idle()["evidence"]
        L = n_layer()
        # One prefill step, then one decode step per generated token but the last.
        want_steps = 1 + u["completion_tokens"] - 1
        assert ev["steps"] == want_steps
        assert ev["devices"]["cpu"]["ops"] == (ops_per_step(L, u["prompt_tokens"]) +
                                               (want_steps - 1) * ops_per_step(L, 1))
        assert ev["devices"]["cuda"]["ops"] == 0
        assert ev["devices"]["cpu"]["by_op"]["attention"] == L * want_steps
        assert ev["shortcut_free"] is True and ev["cpu_fallback"] == 0
        m = srv.get("/metrics").text
        assert metric(m, "steps_total") == want_steps
        assert metric(m, "ops_total", '{device="cpu",op="matmul"}') == ev["devices"]["cpu"]["by_op"]["matmul"]
        assert metric(m, "shortcut_free") == 1
        assert metric(m, "cpu_fallback_total") == 0
        assert 'zinc_evidence_info{execution_tier="cpu"' in m
    finally:
        srv.stop()


def test_server_shortcut_and_validation_show_in_health():
    env = {"ZINC_SKIP_LAYERS": "4", "ZINC_VALIDATE": "2"}
    srv = Server("--tier", "cpu", "--parallel", "1", "-c", "256", env=env)
    try:
        complete(srv, "Hello", 3)
        ev = srv.wait_idle()["evidence"]
        assert ev["shortcut_free"] is False
        assert "layer 4 skipped (ZINC_SKIP_LAYERS)" in ev["shortcuts"]
        # The oracle does not skip: validation catches the skipped layer.
        assert ev["validated_steps"] == 2 and ev["validation_failures"] == 2
        assert ev["first_failure"].startswith("step 0 layer 4 op l_out"), ev["first_failure"]
        m = srv.get("/metrics").text
        assert metric(m, "shortcut_free") == 0
        assert metric(m, "validation_failures_total") == 2
    finally:
        srv.stop()
