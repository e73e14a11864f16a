"""Model management (issue 17 item 5): `zinc pull`, `zinc list`, `zinc rm`, `zinc ps` and `-m NAME`.

Offline: the "index" is a local HTTP server in this process (PEP 503 pages plus the wheel files,
with HTTP Range, and knobs to cut a transfer part way, ignore Range, or lie about a sha256); the
catalog is a file made here (ZINC_CATALOG) naming tiny fake models packed into wheels made here
(tests/py/wheelmaker.py). Only the -m NAME / serve / ps tests use a real model (SmolLM2, from
scripts/fetch-models), linked into the test's models directory.
"""
import hashlib
import http.server
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from wheelmaker import make_wheel

BUILD = Path(os.environ.get("ZINC_BUILD_DIR", "build")).resolve()
SOURCE = Path(os.environ.get("ZINC_SOURCE_DIR", Path(__file__).resolve().parents[2]))
ZINC = BUILD / "zinc"
SMOL = SOURCE / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def data(seed, n):
    return random.Random(seed).randbytes(n)


# Two fake models: tiny-a in one (deflated) wheel, tiny-b in two chunk wheels joined in order.
TINY_A = data(1, 300_000)
TINY_B = (data(2, 150_000), data(3, 120_000))
MODELS = [
    {"name": "tiny-a", "tag": "q8_0", "aliases": ["ta"], "file": "tiny-a.Q8_0.gguf",
     "description": "a fake model in one wheel", "size": len(TINY_A),
     "sha256": hashlib.sha256(TINY_A).hexdigest(),
     "parts": [{"package": "zinc-tiny-a", "version": "1.0", "member": "zinc_tiny_a/tiny-a.gguf"}]},
    {"name": "tiny-b", "tag": "q4_k_m", "file": "tiny-b.gguf", "description": "two chunks",
     "size": sum(map(len, TINY_B)), "sha256": hashlib.sha256(b"".join(TINY_B)).hexdigest(),
     "parts": [{"package": f"zinc-tiny-b-part{i}", "version": "2.0",
                "member": f"zinc_tiny_b_part{i}/data/tiny-b.gguf.part0{i - 1}"} for i in (1, 2)]},
]


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


class Index(http.server.ThreadingHTTPServer):
    """/simple/<project>/ (PEP 503 links with #sha256=) and /files/<wheel> (with Range)."""
    daemon_threads = True

    def __init__(self, folder):
        super().__init__(("127.0.0.1", 0), Handler)
        self.folder = folder
        self.requests = []      # (path, Range header or None)
        self.cut_after = None   # send only this many bytes of a file, then drop the connection
        self.cuts_left = 0      # ... this many times (then serve normally)
        self.ignore_range = False
        self.bad_sha = False    # the index page gives a wrong sha256
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        s = self.server
        s.requests.append((self.path, self.headers.get("Range")))
        if self.path.startswith("/simple/"):
            project = self.path.split("/")[2]
            links = []
            for w in sorted(s.folder.glob("*.whl")):
                if normalize(w.name.split("-")[0]) == project:
                    sha = hashlib.sha256(w.read_bytes()).hexdigest()
                    if s.bad_sha:
                        sha = "0" * 64
                    # Relative links, as many indexes (devpi, a plain folder) write them.
                    links.append(f'<a href="../../files/{w.name}#sha256={sha}">{w.name}</a><br/>')
            if not links:
                return self.send_error(404)
            body = ("<!DOCTYPE html><html><body>" + "\n".join(links) + "</body></html>").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        f = s.folder / self.path.split("/")[-1]
        if not self.path.startswith("/files/") or not f.exists():
            return self.send_error(404)
        body = f.read_bytes()
        start = 0
        rng = self.headers.get("Range")
        if rng and not s.ignore_range:
            start = int(re.match(r"bytes=(\d+)-", rng).group(1))
            if start >= len(body):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        part = body[start:]
        if s.cut_after is not None and s.cuts_left > 0:
            s.cuts_left -= 1
            self.wfile.write(part[:s.cut_after])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)  # a dropped connection, mid-file
            return
        self.wfile.write(part)


@pytest.fixture
def index(tmp_path):
    folder = tmp_path / "wheels"
    folder.mkdir()
    make_wheel(folder, "zinc-tiny-a", "1.0", {"zinc_tiny_a/tiny-a.gguf": TINY_A},
               compression=zipfile.ZIP_DEFLATED)
    make_wheel(folder, "zinc-tiny-a", "0.9", {"zinc_tiny_a/tiny-a.gguf": b"an older one"})
    for i, chunk in enumerate(TINY_B, 1):
        make_wheel(folder, f"zinc-tiny-b-part{i}", "2.0",
                   {f"zinc_tiny_b_part{i}/data/tiny-b.gguf.part0{i - 1}": chunk})
    srv = Index(folder)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def write_catalog(path, models=MODELS):
    path.write_text(json.dumps({"models": models}))
    return path


@pytest.fixture
def env(tmp_path, index):
    """zinc's environment: this test's catalog, index, models and runtime folders; no pip
    settings from the machine (PIP_FIND_LINKS etc.)."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("PIP_", "ZINC_", "XDG_")) or k == "ZINC_STRICT"}
    e.update(HOME=str(tmp_path / "home"), ZINC_MODELS=str(tmp_path / "models"),
             ZINC_CATALOG=str(write_catalog(tmp_path / "catalog.json")),
             ZINC_INDEX_URL=index.url + "/simple/", ZINC_RUNTIME_DIR=str(tmp_path / "run"),
             PIP_CONFIG_FILE=os.devnull)
    return e


def zinc(env, *args, timeout=120, cwd=None):
    if not ZINC.exists():
        pytest.skip(f"{ZINC} not built")
    r = subprocess.run([str(ZINC), *map(str, args)], capture_output=True, timeout=timeout,
                       env=env, cwd=cwd)
    r.out, r.err = r.stdout.decode(), r.stderr.decode()
    return r


def ok(env, *args, **kw):
    r = zinc(env, *args, **kw)
    assert r.returncode == 0, r.err
    return r


def one_error(r, status, *needles):
    """Exit `status`, and stderr's last line is one "zinc: error: ..." holding every needle."""
    assert r.returncode == status, f"status {r.returncode}: {r.err}"
    errors = [l for l in r.err.splitlines() if l.startswith("zinc: error: ")]
    assert len(errors) == 1 and r.err.splitlines()[-1] == errors[0], r.err
    for n in needles:
        assert n in errors[0], f"{n!r} not in {errors[0]!r}"
    return errors[0]


def file_requests(index):
    return [(p, r) for p, r in index.requests if p.startswith("/files/")]


# ---------- pull ----------

def test_pull_downloads_checks_and_places_the_model(env, index, tmp_path):
    r = ok(env, "pull", "tiny-a")
    target = tmp_path / "models" / "tiny-a.Q8_0.gguf"
    assert r.out == f"tiny-a:q8_0 ready: {target} (293.0 KiB, sha256 ok)\n"
    assert target.read_bytes() == TINY_A
    assert not (tmp_path / "models" / ".partial").exists()  # the work folder is gone
    # The pinned version's wheel, not the other one on the page.
    assert [p for p, _ in file_requests(index)] == ["/files/zinc_tiny_a-1.0-py3-none-any.whl"]
    # Not a terminal: progress is a few plain lines (25% steps), never \r-redrawn.
    assert "\r" not in r.err
    assert "zinc_tiny_a-1.0-py3-none-any.whl 100.0%" in r.err, r.err
    assert "unpacking tiny-a.Q8_0.gguf 100.0%" in r.err, r.err


def test_pull_joins_a_chunked_model_and_accepts_aliases_and_tags(env, index, tmp_path):
    ok(env, "pull", "tiny-b:q4_k_m", "ta")
    assert (tmp_path / "models" / "tiny-b.gguf").read_bytes() == b"".join(TINY_B)
    assert (tmp_path / "models" / "tiny-a.Q8_0.gguf").read_bytes() == TINY_A


def test_a_second_pull_keeps_the_present_model(env, index):
    ok(env, "pull", "tiny-a")
    n = len(index.requests)
    r = ok(env, "pull", "tiny-a")
    assert "tiny-a:q8_0 is present" in r.err and "sha256 ok" in r.err, r.err
    assert len(index.requests) == n  # nothing asked of the index


def test_on_a_terminal_progress_is_a_redrawn_bar(env, index):
    if not ZINC.exists():
        pytest.skip(f"{ZINC} not built")
    import pty
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(ZINC), "pull", "tiny-b"], env=env, stdout=subprocess.DEVNULL,
                            stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 0, out
    text = out.decode()
    assert "\r\x1b[K  zinc_tiny_b_part1-2.0-py3-none-any.whl (1/2) [" in text, text
    assert re.search(r"\[#{30}\] 100\.0% +0\.1/0\.1 MiB +[0-9.]+ MiB/s", text), text
    assert "unpacking tiny-b.gguf [" in text, text


def test_a_second_pull_of_the_same_model_at_once_is_refused(env, tmp_path):
    import fcntl
    work = tmp_path / "models" / ".partial" / "tiny-a.Q8_0.gguf"
    work.mkdir(parents=True)
    with open(work / "lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as a running `zinc pull tiny-a` holds it
        one_error(zinc(env, "pull", "tiny-a"), 1, "another zinc pull of tiny-a:q8_0 is running")


def test_a_wrong_present_file_is_pulled_again(env, index, tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tiny-a.Q8_0.gguf").write_bytes(b"x" * len(TINY_A))
    r = ok(env, "pull", "tiny-a")
    assert "wrong sha256; pulling it again" in r.err, r.err
    assert (tmp_path / "models" / "tiny-a.Q8_0.gguf").read_bytes() == TINY_A


def test_a_dropped_connection_is_resumed_with_a_range_request(env, index, tmp_path):
    index.cut_after, index.cuts_left = 100_000, 1
    r = ok(env, "pull", "tiny-a")
    assert "resuming at" in r.err, r.err
    reqs = file_requests(index)
    assert len(reqs) == 2 and reqs[0][1] is None, reqs
    assert reqs[1][1] == "bytes=100000-", reqs
    assert (tmp_path / "models" / "tiny-a.Q8_0.gguf").read_bytes() == TINY_A


def test_an_interrupted_pull_keeps_its_partial_and_the_next_run_resumes(env, index, tmp_path):
    index.cut_after, index.cuts_left = 50_000, 3  # every attempt of this run is cut
    r = zinc(env, "pull", "tiny-a")
    line = one_error(r, 1, index.url + "/files/zinc_tiny_a-1.0-py3-none-any.whl",
                     "zinc pull again resumes")
    partial = tmp_path / "models" / ".partial" / "tiny-a.Q8_0.gguf" / \
        "zinc_tiny_a-1.0-py3-none-any.whl.partial"
    have = partial.stat().st_size
    assert have == 150_000, line  # three cut attempts of 50,000 bytes each, appended
    assert not (tmp_path / "models" / "tiny-a.Q8_0.gguf").exists()
    listing = ok(env, "list").out
    assert "(partial: tiny-a:q8_0, 146.5 KiB so far; zinc pull resumes it" in listing, listing
    index.requests.clear()
    r = ok(env, "pull", "tiny-a")
    assert f"resuming zinc_tiny_a-1.0-py3-none-any.whl at" in r.err, r.err
    assert file_requests(index)[0][1] == f"bytes={have}-"
    assert (tmp_path / "models" / "tiny-a.Q8_0.gguf").read_bytes() == TINY_A


def test_a_partial_that_is_already_whole_is_not_downloaded_again(env, index, tmp_path):
    # Killed after the last byte but before the rename: the Range request gets 416 and the
    # wheel is checked (sha256) and used.
    wheel = index.folder / "zinc_tiny_a-1.0-py3-none-any.whl"
    work = tmp_path / "models" / ".partial" / "tiny-a.Q8_0.gguf"
    work.mkdir(parents=True)
    (work / (wheel.name + ".partial")).write_bytes(wheel.read_bytes())
    ok(env, "pull", "tiny-a")
    assert file_requests(index) == [(f"/files/{wheel.name}", f"bytes={wheel.stat().st_size}-")]
    assert (tmp_path / "models" / "tiny-a.Q8_0.gguf").read_bytes() == TINY_A


def test_a_server_that_ignores_range_gets_a_fresh_download(env, index, tmp_path):
    index.cut_after, index.cuts_left = 50_000, 3
    zinc(env, "pull", "tiny-a")
    index.ignore_range = True
    ok(env, "pull", "tiny-a")
    assert (tmp_path / "models" / "tiny-a.Q8_0.gguf").read_bytes() == TINY_A


def test_the_models_sha256_is_checked_and_a_wrong_one_keeps_nothing(env, index, tmp_path):
    bad = [dict(MODELS[0], sha256="ab" * 32)]
    env["ZINC_CATALOG"] = str(write_catalog(tmp_path / "bad.json", bad))
    r = zinc(env, "pull", "tiny-a")
    one_error(r, 1, "tiny-a:q8_0: the model read from its wheels has sha256 " + MODELS[0]["sha256"],
              "the catalog expects " + "ab" * 32, "nothing kept")
    assert not (tmp_path / "models" / "tiny-a.Q8_0.gguf").exists()
    assert not (tmp_path / "models" / ".partial" / "tiny-a.Q8_0.gguf").exists()


def test_a_wheel_whose_sha256_is_not_the_indexs_is_removed(env, index, tmp_path):
    index.bad_sha = True
    r = zinc(env, "pull", "tiny-a")
    one_error(r, 1, "the index says " + "0" * 64, "removed, run zinc pull again")
    work = tmp_path / "models" / ".partial" / "tiny-a.Q8_0.gguf"
    assert not list(work.glob("*.whl*"))


def test_unknown_names_get_did_you_mean_and_status_2(env):
    one_error(zinc(env, "pull", "tiny-c"), 2, "unknown model 'tiny-c'", "did you mean tiny-a?")
    line = one_error(zinc(env, "pull", "llama-70b"), 2, "not in the catalog (tiny-a, tiny-b)")
    assert "did you mean" not in line


def test_names_are_escaped_in_errors(env):
    for args in (["pull", "x\x1b[2J"], ["rm", "x\x1b[2J"], ["-m", "x\x1b[2J", "--prompt", "hi"]):
        r = zinc(env, *args)
        assert r.returncode == 2 and "\x1b" not in r.err and "x\\u001b[2J" in r.err, r.err


def test_network_failures_name_the_url_and_the_cause(env, tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    env["ZINC_INDEX_URL"] = f"http://127.0.0.1:{port}/simple"
    one_error(zinc(env, "pull", "tiny-a"), 1,
              f"cannot fetch http://127.0.0.1:{port}/simple/zinc-tiny-a/", "onnect",
              "the index page of zinc-tiny-a==1.0")


def test_a_project_the_index_lacks_is_a_404_naming_the_page(env, index, tmp_path):
    missing = [dict(MODELS[0], parts=[dict(MODELS[0]["parts"][0], package="zinc-nowhere")])]
    env["ZINC_CATALOG"] = str(write_catalog(tmp_path / "missing.json", missing))
    one_error(zinc(env, "pull", "tiny-a"), 1, index.url + "/simple/zinc-nowhere/",
              "HTTP status 404")
    wrong_version = [dict(MODELS[0], parts=[dict(MODELS[0]["parts"][0], version="7.7")])]
    env["ZINC_CATALOG"] = str(write_catalog(tmp_path / "v.json", wrong_version))
    one_error(zinc(env, "pull", "tiny-a"), 1, "lists no wheel of zinc-tiny-a==7.7")


def test_a_full_disk_is_one_line_naming_the_file(env, tmp_path):
    work = tmp_path / "models" / ".partial" / "tiny-a.Q8_0.gguf"
    work.mkdir(parents=True)
    (work / "zinc_tiny_a-1.0-py3-none-any.whl.partial").symlink_to("/dev/full")
    one_error(zinc(env, "pull", "tiny-a"), 1, "cannot write " + str(work), "No space left on device")


def test_too_little_free_space_is_refused_before_downloading(env, index, tmp_path):
    huge = [dict(MODELS[0], size=1 << 60)]
    env["ZINC_CATALOG"] = str(write_catalog(tmp_path / "huge.json", huge))
    one_error(zinc(env, "pull", "tiny-a"), 1, "not enough space in " + str(tmp_path / "models"),
              "is free")
    assert not file_requests(index)


def test_a_models_directory_that_cannot_be_made_is_one_line(env, tmp_path):
    (tmp_path / "a-file").write_text("")
    env["ZINC_MODELS"] = str(tmp_path / "a-file" / "models")
    one_error(zinc(env, "pull", "tiny-a"), 1, "cannot create " + str(tmp_path / "a-file"),
              "Not a directory", "ZINC_MODELS or --models-dir")


def test_pips_index_settings_are_used_when_zinc_has_none(env, index, tmp_path):
    del env["ZINC_INDEX_URL"]
    env["PIP_INDEX_URL"] = index.url + "/simple"
    ok(env, "pull", "tiny-a", "--models-dir", tmp_path / "m1")
    del env["PIP_INDEX_URL"]
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\ntimeout = 60\nindex-url = {index.url}/simple\n")
    env["PIP_CONFIG_FILE"] = str(conf)
    ok(env, "pull", "tiny-b", "--models-dir", tmp_path / "m2")
    assert (tmp_path / "m2" / "tiny-b.gguf").read_bytes() == b"".join(TINY_B)


def test_an_index_password_is_never_printed(env, index, tmp_path):
    env["ZINC_INDEX_URL"] = index.url.replace("http://", "http://me:s3cret@") + "/simple"
    r = ok(env, "pull", "tiny-a")
    assert "s3cret" not in r.err and "http://****@127.0.0.1" in r.err, r.err
    env["ZINC_INDEX_URL"] = "http://me:s3cret@127.0.0.1:9/simple"
    line = one_error(zinc(env, "pull", "tiny-b"), 1, "cannot fetch http://****@127.0.0.1:9/simple/")
    assert "s3cret" not in line


def test_a_wheel_in_pips_find_links_is_used_without_the_index(env, index, tmp_path):
    env.update(PIP_FIND_LINKS=str(index.folder), PIP_NO_INDEX="1")
    del env["ZINC_INDEX_URL"]
    r = ok(env, "pull", "tiny-a")
    assert "(pip --find-links)" in r.err
    assert not index.requests
    assert (tmp_path / "models" / "tiny-a.Q8_0.gguf").read_bytes() == TINY_A


# ---------- list ----------

def test_list_shows_name_size_quant_and_modified(env, tmp_path):
    r = ok(env, "list")
    assert r.out.split() == ["NAME", "SIZE", "QUANT", "MODIFIED", "FILE"]
    assert "no models in" in r.err and "zinc pull NAME" in r.err
    ok(env, "pull", "tiny-a", "tiny-b")
    lines = ok(env, "list").out.splitlines()
    assert lines[0].split() == ["NAME", "SIZE", "QUANT", "MODIFIED", "FILE"]
    assert re.fullmatch(r"tiny-a:q8_0\s+293\.0 KiB\s+Q8_0\s+\d{4}-\d\d-\d\d \d\d:\d\d\s+"
                        r"tiny-a\.Q8_0\.gguf", lines[1]), lines
    assert lines[2].startswith("tiny-b:q4_k_m") and "Q4_K_M" in lines[2], lines
    j = json.loads(ok(env, "list", "--json").out)
    assert j["models_dir"] == str(tmp_path / "models")
    assert [(m["name"], m["size"], m["quant"], m["catalog"]) for m in j["models"]] == [
        ("tiny-a:q8_0", len(TINY_A), "Q8_0", True),
        ("tiny-b:q4_k_m", sum(map(len, TINY_B)), "Q4_K_M", True)]
    assert abs(j["models"][0]["modified"] - time.time()) < 600


def test_list_shows_a_gguf_that_is_not_from_the_catalog_with_its_file_type(env, tmp_path):
    if not SMOL.exists():
        pytest.skip(f"{SMOL} missing (scripts/fetch-models)")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "my-model.gguf").symlink_to(SMOL)
    (tmp_path / "models" / "notes.txt").write_text("not a model")
    lines = ok(env, "list").out.splitlines()
    assert len(lines) == 2 and lines[1].split()[:4] == ["my-model", "93.8", "MiB", "Q4_1"], lines


def test_list_catalog_shows_every_model_and_whether_it_is_pulled(env):
    ok(env, "pull", "tiny-b")
    lines = ok(env, "list", "--catalog").out.splitlines()
    assert lines[0].split() == ["NAME", "SIZE", "PULLED", "PACKAGES", "DESCRIPTION"]
    assert lines[1].split()[:5] == ["tiny-a:q8_0", "293.0", "KiB", "no", "zinc-tiny-a==1.0"]
    assert lines[2].split()[:4] == ["tiny-b:q4_k_m", "263.7", "KiB", "yes"]
    assert "(+1 parts)" in lines[2]


def test_the_built_in_catalog_is_the_one_fetch_models_reads(env):
    # One definition: src/cli/catalog.json is compiled into zinc and read by scripts/fetch-models.
    del env["ZINC_CATALOG"]
    j = json.loads(ok(env, "list", "--catalog", "--json").out)
    assert j["catalog"] == "(built in)"
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("fetch_models", str(SOURCE / "scripts" / "fetch-models"))
    spec = importlib.util.spec_from_loader("fetch_models", loader)
    fm = importlib.util.module_from_spec(spec)
    loader.exec_module(fm)
    # (fetch-models' non-GGUF test assets, kept whole, are not catalog models: the MiniLM wheel)
    gguf = {k: s for k, s in fm.MODELS.items() if not s.get("whole")}
    assert sorted((m["file"], m["sha256"], m["size"]) for m in j["models"]) == \
        sorted((s["file"], s["sha256"], s["size"]) for s in gguf.values())
    assert set(gguf) == {"smollm2", "gemma3", "qwen2.5-coder"}
    assert set(fm.MODELS) - set(gguf) == {"minilm"}
    default = [m for m in j["models"] if m["default"]]
    assert [m["file"] for m in default] == [SMOL.name]


def test_a_broken_catalog_is_one_line_naming_the_field(env, tmp_path):
    broken = [dict(MODELS[0], sha256="nothex")]
    env["ZINC_CATALOG"] = str(write_catalog(tmp_path / "broken.json", broken))
    one_error(zinc(env, "list"), 2, "broken.json: models[0].sha256 must be 64 lowercase hex")


# ---------- rm ----------

def test_rm_deletes_and_a_missing_model_is_an_error(env, tmp_path):
    ok(env, "pull", "tiny-a")
    r = ok(env, "rm", "tiny-a")
    assert r.out == f"deleted tiny-a:q8_0 ({tmp_path / 'models' / 'tiny-a.Q8_0.gguf'})\n"
    assert not (tmp_path / "models" / "tiny-a.Q8_0.gguf").exists()
    one_error(zinc(env, "rm", "tiny-a"), 2, "'tiny-a' is not in " + str(tmp_path / "models"),
              "zinc list shows what is")
    ok(env, "pull", "tiny-b")
    one_error(zinc(env, "rm", "tiny-bb"), 2, "did you mean tiny-b:q4_k_m?")


def test_rm_drops_a_partial_download(env, index, tmp_path):
    index.cut_after, index.cuts_left = 50_000, 3
    zinc(env, "pull", "tiny-a")
    assert (tmp_path / "models" / ".partial").exists()
    assert ok(env, "rm", "tiny-a").out == "deleted the partial download of tiny-a:q8_0\n"
    assert not (tmp_path / "models" / ".partial").exists()


def test_rm_deletes_a_gguf_that_is_not_from_the_catalog(env, tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "mine.gguf").write_bytes(b"GGUF")
    ok(env, "rm", "mine")
    assert not (tmp_path / "models" / "mine.gguf").exists()


# ---------- -m NAME ----------

def test_dash_m_names_a_model_not_yet_pulled_or_unknown(env):
    one_error(zinc(env, "-m", "tiny-a", "--prompt", "hi"), 2,
              "tiny-a:q8_0 is not pulled yet; run `zinc pull tiny-a`")
    one_error(zinc(env, "-m", "tiny-aa", "--prompt", "hi"), 2, "tiny-aa: no such file",
              "did you mean tiny-a?")
    # Something that looks like a path stays a path: the loader names the missing file.
    one_error(zinc(env, "-m", "nowhere/x.gguf", "--prompt", "hi"), 2, "nowhere/x.gguf")


@pytest.fixture
def smol_pulled(env, tmp_path):
    """The built-in catalog, with SmolLM2 'pulled' (linked) into the test's models folder."""
    if not SMOL.exists():
        pytest.skip(f"{SMOL} missing (scripts/fetch-models)")
    del env["ZINC_CATALOG"]
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / SMOL.name).symlink_to(SMOL)
    return env


def test_dash_m_runs_a_pulled_catalog_model_by_name(smol_pulled, tmp_path):
    for name in ("smollm2-135m", "smollm2-135m:q4_1", "smollm2"):
        r = ok(smol_pulled, "-m", name, "--prompt", "The capital of France is", "-n", "4",
               "--temp", "0", "-q", cwd=tmp_path)
        assert r.out.startswith("The capital of France is"), r.out
    r = ok(smol_pulled, "--check", "-m", "smollm2-135m", cwd=tmp_path)
    assert f"READY model: {tmp_path / 'models' / SMOL.name}: GGUF v3" in r.out, r.out
    r = ok(smol_pulled, "inspect", "smollm2-135m", "--no-tensors", cwd=tmp_path)
    assert r.out.startswith(f"file: {tmp_path / 'models' / SMOL.name}\n"), r.out[:200]
    r = zinc(smol_pulled, "--check", "-m", "smollm2-13", cwd=tmp_path)
    assert r.returncode == 1 and "FAIL  model: smollm2-13: no such file" in r.out, r.out
    assert "did you mean smollm2-135m?" in r.out, r.out


def test_without_dash_m_the_catalogs_default_model_is_pulled_on_first_use(env, index, tmp_path):
    # The catalog's "default": true entry (SmolLM2 in the built-in one; tiny-a here, which is not
    # a GGUF, so the load fails once it is there) is pulled into the models directory.
    env["ZINC_CATALOG"] = str(write_catalog(tmp_path / "d.json", [dict(MODELS[0], default=True)]))
    cwd = tmp_path / "cwd"  # not tmp_path, whose models/ (the models directory) is ./models
    cwd.mkdir()
    r = zinc(env, "--prompt", "hi", "-n", "1", cwd=cwd)
    assert r.err.startswith("zinc: no -m given; pulling the default model tiny-a:q8_0 into "
                            + str(tmp_path / "models")), r.err
    assert (tmp_path / "models" / "tiny-a.Q8_0.gguf").read_bytes() == TINY_A
    one_error(r, 2, str(tmp_path / "models" / "tiny-a.Q8_0.gguf"))  # not a GGUF
    index.requests.clear()
    r = zinc(env, "--prompt", "hi", "-n", "1", cwd=cwd)
    assert "pulling" not in r.err and not index.requests  # found there the second time
    del env["ZINC_INDEX_URL"]
    env["ZINC_MODELS"] = str(tmp_path / "elsewhere")
    env["PIP_INDEX_URL"] = "http://127.0.0.1:9/simple"
    one_error(zinc(env, "--prompt", "hi", cwd=cwd), 1,
              "no -m given, and pulling the default model failed: cannot fetch "
              "http://127.0.0.1:9/simple/zinc-tiny-a/")


def test_hf_flags_point_at_zinc_pull(env):
    one_error(zinc(env, "-hf", "bartowski/Some-Model-GGUF"), 2, "zinc pull NAME",
              "zinc list --catalog", "Hugging Face")


# ---------- ps, and rm of a model in use ----------

def start_server(env, *args):
    proc = subprocess.Popen([str(ZINC), "serve", *args, "--port", "0", "-t", "2", "-c", "256",
                             "--parallel", "1"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    lines = []
    for line in proc.stderr:
        lines.append(line)
        m = re.search(r"listening on http://[0-9.]+:(\d+)", line)
        if m:
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep it drained
            return proc, int(m.group(1))
    raise AssertionError("zinc serve did not start: " + "".join(lines))


def test_ps_lists_running_servers_and_rm_refuses_their_model(smol_pulled, tmp_path):
    if not ZINC.exists():
        pytest.skip(f"{ZINC} not built")
    assert ok(smol_pulled, "ps").out.split() == ["NAME", "PID", "ADDRESS", "SIZE", "STATUS",
                                                 "UPTIME", "MODEL", "FILE"]
    proc, port = start_server(smol_pulled, "-m", "smollm2-135m")
    try:
        j = json.loads(ok(smol_pulled, "ps", "--json").out)
        assert [(s["name"], s["pid"], s["url"], s["status"]) for s in j["servers"]] == [
            ("smollm2-135m", proc.pid, f"http://127.0.0.1:{port}", "ok")]
        assert j["servers"][0]["path"] == str(tmp_path / "models" / SMOL.name)
        lines = ok(smol_pulled, "ps").out.splitlines()
        assert lines[1].split()[:4] == ["smollm2-135m", str(proc.pid), f"http://127.0.0.1:{port}",
                                        "93.8"], lines
        one_error(zinc(smol_pulled, "rm", "smollm2-135m"), 1,
                  f"in use by the zinc server pid {proc.pid} on http://127.0.0.1:{port}",
                  "--force")
        assert (tmp_path / "models" / SMOL.name).exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert json.loads(ok(smol_pulled, "ps", "--json").out)["servers"] == []
    assert not list((tmp_path / "run" / "servers").glob("*.json"))  # it unregistered itself
    ok(smol_pulled, "rm", "smollm2-135m")
    assert SMOL.exists()  # the link went, not the file it points at


def test_ps_drops_the_entry_of_a_killed_server(env, tmp_path):
    reg = tmp_path / "run" / "servers"
    reg.mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    (reg / f"{dead.pid}.json").write_text(json.dumps(
        {"pid": dead.pid, "host": "127.0.0.1", "port": 1, "model": "gone", "path": "/x.gguf",
         "started": 0}))
    (reg / "junk.json").write_text("{not json")
    assert json.loads(ok(env, "ps", "--json").out)["servers"] == []
    assert not list(reg.glob("*.json"))
