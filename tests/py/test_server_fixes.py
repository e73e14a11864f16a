"""Leftovers of the fresh-user pass on `zinc serve` (docs/server.md), each checked so that it
failed before its fix:
  * text cut by max_tokens in the middle of a UTF-8 character ends before that character (no
    U+FFFD), streamed or not, chat and completions; the oracle is Python's incremental UTF-8
    decoder over the tokens' exact `bytes` (chat logprobs);
  * /v1/models `created` is the model file's modification time;
  * CORS: OPTIONS preflights get 204 with Allow and Access-Control-Allow-*, before the API key
    check; every response names the allowed origin; --cors-origin sets or (empty) removes it;
  * a wrong method on a known route is 405 with Allow (PUT, PATCH, DELETE too);
  * --parallel 1 --max-queue 1 with 4 requests at once: 1 runs, 1 waits, 2 get 429;
  * ignore_eos (llama.cpp / vLLM extension): generation runs to max_tokens through
    end-of-generation tokens, on chat and completions, streamed and not.
A busy port is tested in test_server_errors.py (one line, status 2).
"""
import codecs
import json
import os
import threading

import pytest

from server_harness import MODEL_ID, SMOL, Server

openai = pytest.importorskip("openai")

FFFD = "\ufffd"


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", "2", "-c", "512")
    yield s
    assert s.stop() == 0, s.stderr()
    s.close()


def whole_chars(raw):
    """The text of `raw` bytes without an incomplete trailing character (dropped, as OpenAI and
    llama.cpp's server do), ill-formed bytes elsewhere as U+FFFD."""
    return codecs.getincrementaldecoder("utf-8")("replace").decode(raw, final=False)


# The model repeats the emoji; each is 3 tokens (F0 9F | 98 | 80), so max_tokens 1, 2, 4, 5 cut
# a character.
EMOJI = [{"role": "user", "content": "Repeat exactly: \U0001F600\U0001F600\U0001F600\U0001F600"}]


def test_text_cut_mid_character_is_dropped_not_replaced(server):
    c = server.client()
    cuts = 0
    for n in range(1, 8):
        r = c.chat.completions.create(model=MODEL_ID, messages=EMOJI, max_tokens=n, temperature=0,
                                      logprobs=True)
        ch = r.choices[0]
        raw = b"".join(bytes(e.bytes) for e in ch.logprobs.content)
        want = whole_chars(raw)
        if want != raw.decode("utf-8", "replace"):
            cuts += 1  # this n ends inside a character
        assert ch.message.content == want, (n, ch.message.content, raw)
        assert not ch.message.content.endswith(FFFD), n
        # Streamed: the same text.
        streamed = "".join(k.choices[0].delta.content or "" for k in c.chat.completions.create(
            model=MODEL_ID, messages=EMOJI, max_tokens=n, temperature=0, stream=True) if k.choices)
        assert streamed == want, (n, streamed)
    assert cuts >= 2, "no max_tokens cut a character: the test would not test anything"
    # Completions: each cut text is a prefix of a longer run's text (no U+FFFD inside).
    longer = c.completions.create(model=MODEL_ID, prompt="\U0001F600\U0001F600\U0001F600",
                                  max_tokens=12, temperature=0).choices[0].text
    assert FFFD not in longer
    for n in range(1, 6):
        t = c.completions.create(model=MODEL_ID, prompt="\U0001F600\U0001F600\U0001F600",
                                 max_tokens=n, temperature=0).choices[0].text
        assert longer.startswith(t) and FFFD not in t, (n, t, longer)


def test_models_created_is_the_file_mtime(server):
    data = server.get("/v1/models").json()["data"]
    assert data[0]["created"] == int(os.stat(SMOL).st_mtime)
    assert server.client().models.retrieve(MODEL_ID).created == int(os.stat(SMOL).st_mtime)


def preflight(srv, path, **headers):
    h = {"Origin": "http://app.example", "Access-Control-Request-Method": "POST"}
    h.update(headers)
    return srv.call("OPTIONS", path, headers=h)


def test_cors_preflight_and_headers(server):
    r = preflight(server, "/v1/chat/completions",
                  **{"Access-Control-Request-Headers": "authorization, content-type"})
    assert r.status == 204, r.text
    assert r.headers["access-control-allow-origin"] == "*"
    assert "POST" in r.headers["access-control-allow-methods"]
    assert r.headers["access-control-allow-headers"] == "authorization, content-type"
    assert r.headers["allow"] == "POST, OPTIONS"
    r = preflight(server, "/health")
    assert r.status == 204 and r.headers["allow"] == "GET, HEAD, OPTIONS"
    assert preflight(server, "/v1/models/" + MODEL_ID).status == 204
    assert preflight(server, "/no/such/route").status == 404
    # Actual responses name the origin too (so a page can read them, errors included).
    assert server.get("/health").headers["access-control-allow-origin"] == "*"
    r = server.post("/v1/chat/completions", {"messages": []})
    assert r.status == 400 and r.headers["access-control-allow-origin"] == "*"


@pytest.mark.parametrize("method,path,allow", [
    ("GET", "/v1/chat/completions", "POST, OPTIONS"),
    ("PUT", "/v1/completions", "POST, OPTIONS"),
    ("DELETE", "/v1/chat/completions", "POST, OPTIONS"),
    ("PATCH", "/tokenize", "POST, OPTIONS"),
    ("POST", "/health", "GET, HEAD, OPTIONS"),
    ("DELETE", "/v1/models/" + MODEL_ID, "GET, HEAD, OPTIONS"),
    ("PUT", "/metrics", "GET, HEAD, OPTIONS"),
])
def test_wrong_method_is_405_with_allow(server, method, path, allow):
    r = server.call(method, path, data=b"{}")
    assert r.status == 405, (r.status, r.text)
    assert r.headers["allow"] == allow
    assert r.json()["error"]["code"] == "method_not_allowed"


def test_cors_origin_option_and_api_keys():
    s = Server("--parallel", "1", "-c", "256", "--cors-origin", "http://app.example",
               "--api-key", "sk-test")
    try:
        r = preflight(s, "/v1/chat/completions")  # no key: preflights carry no credentials
        assert r.status == 204
        assert r.headers["access-control-allow-origin"] == "http://app.example"
        r = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]})
        assert r.status == 401
        assert r.headers["access-control-allow-origin"] == "http://app.example"
    finally:
        assert s.stop() == 0
        s.close()
    s = Server("--parallel", "1", "-c", "256", "--cors-origin", "")
    try:
        r = preflight(s, "/v1/completions")
        assert r.status == 204 and r.headers["allow"] == "POST, OPTIONS"
        assert "access-control-allow-origin" not in r.headers
        assert "access-control-allow-origin" not in s.get("/health").headers
    finally:
        assert s.stop() == 0
        s.close()


def test_one_slot_one_queue_admits_two_of_four():
    s = Server("--parallel", "1", "--max-queue", "1", "-c", "512")
    try:
        # Long enough (200 tokens) that the first is still running when the fourth arrives on a
        # loaded machine.
        body = {"model": MODEL_ID, "prompt": "1, 2, 3,", "max_tokens": 200, "temperature": 0,
                "ignore_eos": True}
        out = [None] * 4
        barrier = threading.Barrier(4)

        def run(i):
            barrier.wait()
            out[i] = s.post("/v1/completions", body)

        ts = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(timeout=120)
        statuses = sorted(r.status for r in out)
        assert statuses == [200, 200, 429, 429], [(r.status, r.text[:200]) for r in out]
        for r in out:
            if r.status == 200:
                assert r.json()["usage"]["completion_tokens"] == 200
            else:
                assert r.json()["error"]["code"] == "queue_full"
    finally:
        assert s.stop() == 0
        s.close()


HI = [{"role": "user", "content": "Say hi."}]
# The chat prompt as completions text (SmolLM2's ChatML; special-token text is parsed).
HI_TEXT = "<|im_start|>user\nSay hi.<|im_end|>\n<|im_start|>assistant\n"


def test_ignore_eos_generates_to_max_tokens(server):
    c = server.client()
    n = 48
    plain = c.chat.completions.create(model=MODEL_ID, messages=HI, max_tokens=n, temperature=0)
    assert plain.choices[0].finish_reason == "stop" and plain.usage.completion_tokens < n, \
        "the model must stop on its own here for the test to mean anything"
    forced = c.chat.completions.create(model=MODEL_ID, messages=HI, max_tokens=n, temperature=0,
                                       extra_body={"ignore_eos": True})
    assert forced.choices[0].finish_reason == "length"
    assert forced.usage.completion_tokens == n
    assert forced.choices[0].message.content.startswith(plain.choices[0].message.content)
    streamed = list(c.chat.completions.create(model=MODEL_ID, messages=HI, max_tokens=n,
                                              temperature=0, stream=True,
                                              stream_options={"include_usage": True},
                                              extra_body={"ignore_eos": True}))
    assert streamed[-1].usage.completion_tokens == n
    assert "".join(k.choices[0].delta.content or "" for k in streamed if k.choices) == \
        forced.choices[0].message.content
    # Completions.
    p = c.completions.create(model=MODEL_ID, prompt=HI_TEXT, max_tokens=n, temperature=0)
    assert p.choices[0].finish_reason == "stop" and p.usage.completion_tokens < n
    f = c.completions.create(model=MODEL_ID, prompt=HI_TEXT, max_tokens=n, temperature=0,
                             extra_body={"ignore_eos": True})
    assert f.choices[0].finish_reason == "length" and f.usage.completion_tokens == n
    assert f.choices[0].text.startswith(p.choices[0].text)
    # A wrong type is a 400 naming the field.
    r = server.post("/v1/completions", {"prompt": "x", "ignore_eos": "yes"})
    assert r.status == 400 and r.json()["error"]["param"] == "ignore_eos"


# From the second fresh-user pass: a value nested ~60,000 deep in a checked field crashed the
# server (a recursive dump while describing it); `curl -d` bodies (form-urlencoded) over 8 KiB got
# a false 413 from cpp-httplib's form reader.
@pytest.mark.parametrize("field,path", [("max_tokens", "/v1/completions"),
                                        ("stop", "/v1/completions"),
                                        ("messages", "/v1/chat/completions")])
def test_deeply_nested_value_is_a_400_and_the_server_lives(server, field, path):
    depth = 100000
    raw = ('{"' + field + '":' + "[" * depth + "]" * depth +
           ',"prompt":"hi","messages":[{"role":"user","content":"hi"}]}')
    if field == "messages":
        raw = '{"messages":' + "[" * depth + "]" * depth + "}"
    r = server.post(path, data=raw.encode())
    assert r.status == 400, r.text
    assert "deeper than 64 levels" in r.json()["error"]["message"], r.text
    # a shallow but wrong container is described, not dumped
    r = server.post("/v1/completions", body={"prompt": "hi", "max_tokens": [[[1, 2, 3]]]})
    assert r.status == 400 and "an array of 1 element" in r.json()["error"]["message"], r.text
    assert server.get("/health").status == 200


def test_form_urlencoded_body_is_read_as_json(server):
    # what `curl -d @body.json` sends: the declared type is ignored, the body is JSON
    prompt = "word " * 3000  # ~15 KB: over cpp-httplib's 8 KiB form limit and over -c 512
    body = json.dumps({"prompt": prompt, "max_tokens": 1}).encode()
    r = server.post("/v1/completions", data=body,
                    headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status == 400, r.text  # too long for -c 512: the real answer, not a 413
    assert r.json()["error"]["code"] == "context_length_exceeded", r.text
    small = json.dumps({"prompt": "Hello", "max_tokens": 2}).encode()
    r = server.post("/v1/completions", data=small,
                    headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status == 200, r.text


def test_request_larger_than_admission_is_a_400_with_no_work():
    # n x prompts above --parallel + --max-queue can never be admitted: 400 up front (not a 429
    # that clients retry), and no part of it runs
    s = Server("--parallel", "1", "--max-queue", "0", "-c", "256")
    try:
        before = s.get("/metrics").text
        r = s.post("/v1/completions", body={"prompt": "hi", "n": 2, "max_tokens": 2})
        assert r.status == 400, r.text
        assert "admits at most 1 at once" in r.json()["error"]["message"], r.text
        r = s.post("/v1/completions", body={"prompt": ["a", "b"], "max_tokens": 2})
        assert r.status == 400, r.text
        after = s.get("/metrics").text
        fin = [ln for ln in after.splitlines() if ln.startswith("zinc_engine_requests_total")]
        assert fin, after  # the series exist, so the comparison below means something
        assert fin == [ln for ln in before.splitlines()
                       if ln.startswith("zinc_engine_requests_total")], (fin, before)
        r = s.post("/v1/completions", body={"prompt": "hi", "n": 1, "max_tokens": 2})
        assert r.status == 200, r.text
    finally:
        assert s.stop() == 0, s.stderr()
        s.close()
