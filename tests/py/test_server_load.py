"""`zinc serve` under load: 32 concurrent streams each equal to the same request run alone at
temperature 0; 100 clients that disconnect mid-stream, after which /health shows every KV block
back (none used, no slot busy); clients that leave non-streamed requests are cancelled too; and a bounded soak (2000 requests, concurrency 16, short prompts
and few tokens) with no crash, no KV leak and a bounded RSS.
"""
import http.client
import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from server_harness import MODEL_ID, Server

N_PARALLEL = 32


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", N_PARALLEL, "-c", "256")
    yield s
    assert s.stop() == 0, s.stderr()
    s.close()


SUBJECTS = ["the sea", "a cat", "the moon", "bread", "a river", "snow", "a city", "music",
            "a forest", "coffee", "a train", "the sun", "a garden", "rain", "a library", "fire"]


def chat_messages(i):
    return [{"role": "user", "content": f"Write one short sentence about {SUBJECTS[i % 16]}."
             + (" Be poetic." if i >= 16 else "")}]


def test_32_parallel_streams_equal_alone(server):
    client = server.client()
    alone = []
    for i in range(32):
        r = client.chat.completions.create(model=MODEL_ID, messages=chat_messages(i),
                                           temperature=0, max_tokens=24)
        alone.append((r.choices[0].message.content, r.choices[0].finish_reason))
    assert len(set(a for a, _ in alone)) > 16  # the prompts really differ

    barrier = threading.Barrier(32)
    peak = {"busy": 0}

    def stream(i):
        barrier.wait()
        s = client.chat.completions.create(model=MODEL_ID, messages=chat_messages(i),
                                           temperature=0, max_tokens=24, stream=True)
        text, finish = "", None
        for c in s:
            if c.choices:
                text += c.choices[0].delta.content or ""
                finish = c.choices[0].finish_reason or finish
        return text, finish

    def watch(stop):
        while not stop.is_set():
            peak["busy"] = max(peak["busy"], server.health()["slots"]["busy"])
            time.sleep(0.01)

    stop = threading.Event()
    w = threading.Thread(target=watch, args=(stop,))
    w.start()
    with ThreadPoolExecutor(32) as ex:
        batched = list(ex.map(stream, range(32)))
    stop.set()
    w.join()
    assert peak["busy"] >= 8, peak  # they really ran side by side
    for i in range(32):
        assert batched[i] == alone[i], (i, batched[i], alone[i])
    h = server.wait_idle()
    assert h["kv_blocks"]["used"] == 0, h


def disconnect_mid_stream(server, i):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=60)
    # A count: no end-of-generation token for far longer than the client stays.
    body = {"model": MODEL_ID, "prompt": f"{i}, {i + 1}, {i + 2},", "max_tokens": 200,
            "temperature": 0, "stream": True}
    conn.request("POST", "/v1/completions", body=json.dumps(body),
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200
    got = b""
    while got.count(b"data: ") < 3:  # three chunks: tokens are flowing
        line = r.readline()
        assert line, "stream ended early"
        got += line
    conn.sock.shutdown(2)
    conn.close()


def test_100_disconnects_free_every_block(server):
    base = server.wait_idle()
    assert base["kv_blocks"]["used"] == 0
    cancelled0 = base["requests"]["cancelled"]
    with ThreadPoolExecutor(10) as ex:
        list(ex.map(lambda i: disconnect_mid_stream(server, i), range(100)))
    t0 = time.monotonic()
    h = server.wait_idle(timeout=10)
    freed_in = time.monotonic() - t0
    assert h["kv_blocks"]["used"] == 0 and h["slots"]["busy"] == 0, h
    assert h["kv_blocks"]["free"] + h["kv_blocks"]["cached"] == h["kv_blocks"]["total"], h
    assert h["requests"]["cancelled"] - cancelled0 >= 100, h
    assert freed_in < 5, freed_in
    metrics = server.get("/metrics").text
    line = [l for l in metrics.splitlines() if l.startswith("zinc_client_disconnects_total ")]
    assert float(line[0].split()[1]) >= 100
    # Still serving.
    r = server.client().completions.create(model=MODEL_ID, prompt="Hello", max_tokens=3)
    assert r.choices[0].text is not None


def test_non_streamed_disconnect_cancels(server):
    # A non-streamed request writes nothing until it ends; a client that leaves early must still
    # have its sequence cancelled and its blocks freed, long before max_tokens would end it.
    base = server.wait_idle()
    cancelled0 = base["requests"]["cancelled"]
    conns = []
    for i in range(8):
        conn = http.client.HTTPConnection(server.host, server.port, timeout=60)
        body = {"model": MODEL_ID, "prompt": f"{i}, {i + 1}, {i + 2},", "max_tokens": 240,
                "temperature": 0}
        conn.request("POST", "/v1/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        conns.append(conn)
    deadline = time.monotonic() + 20
    while server.health()["slots"]["busy"] < 8 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.health()["slots"]["busy"] >= 1
    for conn in conns:
        conn.sock.shutdown(2)
        conn.close()
    t0 = time.monotonic()
    h = server.wait_idle(timeout=10)
    assert h["kv_blocks"]["used"] == 0 and h["slots"]["busy"] == 0, h
    assert h["requests"]["cancelled"] - cancelled0 == 8, h
    assert time.monotonic() - t0 < 3  # cancelled, not run to 240 tokens


def test_soak_2000_requests_concurrency_16():
    # Its own small server, so the KV pool (whose pages are touched as blocks are first used)
    # is small next to the leak bound below.
    server = Server("--parallel", "16", "-c", "128")
    try:
        soak(server)
    finally:
        assert server.stop() == 0, server.stderr()
        server.close()


def soak(server):
    client = server.client()
    rng = random.Random(7)
    words = ["red", "blue", "cat", "dog", "sun", "sea", "tree", "road", "bird", "song"]
    plans = []
    for i in range(2000):
        prompt = " ".join(rng.choice(words) for _ in range(rng.randint(2, 5)))
        plans.append((i, rng.random(), prompt))
    errors, counts = [], {"ok": 0, "bad": 0}
    lock = threading.Lock()

    def one(plan):
        i, kind, prompt = plan
        try:
            if kind < 0.70:
                r = client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=2,
                                              temperature=0.8, seed=i)
                assert r.choices[0].finish_reason in ("stop", "length")
            elif kind < 0.78:
                s = client.chat.completions.create(
                    model=MODEL_ID, max_tokens=2, stream=True,
                    stream_options={"include_usage": True},
                    messages=[{"role": "system", "content": "Be brief."},
                              {"role": "user", "content": prompt}])
                chunks = list(s)
                assert chunks[-1].usage is not None
            elif kind < 0.84:
                r = client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=2, n=2,
                                              temperature=1.0)
                assert len(r.choices) == 2
            elif kind < 0.90:
                r = client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=4,
                                              stop=[" the", "\n"], logprobs=2)
                assert r.choices[0].logprobs is not None
            elif kind < 0.95:
                # Cut short by the client: a stream dropped after its first chunk.
                s = client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=40,
                                              stream=True)
                next(iter(s))
                s.close()
            else:
                r = server.post("/v1/chat/completions", {"messages": [], "model": MODEL_ID})
                assert r.status == 400
                with lock:
                    counts["bad"] += 1
                return
            with lock:
                counts["ok"] += 1
        except Exception as e:  # noqa: BLE001 - collected and reported below
            with lock:
                errors.append(f"request {i}: {type(e).__name__}: {e}")

    t0 = time.monotonic()
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(one, plans[:200]))
        server.wait_idle()
        rss_warm = server.rss_kib()
        list(ex.map(one, plans[200:1100]))
        server.wait_idle()
        rss_mid = server.rss_kib()
        list(ex.map(one, plans[1100:]))
    elapsed = time.monotonic() - t0
    assert not errors, errors[:5]
    assert server.alive()
    h = server.wait_idle(timeout=10)
    assert h["kv_blocks"]["used"] == 0 and h["slots"]["busy"] == 0 and h["queue_depth"] == 0, h
    assert h["kv_blocks"]["free"] + h["kv_blocks"]["cached"] == h["kv_blocks"]["total"], h
    rss_end = server.rss_kib()
    kv_kib = h["kv_blocks"]["total"] * h["kv_blocks"]["bytes_per_block"] // 1024
    print(f"soak: 2000 requests in {elapsed:.1f} s ({2000 / elapsed:.1f} req/s), RSS "
          f"{rss_warm / 1024:.1f} -> {rss_mid / 1024:.1f} -> {rss_end / 1024:.1f} MiB "
          f"(KV pool {kv_kib / 1024:.1f} MiB), {counts}")
    # No leak: 1800 more requests may touch the rest of the KV pool for the first time, plus
    # allocator slack; a per-request leak of even 16 KiB would add 28 MiB.
    assert rss_end - rss_warm < kv_kib + 24 * 1024, (rss_warm, rss_mid, rss_end, kv_kib)
    assert rss_end - rss_mid < kv_kib + 12 * 1024, (rss_warm, rss_mid, rss_end, kv_kib)
    assert counts["ok"] + counts["bad"] == 2000
