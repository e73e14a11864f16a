"""`zinc serve` stopping gracefully (docs/server.md, "Stopping"; docs/deploy.md).

SIGINT/SIGTERM: new completion requests get 503 shutting_down and /health 503 "draining" at once;
requests in flight may finish for --shutdown-timeout seconds; a second signal or the timeout
cancels the rest, whose streams end with an error event and [DONE]; the exit status is 0.
"""
import http.client
import json
import signal
import subprocess
import threading
import time

from server_harness import MODEL_ID, SMOL, ZINC, Server, http_call, need_server_deps

PROMPT = "1, 2, 3, 4, 5,"


def body(max_tokens, stream):
    return {"model": MODEL_ID, "prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True, "stream": stream}


def open_stream(s, max_tokens):
    conn = http.client.HTTPConnection(s.host, s.port, timeout=60)
    conn.request("POST", "/v1/completions", body=json.dumps(body(max_tokens, True)),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    first = resp.readline()
    assert first.startswith(b"data: "), first  # the stream is flowing
    return conn, resp


def events(rest):
    out = []
    for line in rest.split(b"\n"):
        if line.startswith(b"data: "):
            d = line[6:].strip()
            out.append("[DONE]" if d == b"[DONE]" else json.loads(d))
    return out


def wait_for(pred, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_drain_lets_requests_finish_and_refuses_new_ones():
    s = Server("--parallel", "2", "-c", "512", "--shutdown-timeout", "60", threads=1)
    try:
        conn, resp = open_stream(s, 120)
        whole = {}
        t = threading.Thread(target=lambda: whole.setdefault(
            "r", s.post("/v1/completions", body(100, False), timeout=120)))
        t.start()
        wait_for(lambda: s.health()["slots"]["busy"] == 2)
        s.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: "draining 2 request(s) in flight" in s.stderr())
        # Draining: health says so with a 503 (a balancer takes the replica out) ...
        h = s.get("/health")
        assert h.status == 503 and h.json()["status"] == "draining", h.text
        # ... and a new request is refused with 503 shutting_down before it starts.
        r = s.post("/v1/completions", body(4, False))
        assert r.status == 503, r.text
        assert r.json()["error"]["code"] == "shutting_down"
        assert int(r.headers["retry-after"]) >= 1
        assert r.headers.get("connection") == "close"
        r = s.post("/v1/chat/completions",
                   {"messages": [{"role": "user", "content": "hi"}], "stream": True})
        assert r.status == 503 and r.json()["error"]["code"] == "shutting_down", r.text
        # The requests in flight finish normally.
        ev = events(resp.read())
        conn.close()
        assert ev[-1] == "[DONE]", ev[-3:]
        assert not any(isinstance(e, dict) and "error" in e for e in ev), ev[-3:]
        assert [c["finish_reason"] for e in ev if isinstance(e, dict) for c in e["choices"]
                if c["finish_reason"]] == ["length"]
        t.join(120)
        assert whole["r"].status == 200, whole["r"].text
        assert whole["r"].json()["choices"][0]["finish_reason"] == "length"
        assert whole["r"].json()["usage"]["completion_tokens"] == 100
        assert s.proc.wait(timeout=30) == 0, s.stderr()
        assert "(0 in-flight request(s) cancelled)" in s.stderr(), s.stderr()
    finally:
        s.close()


def cancelled_stream_ends_with_error(resp, conn):
    ev = events(resp.read())
    conn.close()
    assert ev[-1] == "[DONE]", ev[-3:]
    err = ev[-2]
    assert isinstance(err, dict) and err["error"]["code"] == "shutting_down", ev[-3:]
    assert err["error"]["type"] == "server_error"


def test_drain_timeout_cancels_the_rest_with_an_error_event():
    s = Server("--parallel", "1", "-c", "512", "--shutdown-timeout", "1", threads=1)
    try:
        conn, resp = open_stream(s, 400)
        t0 = time.monotonic()
        s.proc.send_signal(signal.SIGTERM)
        cancelled_stream_ends_with_error(resp, conn)
        assert s.proc.wait(timeout=30) == 0, s.stderr()
        took = time.monotonic() - t0
        assert 0.9 <= took < 10, took
        assert "(1 in-flight request(s) cancelled)" in s.stderr(), s.stderr()
    finally:
        s.close()


def test_second_signal_ends_the_drain():
    s = Server("--parallel", "1", "-c", "512", "--shutdown-timeout", "600", threads=1)
    try:
        conn, resp = open_stream(s, 400)
        s.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: "draining 1 request(s)" in s.stderr())
        t0 = time.monotonic()
        s.proc.send_signal(signal.SIGINT)
        cancelled_stream_ends_with_error(resp, conn)
        assert s.proc.wait(timeout=30) == 0, s.stderr()
        assert time.monotonic() - t0 < 10
    finally:
        s.close()


def test_idle_server_stops_at_once_whatever_the_timeout():
    s = Server("-c", "256", "--shutdown-timeout", "600", threads=1)
    try:
        assert s.health()["status"] == "ok"
        t0 = time.monotonic()
        assert s.stop(signal.SIGTERM, timeout=30) == 0, s.stderr()
        assert time.monotonic() - t0 < 5
        assert "(0 in-flight request(s) cancelled)" in s.stderr()
    finally:
        s.close()


def test_bad_shutdown_timeout_is_an_error():
    need_server_deps()
    for v in ["-1", "abc", "100000"]:
        r = subprocess.run([str(ZINC), "serve", "-m", str(SMOL), "--shutdown-timeout", v],
                           capture_output=True, timeout=60)
        err = r.stderr.decode()
        assert r.returncode == 2, err
        assert "--shutdown-timeout" in err, err
