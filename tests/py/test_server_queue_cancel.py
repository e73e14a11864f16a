"""Clients that leave while their request is still queued (docs/server.md, "Disconnects").

A one-slot server (`--parallel 1`) is held by a long stream; more requests queue behind it and
their clients close the connection before they get the slot. Each one must leave the queue within
a poll (well before the 2 s heartbeat that used to find them), never be admitted (no prefill row,
no token), give back its tenant's queue place and token reservation, and leave the slot to the
next request as soon as it frees. Streamed (completions and chat: a chat stream has written its
role chunk, a completions stream nothing) and non-streamed requests.
"""
import http.client
import json
import socket
import time

import pytest

from server_harness import MODEL_ID, Server
from test_server_tenancy import start as start_tenants

# Found by the connection watch within one poll (250 ms) plus an engine step; before the fix, a
# queued stream was found only by its first failing heartbeat, 2 s after its last write.
LEAVE_S = 1.2


def metrics(s):
    """{name or name{labels}: value} of /metrics."""
    out = {}
    for line in s.get("/metrics").text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def send(s, body, path="/v1/completions", key=None):
    """Send a request on a fresh connection and return the connection (response not read)."""
    conn = http.client.HTTPConnection(s.host, s.port, timeout=120)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    conn.request("POST", path, body=json.dumps(dict({"model": MODEL_ID, "temperature": 0}, **body)),
                 headers=headers)
    return conn


def cut(conn):
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()


def wait_for(pred, timeout):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.02)


def hold_the_slot(s, key=None):
    """A stream that runs far longer than the test (cut at the end), decoding: two tokens are in
    (so /metrics, published after each step, includes its prefill)."""
    conn = send(s, {"prompt": "1, 2, 3,", "max_tokens": 1500, "ignore_eos": True,
                    "stream": True}, key=key)
    r = conn.getresponse()
    assert r.status == 200, r.read()
    for _ in range(2):
        while b'"text":"' not in (line := r.readline()) or b'"text":""' in line:
            assert line, "the long stream ended early"
    return conn


WATCHED = ["zinc_queue_depth", "zinc_slots_busy", 'zinc_step_rows_total{kind="prefill"}',
           'zinc_engine_requests_total{outcome="cancelled"}',
           'zinc_engine_requests_total{outcome="finished"}', "zinc_client_disconnects_total"]


def delta(m1, m0):
    return {k: m1[k] - m0[k] for k in WATCHED}


def queue(s, n, stream, path, key=None, max_tokens=8):
    """n requests queued behind the held slot (each with its own prompt)."""
    conns = []
    for i in range(n):
        body = {"max_tokens": max_tokens, "stream": stream}
        if path.endswith("chat/completions"):
            body["messages"] = [{"role": "user", "content": f"Count to {i + 5}."}]
        else:
            body["prompt"] = f"The {i + 2} planets were"
        conns.append(send(s, body, path, key))
    if stream:  # the headers come once the request is in the engine
        for c in conns:
            assert c.getresponse().status == 200
    assert wait_for(lambda: metrics(s)["zinc_queue_depth"] == n, 30), metrics(s)
    return conns


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 1, "-c", "2048")
    yield s
    s.close()


@pytest.mark.parametrize("stream,path", [(True, "/v1/completions"),
                                         (True, "/v1/chat/completions"),
                                         (False, "/v1/completions")])
def test_queued_clients_that_leave_never_run(server, stream, path):
    server.wait_idle()
    long = hold_the_slot(server)
    conns = queue(server, 4, stream, path)
    m0 = metrics(server)
    for c in conns:
        cut(c)
    t0 = time.monotonic()
    left = wait_for(lambda: metrics(server)["zinc_queue_depth"] == 0, 10)
    took = time.monotonic() - t0
    m1 = metrics(server)
    assert left and took < LEAVE_S, (took, delta(m1, m0))
    assert m1["zinc_slots_busy"] == 1, delta(m1, m0)  # the long stream still holds the slot
    cancelled = 'zinc_engine_requests_total{outcome="cancelled"}'
    assert m1[cancelled] - m0[cancelled] == 4, delta(m1, m0)
    assert m1["zinc_client_disconnects_total"] - m0["zinc_client_disconnects_total"] == 4
    # None of them was admitted: no prompt row ran since they queued.
    prefill = 'zinc_step_rows_total{kind="prefill"}'
    assert m1[prefill] == m0[prefill]

    # The slot goes to the next request as soon as the long stream leaves.
    cut(long)
    t1 = time.monotonic()
    r = server.client().completions.create(model=MODEL_ID, prompt="A new request:",
                                           max_tokens=4, temperature=0)
    assert time.monotonic() - t1 < 10
    assert r.usage.completion_tokens == 4
    m2 = metrics(server)
    # Its prompt is the only one computed since the long stream's (none of the four ran).
    assert m2[prefill] - m0[prefill] == r.usage.prompt_tokens - (
        r.usage.prompt_tokens_details.cached_tokens if r.usage.prompt_tokens_details else 0)
    h = server.wait_idle()
    assert h["kv_blocks"]["used"] == 0 and h["queue_depth"] == 0, h


def test_a_client_gone_before_submission_queues_nothing(server):
    # A request whose client closed right after sending it (before the handler submits it, e.g.
    # while every HTTP thread was busy) is not submitted at all, or leaves at once.
    server.wait_idle()
    long = hold_the_slot(server)
    m0 = metrics(server)
    for i in range(4):
        c = send(server, {"prompt": f"Gone {i}", "max_tokens": 8, "stream": i % 2 == 0})
        cut(c)
    assert wait_for(lambda: metrics(server)["zinc_client_disconnects_total"]
                    - m0["zinc_client_disconnects_total"] == 4, LEAVE_S)
    assert wait_for(lambda: metrics(server)["zinc_queue_depth"] == 0, LEAVE_S)
    m1 = metrics(server)
    assert m1['zinc_step_rows_total{kind="prefill"}'] == m0['zinc_step_rows_total{kind="prefill"}']
    cut(long)
    server.wait_idle()


def test_tenant_quota_and_reservation_come_back(tmp_path):
    # max_concurrent 1 + max_queued 3, and a day quota that the queued requests' reservations (prompt + max_tokens)
    # fill: after they leave, the tenant may queue again at once, and the ledger has only what
    # ran.
    tenants = [{"id": "t", "key": "key-t",
                "quotas": {"max_concurrent": 1, "max_queued": 3, "tokens_per_day": 5200}}]
    s, _ = start_tenants(tmp_path, tenants, "--parallel", 1, "-c", "2048",
                         ledger=tmp_path / "usage.sqlite")
    try:
        long = hold_the_slot(s, key="key-t")  # reserves its prompt + 1500
        conns = queue(s, 3, True, "/v1/completions", key="key-t", max_tokens=1000)
        # A fourth would pass max_queued (and the day quota).
        extra = send(s, {"prompt": "One more", "max_tokens": 8, "stream": True}, key="key-t")
        r = extra.getresponse()
        assert r.status == 429 and json.loads(r.read())["error"]["param"] == "max_queued"
        extra.close()
        for c in conns:
            cut(c)
        u = s.get("/v1/usage", headers={"Authorization": "Bearer key-t"})
        assert wait_for(lambda: s.get("/v1/usage", headers={"Authorization": "Bearer key-t"})
                        .json()["in_flight_sequences"] == 1, LEAVE_S), u.text
        # Three more fit again: their places and reservations came back.
        again = queue(s, 3, True, "/v1/completions", key="key-t", max_tokens=1000)
        for c in again:
            cut(c)
        assert wait_for(lambda: metrics(s)["zinc_queue_depth"] == 0, LEAVE_S)
        cut(long)
        s.wait_idle()
        small = s.client(api_key="key-t").completions.create(model=MODEL_ID, prompt="Hi",
                                                             max_tokens=3, temperature=0)
        s.wait_idle()
        u = s.get("/v1/usage", headers={"Authorization": "Bearer key-t"}).json()
        assert u["in_flight_sequences"] == 0, u
        # Prompt tokens: the long stream's and the small request's only.
        long_prompt = len(s.post("/tokenize", {"content": "1, 2, 3,"},
                                 headers={"Authorization": "Bearer key-t"}).json()["tokens"])
        assert u["prompt_tokens"] == long_prompt + small.usage.prompt_tokens, u
        assert u["ledger"]["day_tokens"] == u["prompt_tokens"] + u["completion_tokens"], u
    finally:
        s.close()
