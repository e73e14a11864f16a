"""Runtime evidence on the CUDA tier (issue 6), through `zinc bench --json` and `zinc --prompt`.

With a usable device (the H200) it checks what the GPU really did:
  * ops land on `cuda` only; attention and RoPE/KV launches = n_layer per step and one embedding
    per step, decode steps replayed as CUDA graphs included (read from `zinc inspect`);
  * ZINC_CPU_OPS=glu moves every layer's GLU to the host: counted on `cpu`, as cpu_fallback with
    op glu, and the tier reads cuda+cpu;
  * ZINC_VALIDATE: clean steps promote trust; in exact mode (ZINC_EXACT=1, opt-in) the
    comparison is bitwise (`validation=bitwise`: every captured intermediate and logit carries
    the CPU oracle's bits), with ZINC_EXACT=0 it is the relative-error tolerance and still passes;
    ZINC_TEST_CORRUPT at any named intermediate of the CUDA forward (Qcur, Vcur, kqv_out,
    attn_out, ffn_inp, ffn_glu, ffn_out, l_out, ...) is named by step, layer and the single op
    that produced it; strict finishes on the CPU oracle (the text equals the CPU tier's);
  * ZINC_SKIP_LAYERS is refused on CUDA rather than ignored;
  * per request (zinc serve): a request's `zinc.evidence` has its ops on `cuda`, and under
    ZINC_CPU_OPS=glu it reports the forced op (glu = n_layer per step it took part in, tier
    cuda+cpu); the row shares of concurrent requests sum to /health;
  * -d 0 / ZINC_DEVICE=0 select the device (--check names it), a device index that does not
    exist is one error line naming the devices found.
Without a device (CI) it checks that `--tier cuda` is refused in one line and that `auto` picks
the CPU and says why, so the file checks something everywhere and never skips for lack of a GPU.

Models: ZINC_EVIDENCE_MODELS (colon-separated GGUF paths, e.g. `zinc synth` files), else
models/SmolLM2-135M-Instruct.Q4_1.gguf and models/gemma-3-270m-q4_k_m.gguf.
"""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

BUILD = Path(os.environ.get("ZINC_BUILD_DIR", "build")).resolve()
SOURCE = Path(os.environ.get("ZINC_SOURCE_DIR", Path(__file__).resolve().parents[2]))
ZINC = BUILD / "zinc"
RUNTIME_ENV = ("ZINC_TIER", "ZINC_VALIDATE", "ZINC_VALIDATE_STRICT", "ZINC_VALIDATE_TOL",
               "ZINC_SKIP_LAYERS", "ZINC_CPU_OPS", "ZINC_TEST_CORRUPT", "ZINC_DEVICE",
               "ZINC_EXACT")


def models():
    env = os.environ.get("ZINC_EVIDENCE_MODELS")
    if env:
        return [Path(p) for p in env.split(":") if p]
    return [SOURCE / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf",
            SOURCE / "models" / "gemma-3-270m-q4_k_m.gguf"]


MODELS = models()


def zinc(*args, env=None, timeout=600):
    if not ZINC.exists():
        pytest.skip(f"{ZINC} not built")
    e = {k: v for k, v in os.environ.items() if k not in RUNTIME_ENV}
    e.update(env or {})
    return subprocess.run([str(ZINC), *map(str, args)], capture_output=True, timeout=timeout,
                          env=e)


def need(path):
    if not path.exists():
        pytest.skip(f"{path} missing (scripts/fetch-models, or ZINC_EVIDENCE_MODELS)")
    return path


_HAS_CUDA = None


def has_cuda():
    global _HAS_CUDA
    if _HAS_CUDA is None:
        out = zinc("--check", "-m", need(MODELS[0])).stdout.decode()
        line = [ln for ln in out.splitlines() if " tier: " in ln]
        assert len(line) == 1, out
        _HAS_CUDA = "tier: cuda:" in line[0]
    return _HAS_CUDA


def n_layer_of(model):
    out = zinc("inspect", model).stdout.decode()
    m = re.search(r"^\s+\w+\.block_count\s+u32\s+(\d+)", out, re.M)
    assert m, out[:2000]
    return int(m.group(1))


def parse_line(err):
    line = [ln for ln in err.strip().splitlines() if ln.startswith("evidence: ")]
    assert line, err
    out = {}
    for m in re.finditer(r'(\w+)=("[^"]*"|\S+)', line[-1][len("evidence: "):]):
        out[m.group(1)] = m.group(2).strip('"')
    return out


def bench(model, env=None, p=32, n=8, tier="cuda"):
    r = zinc("bench", "-m", model, "-p", p, "-n", n, "-r", "1", "--json", "--tier", tier, env=env)
    err = r.stderr.decode()
    assert r.returncode == 0, err
    pp, tg = json.loads(r.stdout.decode())
    return pp["evidence"], tg["evidence"], parse_line(err), err


def test_without_a_device_cuda_is_refused_and_auto_says_why():
    need(MODELS[0])
    if has_cuda():
        return  # the device tests below run instead
    r = zinc("bench", "-m", MODELS[0], "-p", "8", "-n", "0", "-r", "1", "--tier", "cuda")
    err = r.stderr.decode().strip().splitlines()
    assert r.returncode != 0 and len(err) == 1 and "cannot use the CUDA tier" in err[0], err
    r = zinc("bench", "-m", MODELS[0], "-p", "8", "-n", "0", "-r", "1")
    assert r.returncode == 0
    ev = parse_line(r.stderr.decode())
    assert ev["tier"] == "cpu" and ev["ops"].startswith("cuda:0,")
    assert "auto: using the CPU tier because" in r.stderr.decode()


@pytest.mark.parametrize("model", MODELS, ids=[m.stem for m in MODELS])
def test_ops_run_on_the_gpu(model):
    need(model)
    if not has_cuda():
        return
    L = n_layer_of(model)
    pp, tg, line, err = bench(model)
    assert "zinc: tier cuda:" in err
    # pp32: warm-up + 1 repetition = 2 steps; tg8: warm-up (1 token) + 8 = 9 steps (graphs).
    assert pp["steps"] == 2 and tg["steps"] == 9
    for ev, steps in ((pp, 2), (tg, 9)):
        cu, cpu = ev["devices"]["cuda"], ev["devices"]["cpu"]
        assert ev["execution_tier"] == "cuda"
        assert cpu["ops"] == 0 and cpu["weight_bytes"] == 0
        assert cu["by_op"]["attention"] == L * steps
        assert cu["by_op"]["rope_kv"] == L * steps
        assert cu["by_op"]["embed"] == steps
        assert cu["by_op"]["argmax"] == steps
        assert cu["weight_bytes"] > 0 and cu["act_bytes"] > 0
        assert ev["cpu_fallback"] == 0 and ev["shortcut_free"] is True
    assert line["tier"] == "cuda" and line["cpu_fallback"] == "0"


@pytest.mark.parametrize("model", MODELS, ids=[m.stem for m in MODELS])
def test_forced_cpu_op_is_counted_as_fallback(model):
    need(model)
    if not has_cuda():
        return
    L = n_layer_of(model)
    _, tg, line, _ = bench(model, env={"ZINC_CPU_OPS": "glu"})
    assert tg["devices"]["cpu"]["by_op"] == {"glu": L * 9}
    assert "glu" not in tg["devices"]["cuda"]["by_op"]
    assert tg["cpu_fallback"] == L * 9 and tg["fallback_ops"] == {"glu": L * 9}
    assert tg["execution_tier"] == "cuda+cpu"
    assert line["tier"] == "cuda+cpu" and line["fallback_ops"].startswith("glu:")


@pytest.mark.parametrize("model", MODELS, ids=[m.stem for m in MODELS])
def test_validation_clean_promotes(model):
    need(model)
    if not has_cuda():
        return
    _, _, line, err = bench(model, env={"ZINC_VALIDATE": "4"})
    assert line["validated"] == "4/4", err
    assert line["failures"] == "0", line.get("first_failure")
    assert line["trust"] == "promoted"
    assert line["validation"] == "tolerance"  # the fast kernels are the default


@pytest.mark.parametrize("model", MODELS, ids=[m.stem for m in MODELS])
def test_exact_validation_is_bitwise(model):
    """ZINC_VALIDATE=8 on an exact run (ZINC_EXACT=1): every captured intermediate of every layer
    (Qcur .. l_out, prefill and decode steps) and the logits carry the CPU oracle's bits."""
    need(model)
    if not has_cuda():
        return
    pp, tg, line, err = bench(model, env={"ZINC_VALIDATE": "8", "ZINC_EXACT": "1"})
    assert line["validation"] == "bitwise", err
    assert line["validated"] == "8/8", err
    assert line["failures"] == "0", line.get("first_failure")
    assert line["trust"] == "promoted" and line["tier"] == "cuda"
    for ev in (pp, tg):
        assert ev["validation"] == "bitwise"
        assert ev["validation_failures"] == 0, ev["first_failure"]
        assert ev["devices"]["cuda"]["ops"] > 0 and ev["devices"]["cpu"]["ops"] == 0
    assert pp["validated_steps"] + tg["validated_steps"] == 8


@pytest.mark.parametrize("model", MODELS, ids=[m.stem for m in MODELS])
def test_tolerance_validation_without_exact_mode(model):
    """ZINC_EXACT=0 (the fast kernels, not bit-identical): validation uses the relative-error
    thresholds, says so, and passes; a fault is still named by its single op."""
    need(model)
    if not has_cuda():
        return
    _, _, line, err = bench(model, env={"ZINC_VALIDATE": "4", "ZINC_EXACT": "0"})
    assert line["validation"] == "tolerance", err
    assert line["validated"] == "4/4" and line["failures"] == "0", line.get("first_failure")
    assert line["trust"] == "promoted"
    # (kqv_out: also captured on the cuBLAS prefill path, where a model with Q/K/V biases has no
    # Qcur/Kcur/Vcur captures.)
    _, _, line, err = bench(model, env={"ZINC_VALIDATE": "2", "ZINC_EXACT": "0",
                                        "ZINC_TEST_CORRUPT": "kqv_out:1"})
    assert line["validation"] == "tolerance" and line["failures"] == "2", err
    want = "step 0 layer 1 op attention (rope_kv, attention): blk.1.kqv_out rel err"
    assert line["first_failure"].startswith(want), line


@pytest.mark.parametrize("model", MODELS, ids=[m.stem for m in MODELS])
def test_validated_steps_compute_the_same_bits(model):
    """The validated steps run ungraphed with the residual adds unfused and every intermediate
    copied out; in exact mode that must not change a bit: the greedy text of a run validated
    throughout equals the plain (graphed, fused) run's and the CPU tier's."""
    need(model)
    if not has_cuda():
        return
    args = ("-m", model, "--prompt", "The capital of France is", "-n", "12", "--temp", "0",
            "--no-echo")
    plain = zinc(*args, "--tier", "cuda")
    checked = zinc(*args, "--tier", "cuda", env={"ZINC_VALIDATE": "64"})
    cpu = zinc(*args, "--tier", "cpu")
    for r in (plain, checked, cpu):
        assert r.returncode == 0, r.stderr.decode()
    line = parse_line(checked.stderr.decode())
    assert line["validation"] == "bitwise" and line["failures"] == "0", line
    assert line["validated"].split("/")[0] == line["steps"], line  # every step compared
    assert checked.stdout == plain.stdout == cpu.stdout


# ZINC_TEST_CORRUPT=NAME:LAYER -> the op the failure must name (layer 1; every layer before the
# last has the CPU tier's row count, so each name is compared).
CORRUPT_CASES = [
    ("Qcur", "attn_q matmul"),
    ("Vcur", "attn_v matmul"),
    ("kqv_out", "attention (rope_kv, attention)"),
    ("attn_out", "attn_output matmul"),
    ("ffn_inp", "attention residual add"),
    ("ffn_up", "ffn_up matmul"),
    ("ffn_glu", "glu"),
    ("ffn_out", "ffn_down matmul"),
    ("l_out", "ffn residual add"),
]


@pytest.mark.parametrize("model", MODELS, ids=[m.stem for m in MODELS])
def test_validation_names_the_corrupted_layer_and_op(model):
    need(model)
    if not has_cuda():
        return
    L = n_layer_of(model)
    assert L >= 3, "needs a model of 3 or more layers (layer 1 not the last)"
    for name, op in CORRUPT_CASES:
        pp, _, line, err = bench(model, env={"ZINC_VALIDATE": "2",
                                             "ZINC_TEST_CORRUPT": f"{name}:1"})
        assert line["failures"] == "2", (name, err)
        want = f"step 0 layer 1 op {op}: blk.1.{name}: "
        assert line["first_failure"].startswith(want), (name, line)
        # Bitwise: the count of values whose bits differ (at least the corrupted row 0).
        assert re.search(r": \d+ of \d+ values differ in bits", line["first_failure"]), line
        assert line["validation"] == "bitwise"
        assert line["cpu_fallback"] == "0" and line["tier"] == "cuda"


@pytest.mark.parametrize("model", MODELS, ids=[m.stem for m in MODELS])
def test_strict_validation_finishes_on_the_cpu(model):
    need(model)
    if not has_cuda():
        return
    env = {"ZINC_VALIDATE": "3", "ZINC_VALIDATE_STRICT": "1", "ZINC_TEST_CORRUPT": "l_out:1"}
    pp, tg, line, err = bench(model, env=env)
    assert line["tier"] == "cuda+cpu", err
    assert line["failures"] == "1"
    # Every step from the first (failing) one was served by the oracle.
    assert int(line["cpu_fallback"]) == pp["steps"] + tg["steps"]
    assert tg["devices"]["cuda"]["ops"] == 0 and tg["devices"]["cpu"]["ops"] > 0
    # The text equals the CPU tier's (the run finished on the CPU oracle).
    args = ("-m", model, "--prompt", "The capital of France is", "-n", "8", "--temp", "0",
            "--no-echo")
    cpu = zinc(*args, "--tier", "cpu")
    strict = zinc(*args, "--tier", "cuda", env=env)
    assert cpu.returncode == 0 and strict.returncode == 0, strict.stderr.decode()
    assert strict.stdout == cpu.stdout
    assert parse_line(strict.stderr.decode())["tier"] == "cuda+cpu"


def test_skip_layers_is_refused_on_cuda():
    need(MODELS[0])
    if not has_cuda():
        return
    r = zinc("bench", "-m", MODELS[0], "-p", "8", "-n", "0", "-r", "1", "--tier", "cuda",
             env={"ZINC_SKIP_LAYERS": "1"})
    err = r.stderr.decode().strip().splitlines()
    assert r.returncode != 0 and "CPU tier only" in err[-1], err


class Serve:
    """`zinc serve -m MODEL --port 0 ...` on the CUDA tier, with a stdlib client."""

    def __init__(self, model, *args, env=None):
        import tempfile
        import time
        self.log = tempfile.NamedTemporaryFile(prefix="zinc-serve-cuda-", suffix=".log")
        e = {k: v for k, v in os.environ.items() if k not in RUNTIME_ENV}
        e.update(env or {})
        self.proc = subprocess.Popen([str(ZINC), "serve", "-m", str(model), "--port", "0",
                                      "--alias", "m", *map(str, args)],
                                     stdout=subprocess.DEVNULL, stderr=self.log, env=e)
        deadline = time.monotonic() + 300
        while True:
            m = re.search(r"listening on http://([0-9.]+):(\d+)", self.err())
            if m:
                self.host, self.port = m.group(1), int(m.group(2))
                return
            assert self.proc.poll() is None, self.err()
            assert time.monotonic() < deadline, self.err()
            time.sleep(0.1)

    def err(self):
        return Path(self.log.name).read_text(errors="replace")

    def call(self, method, path, body=None):
        import http.client
        c = http.client.HTTPConnection(self.host, self.port, timeout=300)
        try:
            c.request(method, path, body=json.dumps(body) if body is not None else None,
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            return r.status, json.loads(r.read() or b"null")
        finally:
            c.close()

    def complete(self, prompt, n):
        st, j = self.call("POST", "/v1/completions", {"prompt": prompt, "max_tokens": n,
                                                      "temperature": 0, "ignore_eos": True})
        assert st == 200, j
        return j

    def stop(self):
        self.proc.terminate()
        assert self.proc.wait(timeout=60) == 0, self.err()
        self.log.close()


@pytest.mark.parametrize("model", MODELS, ids=[m.stem for m in MODELS])
def test_per_request_evidence_on_the_gpu(model):
    need(model)
    if not has_cuda():
        return
    import threading
    L = n_layer_of(model)
    srv = Serve(model, "--tier", "cuda", "--parallel", "4", "-c", "256", "--no-prefix-cache")
    try:
        j = srv.complete("Hello there", 6)
        ev = j["zinc"]["evidence"]
        assert ev["execution_tier"] == "cuda" and ev["steps"] == 6, ev
        assert ev["devices"]["cpu"]["ops"] == 0 and ev["cpu_fallback"] == 0
        assert ev["devices"]["cuda"]["by_op"]["attention"] == 6 * L
        assert ev["devices"]["cuda"]["by_op"]["embed"] == 6
        assert ev["devices"] == ev["step_totals"]  # alone: its share is the whole step
        _, before = srv.call("GET", "/health")
        out = {}
        jobs = {"a": ("One, two,", 5), "b": ("The quick brown fox", 19)}
        ts = [threading.Thread(target=lambda k=k: out.update({k: srv.complete(*jobs[k])}))
              for k in jobs]
        for t in ts:
            t.start()
        for t in ts:
            t.join(timeout=300)
        _, after = srv.call("GET", "/health")
        ea, eb = out["a"]["zinc"]["evidence"], out["b"]["zinc"]["evidence"]
        assert ea["steps"] == 5 and eb["steps"] == 19
        assert ea["step_totals"]["cuda"]["by_op"]["attention"] == 5 * L
        assert eb["step_totals"]["cuda"]["by_op"]["attention"] == 19 * L
        for key in ("ops", "weight_bytes", "act_bytes"):
            got = ea["devices"]["cuda"][key] + eb["devices"]["cuda"][key]
            want = after["evidence"]["devices"]["cuda"][key] - before["evidence"]["devices"]["cuda"][key]
            assert got == want, key
    finally:
        srv.stop()
    # A forced CPU op is reported by the request whose steps ran it.
    srv = Serve(model, "--tier", "cuda", "--parallel", "2", "-c", "256",
                env={"ZINC_CPU_OPS": "glu"})
    try:
        ev = srv.complete("Hello there", 4)["zinc"]["evidence"]
        assert ev["execution_tier"] == "cuda+cpu", ev
        assert ev["fallback_ops"] == {"glu": 4 * L} and ev["cpu_fallback"] == 4 * L
        assert ev["devices"]["cpu"]["by_op"] == {"glu": 4 * L}
        assert "glu" not in ev["devices"]["cuda"]["by_op"]
    finally:
        srv.stop()


def test_device_index_selects_or_is_refused():
    need(MODELS[0])
    if not has_cuda():
        return  # test_evidence_device.py checks the CPU-only behaviour
    out = zinc("--check", "-m", MODELS[0], "-d", "0").stdout.decode()
    dev = [ln for ln in out.splitlines() if " device: " in ln]
    assert len(dev) == 1 and "cuda:0 (" in dev[0], out
    r = zinc("-m", MODELS[0], "--prompt", "Hi", "-n", "2", "--tier", "cuda",
             env={"ZINC_DEVICE": "0"})
    assert r.returncode == 0 and "CUDA device 0" in r.stderr.decode(), r.stderr.decode()
    for args in (("--tier", "cuda", "-d", "99"), ("-d", "99")):  # auto too: it was asked for
        r = zinc("-m", MODELS[0], "--prompt", "Hi", "-n", "2", *args)
        # one error line (a synthetic model's short trained context may add a warning line)
        err = [ln for ln in r.stderr.decode().strip().splitlines() if "warning:" not in ln]
        assert r.returncode == 2 and len(err) == 1, err
        assert "-d 99: no usable CUDA device 99; usable devices found: 0 (" in err[0], err
