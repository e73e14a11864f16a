"""Three `zinc serve` replicas behind nginx (docs/deploy.md), one stopped mid-run.

nginx (Debian's package, scripts/install-deps) runs as the test user with a temporary prefix; its
http-level configuration is the `nginx` block of docs/deploy.md with only the ports changed, so
the documented configuration is the tested one. Everything listens on loopback.

The run: find which replica each X-Session-Id key maps to; open streams on all three replicas;
SIGTERM replica C while its streams flow; its streams must end with the `shutting_down` error event
and [DONE], the others must complete, new requests with C's keys must be answered by A or B; C is
restarted on its port and must get its keys back; a SIGKILL mid-stream cuts the client's body.
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from server_harness import LISTEN_RE, SMOL, SOURCE, ZINC, need_server_deps

DOC = SOURCE / "docs" / "deploy.md"
DOC_PORTS = ("8081", "8082", "8083")
STREAM_TOKENS = 48


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nginx_binary():
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx")
                                      else None)
    if not found:
        pytest.skip("nginx not installed (scripts/install-deps)")
    return found


class Replica:
    """One `zinc serve` on a fixed loopback port (restartable on the same port)."""

    def __init__(self, port, workdir):
        self.port = port
        self.addr = f"127.0.0.1:{port}"
        self.workdir = Path(workdir)
        self.proc = None
        self.starts = 0

    def start(self, shutdown_timeout=0, timeout=60):
        self.starts += 1
        self.log = self.workdir / f"replica-{self.port}-{self.starts}.log"
        with open(self.log, "wb") as err:
            self.proc = subprocess.Popen(
                [str(ZINC), "serve", "-m", str(SMOL), "--port", str(self.port), "-t", "1",
                 "--parallel", "2", "-c", "512", "--alias", "smol",
                 "--shutdown-timeout", str(shutdown_timeout)],
                stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not LISTEN_RE.search(self.stderr()):
            assert self.proc.poll() is None, f"replica exited:\n{self.stderr()}"
            assert time.monotonic() < deadline, f"replica did not start:\n{self.stderr()}"
            time.sleep(0.05)

    def stderr(self):
        return self.log.read_text(errors="replace")

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=timeout)
        return self.proc.returncode

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def nginx_conf(prefix, listen, replicas):
    """The documented configuration with the test's ports, inside a minimal main config."""
    blocks = re.findall(r"```nginx\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 1, "docs/deploy.md must hold exactly one ```nginx block"
    site = blocks[0]
    for doc_port, r in zip(DOC_PORTS, replicas):
        assert f"127.0.0.1:{doc_port} " in site
        site = site.replace(f"127.0.0.1:{doc_port} ", f"{r.addr} ")
    assert "listen 127.0.0.1:8080;" in site
    site = site.replace("listen 127.0.0.1:8080;", f"listen 127.0.0.1:{listen};")
    (prefix / "zinc.conf").write_text(site)
    # Run by root (a container), nginx would switch its workers to `nobody`; keep the test user.
    user = "user root;\n" if os.geteuid() == 0 else ""
    temps = "".join(f"    {k}_temp_path {prefix}/{k};\n"
                    for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    main = (f"{user}worker_processes 1;\npid {prefix}/nginx.pid;\n"
            f"error_log {prefix}/error.log info;\nevents {{ worker_connections 256; }}\n"
            "http {\n"
            "    log_format up '$request $status $upstream_addr $upstream_status "
            "$http_x_session_id';\n"
            f"    access_log {prefix}/access.log up;\n{temps}"
            f"    include {prefix}/zinc.conf;\n}}\n")
    (prefix / "nginx.conf").write_text(main)
    return prefix / "nginx.conf"


def body_for(max_tokens, stream):
    return {"model": "smol", "messages": [{"role": "user", "content": "Tell me about rivers."}],
            "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0, "stream": stream}


def post(port, key, max_tokens=1, stream=False, timeout=60):
    """A request through nginx: (status, answering upstream list, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body_for(max_tokens, stream)),
                     headers={"Content-Type": "application/json", "X-Session-Id": key})
        r = conn.getresponse()
        return r.status, r.getheader("X-Zinc-Upstream", ""), r.read()
    finally:
        conn.close()


class Stream(threading.Thread):
    """One streamed request through nginx, read event by event on its own thread."""

    def __init__(self, port, key, tokens=STREAM_TOKENS):
        super().__init__(daemon=True)
        self.port, self.key, self.tokens = port, key, tokens
        self.events = []  # decoded JSON payloads, or "[DONE]"
        self.flowing = threading.Event()  # the first content delta arrived
        self.error = None  # an exception that ended the read (a cut connection)
        self.upstream = ""
        self.status = None

    def run(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            conn.request("POST", "/v1/chat/completions",
                         body=json.dumps(body_for(self.tokens, True)),
                         headers={"Content-Type": "application/json", "X-Session-Id": self.key})
            r = conn.getresponse()
            self.status, self.upstream = r.status, r.getheader("X-Zinc-Upstream", "")
            while True:
                line = r.readline()
                if not line:
                    break
                if not line.startswith(b"data: "):
                    continue
                data = line[6:].strip()
                ev = "[DONE]" if data == b"[DONE]" else json.loads(data)
                self.events.append(ev)
                if isinstance(ev, dict) and any(c["delta"].get("content")
                                                for c in ev.get("choices", [])):
                    self.flowing.set()
        except Exception as e:  # noqa: BLE001 — the cut itself is what some checks look for
            self.error = e
        finally:
            self.flowing.set()
            conn.close()

    def finish_reason(self):
        for ev in self.events:
            if isinstance(ev, dict):
                for c in ev.get("choices", []):
                    if c.get("finish_reason"):
                        return c["finish_reason"]
        return None


@pytest.fixture
def cluster():
    need_server_deps()
    nginx = nginx_binary()
    work = Path(tempfile.mkdtemp(prefix="zinc-deploy-"))
    replicas = [Replica(free_port(), work) for _ in range(3)]
    proc = None
    try:
        for r in replicas:
            r.start()
        listen = free_port()
        conf = nginx_conf(work, listen, replicas)
        proc = subprocess.Popen([nginx, "-p", str(work), "-c", str(conf), "-e",
                                 str(work / "error.log"), "-g", "daemon off;"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while True:
            assert proc.poll() is None, f"nginx exited: {proc.stderr.read().decode()}"
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", listen)) == 0:
                    break
            assert time.monotonic() < deadline, "nginx did not listen"
            time.sleep(0.05)
        yield listen, replicas, work
    finally:
        if proc and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
        for r in replicas:
            r.kill()
        if os.environ.get("ZINC_KEEP_DEPLOY_LOGS"):
            print(f"logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def last_upstream(header):
    return header.split(",")[-1].strip()


def rejoin(port, replica, its_keys, timeout=20):
    """Wait until `replica`'s keys are answered by it again."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    while True:
        status, up, body = post(port, its_keys[0])
        assert status == 200, body
        if up == replica.addr:
            break
        assert time.monotonic() < deadline, f"{replica.addr} did not rejoin: answered by {up}"
        time.sleep(0.5)
    print(f"\n{replica.addr} answers its keys again {time.monotonic() - t0:.1f} s after it "
          "listens")
    for k in its_keys:
        assert post(port, k)[1] == replica.addr


def test_replica_stopped_mid_run_behind_nginx(cluster):
    port, replicas, work = cluster
    a, b, c = replicas
    t0 = time.monotonic()

    # Which replica each key lands on (the consistent hash is deterministic per address list).
    keys = {r.addr: [] for r in replicas}
    for i in range(60):
        key = f"conv-{i}"
        status, up, body = post(port, key)
        assert status == 200, body
        keys[up].append(key)
        if all(len(v) >= 4 for v in keys.values()):
            break
    assert all(len(v) >= 4 for v in keys.values()), keys
    # Affinity: the same key lands on the same replica again.
    for r in replicas:
        assert post(port, keys[r.addr][0])[1] == r.addr

    # Bounded load: two streams on each replica (its two slots), C's flowing before it stops.
    streams = {r.addr: [Stream(port, k) for k in keys[r.addr][:2]] for r in replicas}
    for s in sum(streams.values(), []):
        s.start()
    for s in streams[c.addr]:
        assert s.flowing.wait(60), "C's streams never started"
    t_stop = time.monotonic()
    assert c.stop(signal.SIGTERM) == 0, c.stderr()
    print(f"\nSIGTERM (--shutdown-timeout 0) to exit: {time.monotonic() - t_stop:.2f} s")
    assert "in-flight request(s) cancelled" in c.stderr(), c.stderr()

    # New requests with C's keys while C is gone: all answered, by A or B.
    answered_by = []
    for k in keys[c.addr]:
        t_req = time.monotonic()
        status, up, body = post(port, k, max_tokens=4)
        print(f"  {k}: answered by {up} in {time.monotonic() - t_req:.2f} s")
        assert status == 200, (up, body)
        assert last_upstream(up) in (a.addr, b.addr), up
        answered_by.append(up)

    for s in sum(streams.values(), []):
        s.join(120)
        assert not s.is_alive()
    for s in streams[c.addr]:
        # A clear end, not a silent cut: the error event, then [DONE].
        assert s.error is None, s.error
        assert s.status == 200 and s.upstream == c.addr
        assert s.events and s.events[-1] == "[DONE]", s.events[-3:]
        err = s.events[-2]
        assert isinstance(err, dict) and err["error"]["code"] == "shutting_down", s.events[-3:]
        assert s.finish_reason() is None
    for r in (a, b):
        for s in streams[r.addr]:
            assert s.error is None, s.error
            assert s.upstream == r.addr
            assert s.events[-1] == "[DONE]" and s.finish_reason() == "length", s.events[-3:]
            assert not any(isinstance(e, dict) and "error" in e for e in s.events)

    # C comes back on its port and gets its keys back (after fail_timeout, one probe request);
    # this time it drains gracefully when stopped.
    c.start(shutdown_timeout=30)
    rejoin(port, c, keys[c.addr])
    for r in (a, b):  # the other keys never moved
        assert post(port, keys[r.addr][0])[1] == r.addr

    # A graceful stop: C finishes its stream while it answers new requests 503, which nginx
    # retries on another replica (the client never sees the 503). The stream is long enough to
    # still run when that request arrives.
    s = Stream(port, keys[c.addr][0], tokens=160)
    s.start()
    assert s.flowing.wait(60)
    c.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 30
    while "draining 1 request(s)" not in c.stderr():
        assert time.monotonic() < deadline, c.stderr()
        time.sleep(0.02)
    status, up, body = post(port, keys[c.addr][1], max_tokens=4)
    assert status == 200, body
    assert up.split(", ")[0] == c.addr and last_upstream(up) in (a.addr, b.addr), up
    s.join(120)
    assert s.error is None and s.upstream == c.addr
    assert s.events[-1] == "[DONE]" and s.finish_reason() == "length", s.events[-3:]
    assert c.proc.wait(timeout=30) == 0
    assert "(0 in-flight request(s) cancelled)" in c.stderr(), c.stderr()
    assert f"{c.addr}, {last_upstream(up)} 503, 200" in (work / "access.log").read_text()

    c.start()
    rejoin(port, c, keys[c.addr])

    # A replica killed hard cannot say anything: nginx cuts the client's body without the
    # chunked terminator, which the openai client (httpx) reports as an error (docs/deploy.md).
    import openai
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused",
                           max_retries=0, timeout=60)
    stream = client.chat.completions.create(
        **{k: v for k, v in body_for(STREAM_TOKENS, True).items() if k != "ignore_eos"},
        extra_body={"ignore_eos": True}, extra_headers={"X-Session-Id": keys[c.addr][0]})
    got = []
    with pytest.raises(openai.APIConnectionError) as cut:
        for chunk in stream:
            got.append(chunk)
            if len(got) == 3:
                c.kill()
    cause = cut.value.__cause__ or cut.value.__context__
    print(f"\nSIGKILL mid-stream: {cut.value!r} from {type(cause).__module__}."
          f"{type(cause).__name__}: {cause}")
    assert "incomplete chunked read" in str(cause), repr(cause)
    assert 3 <= len(got) < STREAM_TOKENS

    log = (work / "access.log").read_text()
    print(f"\nwall {time.monotonic() - t0:.1f} s; retried after the stop: {answered_by}")
    assert "prematurely closed" in (work / "error.log").read_text()
    assert log.count("\n") > 20
