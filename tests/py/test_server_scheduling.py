"""Step composition under `zinc serve` (docs/engine.md, "Scheduler"): a short request that
arrives while a 3000-token prompt is being prefilled on a 4-slot server is admitted into the
next step and shares it with the long prefill (issue 17), so its first token comes long before
the long prompt's; /metrics says how the steps were split.
"""
import threading
import time

from server_harness import MODEL_ID, Server


def first_token_time(client, prompt, t0, out, key):
    stream = client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=2,
                                       temperature=0, stream=True)
    for chunk in stream:
        if key not in out:
            out[key] = time.monotonic() - t0
    out[key + "_end"] = time.monotonic() - t0


def test_short_request_not_held_behind_a_long_prefill():
    s = Server("--parallel", 4, "-c", "4096", "--max-batch-tokens", 512)
    try:
        client = s.client()
        long_prompt = " ".join(f"word{i % 97}" for i in range(1030))  # ~3000 tokens
        n_long = len(s.post("/tokenize", {"content": long_prompt}).json()["tokens"])
        assert 2500 < n_long < 3500, n_long
        out = {}
        t0 = time.monotonic()
        th = threading.Thread(target=first_token_time, args=(client, long_prompt, t0, out, "long"))
        th.start()
        time.sleep(0.5)
        first_token_time(client, "Say hi.", t0, out, "short")
        th.join()
        print(f"long prompt tokens {n_long}: first token {out['long']:.2f} s; short request "
              f"(sent at 0.5 s): first token {out['short']:.2f} s")
        assert out["short"] < out["long"], out
        m = s.get("/metrics").text
        assert 'zinc_steps_by_composition_total{kind="mixed"}' in m
        mixed = [l for l in m.splitlines()
                 if l.startswith('zinc_steps_by_composition_total{kind="mixed"}')]
        assert float(mixed[0].split()[-1]) >= 1, mixed
        rows = [l for l in m.splitlines() if l.startswith("zinc_step_rows_total")]
        assert len(rows) == 2 and all(float(l.split()[-1]) > 0 for l in rows), rows
        assert "zinc_step_duration_seconds_count" in m
    finally:
        assert s.stop() == 0, s.stderr()
        s.close()


def test_tpot_target_flag_bounds_the_budget():
    s = Server("--parallel", 2, "-c", "1024", "--tpot-target", "1", "--min-prefill-chunk", 8)
    try:
        client = s.client()
        r = client.completions.create(model=MODEL_ID, prompt="one two three " * 40,
                                      max_tokens=4, temperature=0)
        assert r.usage.completion_tokens == 4
        m = s.get("/metrics").text
        budget = [l for l in m.splitlines() if l.startswith("zinc_step_budget_rows ")]
        # 1 ms per step is below any real step here: the budget is decodes + min chunk.
        assert budget and float(budget[0].split()[-1]) <= 9, budget
        per_row = [l for l in m.splitlines() if 'zinc_step_cost_model_ms{term="per_row"}' in l]
        assert per_row and float(per_row[0].split()[-1]) > 0, per_row
    finally:
        assert s.stop() == 0, s.stderr()
        s.close()
