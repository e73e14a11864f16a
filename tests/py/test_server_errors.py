"""`zinc serve` under bad input: every bad request gets a clean 4xx in OpenAI's error shape
({"error": {"message", "type", "param", "code"}}) and the server keeps serving. Also API keys
(401), unknown routes and models (404), a full queue (429 + Retry-After), `zinc -m FILE` without
a prompt serving, and a graceful SIGINT/SIGTERM with a stream in flight.
"""
import http.client
import json
import socket
import threading
import time

import pytest

from server_harness import MODEL_ID, Server

openai = pytest.importorskip("openai")


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", "2", "-c", "512")
    yield s
    assert s.stop() == 0, s.stderr()
    s.close()


def chat_body(**extra):
    b = {"model": MODEL_ID, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4,
         "temperature": 0}
    b.update(extra)
    return b


def assert_error(r, status, param=None, code=None):
    assert r.status == status, (r.status, r.text)
    assert r.headers["content-type"].startswith("application/json")
    e = r.json()["error"]
    assert set(e) == {"message", "type", "param", "code"}, e
    assert isinstance(e["message"], str) and e["message"]
    assert isinstance(e["type"], str) and e["type"]
    if param is not None:
        assert e["param"] == param, e
    if code is not None:
        assert e["code"] == code, e
    return e


def assert_serving(server):
    r = server.post("/v1/chat/completions", chat_body())
    assert r.status == 200, r.text
    assert r.json()["choices"][0]["message"]["content"]
    assert server.alive()


def test_malformed_json(server):
    for data in [b"{", b"{\"messages\": [}", b"not json", b"", b"[1, 2]", b"\"text\"",
                 b"{\"messages\": \"\xff\xfe\"}", b"{" * 100000]:
        e = assert_error(server.post("/v1/chat/completions", data=data), 400)
        assert e["type"] == "invalid_request_error"
    # The parser's own reason is kept, not replaced by a generic one.
    e = assert_error(server.post("/v1/chat/completions", data=b'{"messages": [1'), 400)
    assert "byte offset" in e["message"] and "unexpected end of input" in e["message"], e
    e = assert_error(server.post("/v1/chat/completions", data=b'{"messages": "\xff"}'), 400)
    assert "UTF-8" in e["message"], e
    assert_serving(server)


@pytest.mark.parametrize("extra,param", [
    ({"temperature": "hot"}, "temperature"),
    ({"max_tokens": "ten"}, "max_tokens"),
    ({"max_tokens": 2.5}, "max_tokens"),
    ({"n": [2]}, "n"),
    ({"stream": "yes"}, "stream"),
    ({"stop": 7}, "stop"),
    ({"stop": ["a", None]}, "stop[1]"),
    ({"seed": "abc"}, "seed"),
    ({"top_p": {}}, "top_p"),
    ({"messages": {"role": "user"}}, "messages"),
    ({"messages": ["hi"]}, "messages[0]"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": "a"}, {"role": 3, "content": "b"}]},
     "messages[1].role"),
    ({"stream": True, "stream_options": {"include_usage": 1}}, "stream_options.include_usage"),
])
def test_wrong_types_name_the_json_path(server, extra, param):
    assert_error(server.post("/v1/chat/completions", chat_body(**extra)), 400, param=param,
                 code="invalid_type")


@pytest.mark.parametrize("extra,param", [
    ({"temperature": 5}, "temperature"),
    ({"top_p": -0.1}, "top_p"),
    ({"top_p": 1.5}, "top_p"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"n": 0}, "n"),
    ({"presence_penalty": -3}, "presence_penalty"),
    ({"top_logprobs": 3}, "top_logprobs"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user"}]}, "messages[0].content"),
])
def test_out_of_range_and_empty(server, extra, param):
    assert_error(server.post("/v1/chat/completions", chat_body(**extra)), 400, param=param)


def test_openai_client_sees_bad_request(server):
    c = server.client()
    with pytest.raises(openai.BadRequestError) as ei:
        c.chat.completions.create(model=MODEL_ID, messages=[])
    assert ei.value.status_code == 400
    assert ei.value.body["param"] == "messages"
    with pytest.raises(openai.BadRequestError) as ei:
        c.chat.completions.create(model=MODEL_ID, messages=[{"role": "robot", "content": "x"}])
    assert "robot" in ei.value.message


def test_body_over_the_limit_is_413(server):
    big = b"{\"model\": \"smol\", \"messages\": [{\"role\": \"user\", \"content\": \"" + \
        b"a" * (10 * 1024 * 1024) + b"\"}]}"
    assert_error(server.post("/v1/chat/completions", data=big), 413, code="request_too_large")
    assert_error(server.post("/v1/completions", data=b"x" * (10 * 1024 * 1024)), 413)
    assert_serving(server)


def test_unknown_fields_are_ignored(server):
    # As vLLM and llama.cpp's server: unknown top-level fields do not fail a request.
    r = server.post("/v1/chat/completions", chat_body(frobnicate=True, vendor={"x": [1]}))
    assert r.status == 200, r.text
    c = server.client()
    out = c.chat.completions.create(model=MODEL_ID, max_tokens=3, temperature=0,
                                    messages=[{"role": "user", "content": "Hi"}],
                                    extra_body={"unknown_knob": 3})
    assert out.choices[0].message.content
    # Known fields are checked, not ignored (tool calling: tests/py/test_tools.py).
    assert_error(server.post("/v1/chat/completions", chat_body(tools=[{"type": "function"}])),
                 400, param="tools[0].function")
    assert_error(server.post("/v1/chat/completions", chat_body(logit_bias={"1": 5})),
                 400, param="logit_bias")


def test_404_routes_and_models(server):
    assert_error(server.get("/v2/nothing"), 404)
    # (/v1/embeddings is served now: tests/py/test_embeddings.py)
    assert_error(server.post("/v1/images/generations", {"prompt": "x"}), 404)
    assert_error(server.get("/v1/models/gpt-4o"), 404)
    assert_error(server.get("/v1/chat/completions"), 405)
    assert_serving(server)


def test_context_length_exceeded(server):
    e = assert_error(server.post("/v1/chat/completions", chat_body(max_tokens=600)), 400,
                     param="max_tokens", code="context_length_exceeded")
    assert "512" in e["message"]
    long_prompt = "hello " * 600
    assert_error(server.post("/v1/completions", {"model": MODEL_ID, "prompt": long_prompt}), 400,
                 param="prompt", code="context_length_exceeded")
    # The prompt alone does not fit: its fault, whatever max_tokens says.
    assert_error(server.post("/v1/completions", {"prompt": long_prompt, "max_tokens": 1}), 400,
                 param="prompt", code="context_length_exceeded")
    assert_error(server.post("/v1/chat/completions",
                             chat_body(messages=[{"role": "user", "content": long_prompt}],
                                       max_tokens=1)),
                 400, param="messages", code="context_length_exceeded")
    assert_error(server.post("/v1/completions", {"prompt": [1, 10 ** 7]}), 400, param="prompt[1]")
    assert_serving(server)


def test_api_keys():
    s = Server("--parallel", "1", "-c", "256", "--api-key", "k-one", "--api-key", "k-two",
               env={"ZINC_API_KEY": "k-env"})
    try:
        assert_error(s.post("/v1/chat/completions", chat_body()), 401, code="invalid_api_key")
        assert_error(s.post("/v1/chat/completions", chat_body(),
                            headers={"Authorization": "Bearer k-three"}), 401)
        assert_error(s.get("/v1/models"), 401)
        with pytest.raises(openai.AuthenticationError):
            s.client(api_key="wrong").models.list()
        for key in ("k-one", "k-two", "k-env"):
            assert s.client(api_key=key).models.list().data[0].id == MODEL_ID
        r = s.post("/v1/chat/completions", chat_body(), headers={"Authorization": "Bearer k-two"})
        assert r.status == 200
        assert s.get("/health").status == 200  # open for load balancers
        assert s.get("/metrics").status == 200
    finally:
        assert s.stop() == 0
        s.close()


def open_stream(server, body, path="/v1/chat/completions"):
    """Start a streaming request and read its headers; returns (conn, response)."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=60)
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    return conn, conn.getresponse()


# A greedy count never reaches an end-of-generation token within 400 tokens: a stream that
# stays busy until the test ends it.
LONG = {"model": MODEL_ID, "prompt": "1, 2, 3, 4, 5,", "max_tokens": 400, "temperature": 0,
        "stream": True}


def wait_for(pred, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_queue_full_is_429_with_retry_after():
    s = Server("--parallel", "1", "--max-queue", "1", "-c", "512")
    try:
        a = open_stream(s, LONG, "/v1/completions")
        wait_for(lambda: s.health()["slots"]["busy"] == 1)
        # The second request waits in the queue; its response headers come only once it runs,
        # so it is sent from a thread.
        holder = {}
        t = threading.Thread(target=lambda: holder.update(b=open_stream(s, LONG, "/v1/completions")))
        t.start()
        wait_for(lambda: s.health()["queue_depth"] == 1)
        r = s.post("/v1/chat/completions", chat_body())
        assert_error(r, 429, code="queue_full")
        assert int(r.headers["retry-after"]) >= 1
        with pytest.raises(openai.RateLimitError):
            s.client().chat.completions.create(model=MODEL_ID, max_tokens=2,
                                               messages=[{"role": "user", "content": "x"}])
        a[0].close()  # disconnect: the running one is cancelled, the queued one starts
        t.join(timeout=60)
        assert "b" in holder
        holder["b"][0].close()
        h = s.wait_idle()
        assert h["kv_blocks"]["used"] == 0 and h["queue_depth"] == 0, h
        assert_serving(s)
    finally:
        assert s.stop() == 0
        s.close()


def test_plain_zinc_m_serves_and_sigint_stops_with_a_stream_open():
    s = Server("--parallel", "1", "-c", "512", serve=False)  # `zinc -m FILE` without --prompt
    try:
        assert s.health()["status"] == "ok"
        conn, resp = open_stream(s, LONG, "/v1/completions")
        assert resp.status == 200
        assert resp.readline().startswith(b"data: ")  # the stream is flowing
        import signal
        t0 = time.monotonic()
        assert s.stop(signal.SIGINT) == 0, s.stderr()
        assert time.monotonic() - t0 < 15
        assert "SIGINT" in s.stderr()
        # Shutdown drains open streams first: the body ends properly, with [DONE].
        rest = resp.read()
        assert rest.rstrip().endswith(b"data: [DONE]"), rest[-200:]
        conn.close()
        # The port is released.
        with socket.socket() as sock:
            assert sock.connect_ex((s.host, s.port)) != 0
    finally:
        s.close()


def test_port_in_use_is_an_error(server):
    import subprocess
    from server_harness import SMOL, ZINC
    r = subprocess.run([str(ZINC), "serve", "-m", str(SMOL), "--port", str(server.port),
                        "-c", "256", "-t", "1"], capture_output=True, timeout=120)
    err = r.stderr.decode()
    # One line, status 2 (bad input), before the model is loaded (docs/server.md).
    assert r.returncode == 2, err
    assert err.count("\n") == 1, err
    assert err.startswith(f"zinc: error: cannot listen on 127.0.0.1:{server.port}: ")
    assert "already in use" in err and "--port" in err
    assert_serving(server)


def test_other_model_names_are_served_by_the_loaded_model(server):
    # As Ollama and llama.cpp's server: the one loaded model answers, and says so.
    r = server.post("/v1/chat/completions", chat_body(model="gpt-4o"))
    assert r.status == 200, r.body
    assert r.json()["model"] == MODEL_ID
    out = server.client().chat.completions.create(model="nope", max_tokens=2, messages=[
        {"role": "user", "content": "x"}])
    assert out.model == MODEL_ID
    assert_error(server.post("/v1/chat/completions", chat_body(model="")), 404,
                 param="model", code="model_not_found")


def test_strict_model_refuses_other_names():
    s = Server("--parallel", "1", "-c", "256", "--strict-model")
    try:
        assert_error(s.post("/v1/chat/completions", chat_body(model="gpt-4o")), 404,
                     param="model", code="model_not_found")
        with pytest.raises(openai.NotFoundError):
            s.client().chat.completions.create(model="nope", messages=[
                {"role": "user", "content": "x"}])
        assert_error(s.post("/v1/completions", {"model": "other", "prompt": "a", "max_tokens": 1}),
                     404, param="model", code="model_not_found")
        assert s.post("/v1/chat/completions", chat_body()).status == 200
    finally:
        assert s.stop() == 0, s.stderr()
        s.close()
