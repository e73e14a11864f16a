"""`-d N` / `--device N` and ZINC_DEVICE (issue 5 item 5, in the runtime layer: docs/runtime.md)
on run, chat, bench, serve and --check, as far as it can be checked without a GPU (CI):
  * with --tier cpu the index is ignored, and the tier reason says so;
  * with --tier cuda on a machine without a usable device (or a CPU-only build) it is one error
    line naming the index, status 2; with auto the CPU runs and the reason names the index;
  * a bad value (-d -1, -d 5000, ZINC_DEVICE=abc) is one error line, status 2;
  * --check reports the device a run would use.
The GPU side (the device is used, a missing index names the devices found) is in
test_evidence_cuda.py.
"""
import os
import subprocess
from pathlib import Path

import pytest

from server_harness import Server

BUILD = Path(os.environ.get("ZINC_BUILD_DIR", "build")).resolve()
SOURCE = Path(os.environ.get("ZINC_SOURCE_DIR", Path(__file__).resolve().parents[2]))
ZINC = BUILD / "zinc"
SMOL = SOURCE / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
RUNTIME_ENV = ("ZINC_TIER", "ZINC_DEVICE", "ZINC_VALIDATE", "ZINC_VALIDATE_STRICT",
               "ZINC_SKIP_LAYERS", "ZINC_CPU_OPS", "ZINC_TEST_CORRUPT")


def zinc(*args, env=None, stdin=None, timeout=300):
    if not ZINC.exists():
        pytest.skip(f"{ZINC} not built")
    if not SMOL.exists():
        pytest.skip(f"{SMOL} missing (scripts/fetch-models)")
    e = {k: v for k, v in os.environ.items() if k not in RUNTIME_ENV}
    e.update(env or {})
    return subprocess.run([str(ZINC), *map(str, args)], capture_output=True, timeout=timeout,
                          env=e, input=stdin)


def has_cuda():
    out = zinc("--check", "-m", SMOL).stdout.decode()
    return any(" tier: cuda:" in ln for ln in out.splitlines())


def one_error_line(r):
    err = r.stderr.decode().strip().splitlines()
    assert r.returncode == 2 and len(err) == 1, (r.returncode, err)
    assert err[0].startswith("zinc: error: "), err
    return err[0]


RUN = ("-m", SMOL, "--prompt", "Hi", "-n", "2", "--temp", "0")


def test_cpu_tier_ignores_the_device_and_says_so():
    r = zinc(*RUN, "--tier", "cpu", "-d", "3")
    assert r.returncode == 0, r.stderr.decode()
    assert "zinc: tier cpu: --tier=cpu: the CPU tier was asked for (-d 3 ignored" in \
        r.stderr.decode()
    r = zinc(*RUN, "--tier", "cpu", env={"ZINC_DEVICE": "2"})
    assert r.returncode == 0 and "(ZINC_DEVICE 2 ignored" in r.stderr.decode()
    r = zinc("bench", "-m", SMOL, "-p", "8", "-n", "0", "-r", "1", "--tier", "cpu",
             "--device", "1")
    assert r.returncode == 0 and "(-d 1 ignored" in r.stderr.decode(), r.stderr.decode()
    r = zinc("chat", "-m", SMOL, "--tier", "cpu", "-d", "1", stdin=b"")
    assert r.returncode == 0 and "(-d 1 ignored" in r.stderr.decode(), r.stderr.decode()


def test_check_reports_the_device():
    out = zinc("--check", "-m", SMOL, "--tier", "cpu", "-d", "1").stdout.decode()
    dev = [ln for ln in out.splitlines() if " device: " in ln]
    assert len(dev) == 1, out
    assert "cpu (-d 1 not used: the CPU tier runs); devices found: " in dev[0], dev
    if not has_cuda():
        out = zinc("--check", "-m", SMOL).stdout.decode()
        dev = [ln for ln in out.splitlines() if " device: " in ln]
        assert len(dev) == 1 and "device: cpu; devices found: none (" in dev[0], out


def test_cuda_with_a_device_that_cannot_be_used_is_one_line():
    for cmd in (RUN, ("bench", "-m", SMOL, "-p", "8", "-n", "0", "-r", "1"),
                ("serve", "-m", SMOL, "--port", "0", "-c", "256")):
        line = one_error_line(zinc(*cmd, "--tier", "cuda", "-d", "1"))
        assert "-d 1" in line and "CUDA" in line, line
    line = one_error_line(zinc(*RUN, "--tier", "cuda", env={"ZINC_DEVICE": "1"}))
    assert "ZINC_DEVICE 1" in line, line


def test_auto_without_a_device_runs_on_the_cpu_and_names_the_index():
    if has_cuda():
        return  # with a device, auto + a missing index is an error: test_evidence_cuda.py
    r = zinc(*RUN, "-d", "1")
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert "zinc: tier cpu: auto: using the CPU tier because" in err and "(-d 1 asked for)" in err


@pytest.mark.parametrize("args,env,words", [
    (("-d", "-1"), {}, "-d"),
    (("--device", "5000"), {}, "--device"),
    ((), {"ZINC_DEVICE": "abc"}, "ZINC_DEVICE=abc: expected an integer in [0, 1023]"),
    ((), {"ZINC_DEVICE": "-2"}, "ZINC_DEVICE=-2"),
])
def test_bad_device_values_are_one_line(args, env, words):
    line = one_error_line(zinc(*RUN, *args, env=env))
    assert words in line, line


def test_serve_reports_the_ignored_device_in_health():
    s = Server("--tier", "cpu", "-d", "2", "--parallel", "1", "-c", "256", env={})
    try:
        assert "(-d 2 ignored" in s.health()["evidence"]["tier_reason"]
    finally:
        assert s.stop() == 0
        s.close()
