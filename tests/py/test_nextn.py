"""The NextN/MTP drafter (`--spec nextn`, docs/speculative.md "NextN / MTP") end to end on the
synthetic qwen35-tiny, whose one NextN block has random weights (so acceptance means nothing;
the tests check exactness and what is reported): `zinc run` reports the drafter and its counts,
`zinc serve` reports them per request and per drafter in /metrics; a model without NextN layers
is a one-line error naming the file and the key (a Runner without hidden states, the CUDA
tier's, is refused by the engine: tests/unit/engine/nextn_test.cpp). The exactness (text with
--spec nextn == --spec off, CLI and 4 concurrent server clients, dense and MoE hybrids) is
test_spec.py's."""
import re
import subprocess

import pytest

from server_harness import MODEL_ID, SMOL, ZINC, Server, need_server_deps


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    need_server_deps()
    from test_synth import synth
    return synth(str(tmp_path_factory.mktemp("nextn")), "qwen35-tiny", "q8_0")


def run(model, *args):
    return subprocess.run([str(ZINC), "-m", str(model), "-t", "2", "--temp", "0", "-c", "256",
                           *map(str, args)], capture_output=True, text=True, timeout=600)


def test_cli_reports_the_nextn_drafter(tiny):
    plain = run(tiny, "-p", "The committee met on Tuesday.", "-n", "40", "--spec", "off")
    spec = run(tiny, "-p", "The committee met on Tuesday.", "-n", "40", "--spec", "nextn",
               "--spec-max", "3")
    assert plain.returncode == 0 and spec.returncode == 0, spec.stderr
    assert spec.stdout == plain.stdout
    m = re.search(r"speculative: nextn, (\d+) drafted, (\d+) accepted", spec.stderr)
    assert m, spec.stderr
    drafted, accepted = int(m.group(1)), int(m.group(2))
    assert drafted > 0 and 0 <= accepted <= drafted


def test_cli_nextn_without_nextn_layers_is_an_error():
    need_server_deps()
    r = run(SMOL, "-p", "x", "-n", "2", "--spec", "nextn")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(
        f"--spec nextn: {SMOL}: this llama model has no NextN/MTP layers "
        "(llama.nextn_predict_layers is 0 or absent); use --spec lookup or "
        "--spec draft --draft FILE"), r.stderr


def test_server_reports_nextn_per_request_and_in_metrics(tiny):
    srv = Server("--parallel", "2", "-c", "256", "--spec", "nextn", model=tiny)
    try:
        out = []
        for p in ("One, two, three, four, five.", "def add(a, b):"):
            r = srv.post("/v1/completions", {"model": MODEL_ID, "prompt": p, "max_tokens": 24,
                                              "temperature": 0})
            assert r.status == 200, r.text
            out.append(r.json()["zinc"]["speculation"])
        metrics = srv.get("/metrics").text
    finally:
        assert srv.stop() == 0
        srv.close()
    drafted = sum(sp["draft_tokens"] for sp in out)
    accepted = sum(sp["accepted_tokens"] for sp in out)
    assert all(sp["drafter"] == "nextn" and sp["verifications"] > 0 for sp in out), out
    assert drafted > 0
    assert f'zinc_spec_draft_tokens_total{{drafter="nextn"}} {drafted}' in metrics
    assert f'zinc_spec_accepted_tokens_total{{drafter="nextn"}} {accepted}' in metrics
