"""Start and stop a live `zinc serve` for the server test suites (tests/py/test_server_*.py).

The server listens on a free loopback port: it is started with --port 0 and the port is read
from its one "listening on http://HOST:PORT" line. Its stderr goes to a file so a long run never
blocks on a full pipe; the file is shown when it fails to start or to stop.
"""
import http.client
import json
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

BUILD = Path(os.environ.get("ZINC_BUILD_DIR", "build")).resolve()
SOURCE = Path(os.environ.get("ZINC_SOURCE_DIR", Path(__file__).resolve().parents[2]))
ZINC = BUILD / "zinc"
SMOL = SOURCE / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ID = "smol"

LISTEN_RE = re.compile(r"listening on http://([0-9.]+):(\d+)")


def need_server_deps():
    if not ZINC.exists():
        pytest.skip(f"{ZINC} not built")
    if not SMOL.exists():
        pytest.skip(f"{SMOL} missing (scripts/fetch-models)")
    pytest.importorskip("openai")


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # lower-case names
        self.body = body

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.body)


def http_call(host, port, method, path, body=None, data=None, headers=None, timeout=120):
    """One request on a fresh connection (stdlib only). `body` is sent as JSON, `data` raw."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        hdrs = {"Content-Type": "application/json"}
        hdrs.update(headers or {})
        payload = data if data is not None else (
            json.dumps(body).encode() if body is not None else None)
        conn.request(method, path, body=payload, headers=hdrs)
        r = conn.getresponse()
        out = r.read()
        return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, out)
    finally:
        conn.close()


class Server:
    """A running `zinc serve` (or `zinc -m FILE` with `serve=False`)."""

    def __init__(self, *args, env=None, serve=True, threads=2, timeout=120, model=SMOL):
        need_server_deps()
        if not Path(model).exists():
            pytest.skip(f"{model} missing (scripts/fetch-models)")
        self.log = tempfile.NamedTemporaryFile(prefix="zinc-serve-", suffix=".log", delete=False)
        cmd = [str(ZINC)] + (["serve"] if serve else [])
        cmd += ["-m", str(model), "--port", "0", "-t", str(threads), "--alias", MODEL_ID]
        cmd += [str(a) for a in args]
        full_env = dict(os.environ)
        full_env.pop("ZINC_API_KEY", None)
        full_env.update(env or {})
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log,
                                     stdin=subprocess.DEVNULL, env=full_env)
        deadline = time.monotonic() + timeout
        while True:
            m = LISTEN_RE.search(self.stderr())
            if m:
                self.host, self.port = m.group(1), int(m.group(2))
                break
            if self.proc.poll() is not None:
                raise AssertionError(f"zinc serve exited {self.proc.returncode}:\n{self.stderr()}")
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"zinc serve did not start:\n{self.stderr()}")
            time.sleep(0.05)
        self.url = f"http://{self.host}:{self.port}"

    def stderr(self):
        return Path(self.log.name).read_text(errors="replace")

    def client(self, api_key="unused", **kw):
        import openai
        kw.setdefault("max_retries", 0)
        kw.setdefault("timeout", 120)
        return openai.OpenAI(base_url=self.url + "/v1", api_key=api_key, **kw)

    def call(self, method, path, body=None, **kw):
        return http_call(self.host, self.port, method, path, body=body, **kw)

    def post(self, path, body=None, **kw):
        return self.call("POST", path, body=body, **kw)

    def get(self, path, **kw):
        return self.call("GET", path, **kw)

    def health(self):
        r = self.get("/health", timeout=30)
        assert r.status == 200, r.text
        return r.json()

    def wait_idle(self, timeout=10.0):
        """Wait until no slot is busy, nothing is queued and no KV block is held; return health."""
        deadline = time.monotonic() + timeout
        while True:
            h = self.health()
            if h["slots"]["busy"] == 0 and h["queue_depth"] == 0 and h["kv_blocks"]["used"] == 0:
                return h
            if time.monotonic() > deadline:
                return h
            time.sleep(0.02)

    def rss_kib(self):
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Signal the server and return its exit status (it must exit within `timeout`)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"zinc serve did not stop on {sig!r}:\n{self.stderr()}")
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self):
        self.kill()
        self.log.close()
        os.unlink(self.log.name)
