"""Speculative decoding end to end (docs/speculative.md): `zinc run` and `zinc serve` with
--spec lookup, --spec draft (and --spec nextn on the synthetic hybrids) give exactly the text
of --spec off at temperature 0, also with several concurrent clients (continuous batching:
their drafts are verified in shared steps); the response carries the request's speculation
counts and /metrics the drafter's; bad flags and an incompatible draft model are one-line
errors."""
import subprocess
import threading

import pytest

from server_harness import MODEL_ID, SMOL, SOURCE, ZINC, Server, need_server_deps

QWEN = SOURCE / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"

TEXT = ("The committee met on Tuesday. The committee agreed that the budget for the new library "
        "would be raised. The committee also agreed that the library would open in May. ")
PROMPTS = [
    TEXT * 2 + "Summary: The committee",
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n",
    "One, two, three, four, five. One, two, three, four, five. One, two,",
    "List the planets of the solar system in order:",
]


def run_zinc(*args, env=None):
    return subprocess.run([str(ZINC), "-m", str(SMOL), "-t", "2", "--temp", "0", *map(str, args)],
                          capture_output=True, text=True, timeout=600, env=env)


@pytest.mark.parametrize("mode", [["--spec", "lookup"], ["--spec", "draft", "--draft", SMOL]])
def test_cli_spec_output_equals_plain(mode):
    need_server_deps()
    for p in PROMPTS[:2]:
        plain = run_zinc("-p", p, "-n", "40", "--spec", "off")
        spec = run_zinc("-p", p, "-n", "40", *mode)
        assert plain.returncode == 0 and spec.returncode == 0, spec.stderr
        assert spec.stdout == plain.stdout
        assert "speculative: " in spec.stderr and "speculative: " not in plain.stderr


def test_cli_spec_errors():
    need_server_deps()
    cases = [
        (["--spec", "mtp"], "--spec mtp: unknown mode (expected lookup, draft, nextn or off)"),
        (["--spec", "nextn"], f"--spec nextn: {SMOL}: this llama model has no NextN/MTP layers "
                              "(llama.nextn_predict_layers is 0 or absent)"),
        (["--spec", "draft"], "--spec draft needs --draft FILE"),
        (["--spec", "lookup", "--draft", SMOL], "--draft is only used with --spec draft"),
        (["--spec-max", "0"], "--spec-max"),
    ]
    if QWEN.exists():
        cases.append((["--draft", QWEN], f"--draft {QWEN}: vocabulary of 151936 tokens"))
    for args, msg in cases:
        r = run_zinc("-p", "x", "-n", "2", *args)
        assert r.returncode == 2, (args, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and msg in lines[0], (args, r.stderr)
    import os
    r = run_zinc("-p", "x", "-n", "2", env={**os.environ, "ZINC_SPEC": "yes"})
    assert r.returncode == 2 and "ZINC_SPEC=yes: expected 0 or 1" in r.stderr
    # ZINC_SPEC=0 turns a requested drafter off (A/B).
    r = run_zinc("-p", PROMPTS[2], "-n", "8", "--spec", "lookup",
                 env={**os.environ, "ZINC_SPEC": "0"})
    assert r.returncode == 0 and "speculative: " not in r.stderr


def completions(server, n_tokens=48):
    """Every prompt from its own client thread at once; returns texts and the zinc extras."""
    out = [None] * len(PROMPTS)

    def one(i):
        r = server.post("/v1/completions", {"model": MODEL_ID, "prompt": PROMPTS[i],
                                             "max_tokens": n_tokens, "temperature": 0})
        assert r.status == 200, r.text
        out[i] = r.json()

    ts = [threading.Thread(target=one, args=(i,)) for i in range(len(PROMPTS))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def test_server_spec_concurrent_clients_equal_plain():
    need_server_deps()
    results = {}
    for name, args in [("off", ["--spec", "off"]), ("lookup", ["--spec", "lookup"]),
                       ("draft", ["--spec", "draft", "--draft", SMOL])]:
        srv = Server("--parallel", "4", "-c", "1024", *args)
        try:
            results[name] = completions(srv)
            metrics = srv.get("/metrics").text
        finally:
            assert srv.stop() == 0
            srv.close()
        if name == "off":
            assert all("speculation" not in r.get("zinc", {}) for r in results[name])
            assert 'zinc_spec_draft_tokens_total{drafter="off"} 0' in metrics
            continue
        drafted = accepted = 0
        for r in results[name]:
            sp = r["zinc"]["speculation"]
            assert sp["drafter"] == name
            assert 0 <= sp["accepted_tokens"] <= sp["draft_tokens"]
            assert sp["acceptance_rate"] == pytest.approx(
                sp["accepted_tokens"] / sp["draft_tokens"] if sp["draft_tokens"] else 0.0)
            drafted += sp["draft_tokens"]
            accepted += sp["accepted_tokens"]
        assert accepted > 0
        assert f'zinc_spec_draft_tokens_total{{drafter="{name}"}} {drafted}' in metrics
        assert f'zinc_spec_accepted_tokens_total{{drafter="{name}"}} {accepted}' in metrics
        if name == "draft":  # SmolLM2 drafting for itself: every draft is its own greedy choice
            assert accepted == drafted
    for name in ("lookup", "draft"):
        for plain, spec in zip(results["off"], results[name]):
            assert spec["choices"][0]["text"] == plain["choices"][0]["text"], name


# ---- hybrid models (recurrent DeltaNet + conv state): the state is rewound to the accepted
# boundary after every verification (docs/speculative.md, "Recurrent state") ----

# A random model's text seldom repeats: over 160 tokens a few n-grams recur, enough for some
# drafts (nearly all rejected, so the state must go back each time).
SEEDS = ["One, two, three, four, five.", "The committee met on Tuesday.", "def add(a, b):",
         "List the planets of the solar system in order:"]
N_HYBRID = 160


@pytest.fixture(scope="module")
def hybrid_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("spec_hybrid"))


def run_hybrid(path, prompt, n, *extra):
    r = subprocess.run([str(ZINC), "-m", path, "-t", "2", "--temp", "0", "-c", "512", "-p",
                        prompt, "-n", str(n), *extra], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    return r


def spec_stats(stderr, drafter="lookup"):
    import re
    m = re.search(r"speculative: " + drafter + r", (\d+) drafted, (\d+) accepted", stderr)
    assert m, stderr
    return int(m.group(1)), int(m.group(2))


# Each drafter on both hybrids: lookup, and the model's own NextN block (the presets carry one).
HYBRID_CASES = [(p, d) for p in ("qwen35-tiny", "qwen35moe-tiny") for d in ("lookup", "nextn")]


@pytest.mark.parametrize("preset,drafter", HYBRID_CASES)
def test_cli_spec_hybrid_equals_plain(hybrid_dir, preset, drafter):
    need_server_deps()
    from test_synth import synth
    path = synth(hybrid_dir, preset, "q8_0")
    total = 0
    for p in SEEDS[:3]:
        plain = run_hybrid(path, p, N_HYBRID, "--spec", "off")
        spec = run_hybrid(path, p, N_HYBRID, "--spec", drafter)
        assert spec.stdout == plain.stdout, (preset, drafter, p)
        drafted, accepted = spec_stats(spec.stderr, drafter)
        assert drafted >= accepted
        total += drafted - accepted
    # Rejected drafts: the recurrent state had to go back (a missing rollback fails here).
    assert total > 0


def concurrent_completions(srv, prompts, n_tokens):
    out = [None] * len(prompts)

    def one(i):
        r = srv.post("/v1/completions", {"model": MODEL_ID, "prompt": prompts[i],
                                          "max_tokens": n_tokens, "temperature": 0})
        assert r.status == 200, r.text
        out[i] = r.json()

    ts = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


@pytest.mark.parametrize("preset,drafter", HYBRID_CASES)
def test_server_spec_hybrid_concurrent_equal_plain(hybrid_dir, preset, drafter):
    need_server_deps()
    from test_synth import synth
    path = synth(hybrid_dir, preset, "q8_0")
    results = {}
    for name in ("off", drafter):
        srv = Server("--parallel", "4", "-c", "512", "--spec", name, model=path)
        try:  # 4 concurrent clients: their drafts are verified in shared steps
            results[name] = concurrent_completions(srv, SEEDS, N_HYBRID)
        finally:
            assert srv.stop() == 0
            srv.close()
    drafted = accepted = verifications = 0
    for plain, spec in zip(results["off"], results[drafter]):
        assert spec["choices"][0]["text"] == plain["choices"][0]["text"], (preset, drafter)
        sp = spec["zinc"]["speculation"]
        assert sp["drafter"] == drafter
        drafted += sp["draft_tokens"]
        accepted += sp["accepted_tokens"]
        verifications += sp["verifications"]
    assert verifications > 0 and drafted > accepted, results[drafter]
