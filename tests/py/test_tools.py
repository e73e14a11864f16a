"""Tool calling on `zinc serve` with the real Qwen2.5-Coder-0.5B-Instruct (its template has a
tools branch and writes Hermes `<tool_call>` blocks), through the openai client.

Oracles: the prompt of a conversation with tools, assistant tool_calls and tool results has
exactly the tokens of the template rendered by jinja2 with transformers' settings (the request's
usage.prompt_tokens against /tokenize of that text); forced calls (tool_choice required / named)
parse and their arguments validate against the tool's parameters schema; bad tools are 400s.
"""
import json

import jinja2.sandbox
import pytest

from server_harness import MODEL_ID, SOURCE, Server

jsonschema = pytest.importorskip("jsonschema")
llama_cpp = pytest.importorskip("llama_cpp")

QWEN = SOURCE / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"

# Keys in sorted order: the server's JSON objects keep keys sorted, so the jinja2 reference
# renders the same text only for sorted dicts.
WEATHER = {"function": {"description": "Current weather in a city", "name": "get_weather",
                        "parameters": {"properties": {"city": {"maxLength": 20, "type": "string"},
                                                      "unit": {"enum": ["c", "f"]}},
                                       "required": ["city", "unit"], "type": "object"}},
           "type": "function"}
TIME = {"function": {"description": "The time in a timezone", "name": "get_time",
                     "parameters": {"properties": {"tz": {"maxLength": 30, "type": "string"}},
                                    "required": ["tz"], "type": "object"}},
        "type": "function"}
TOOLS = [WEATHER, TIME]


@pytest.fixture(scope="module")
def server():
    if not QWEN.exists():
        pytest.skip(f"{QWEN} missing (scripts/fetch-models)")
    s = Server("--parallel", "2", "-c", 2048, model=QWEN)
    yield s
    assert s.stop() == 0, s.stderr()
    s.close()


@pytest.fixture(scope="module")
def client(server):
    return server.client()


def render(messages, tools):
    tmpl = dict(llama_cpp.Llama(model_path=str(QWEN), vocab_only=True, verbose=False).metadata)[
        "tokenizer.chat_template"]
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, ensure_ascii=False, indent=None, separators=None, sort_keys=False: \
        json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    return env.from_string(tmpl).render(messages=messages, tools=tools, documents=None,
                                        add_generation_prompt=True, bos_token="<|endoftext|>",
                                        eos_token="<|im_end|>")


def test_history_with_tools_renders_as_the_template(server, client):
    calls = [{"id": "call_1", "type": "function",
              "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris", "unit": "c"})}}]
    messages = [{"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": None, "tool_calls": calls},
                {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"}]
    r = client.chat.completions.create(model=MODEL_ID, messages=messages, tools=TOOLS,
                                       temperature=0, max_tokens=30)
    # The reference: transformers parses arguments into a dict before templating.
    ref_msgs = json.loads(json.dumps(messages))
    ref_msgs[1]["content"] = ""
    ref_msgs[1]["tool_calls"][0]["function"]["arguments"] = {"city": "Paris", "unit": "c"}
    text = render(ref_msgs, TOOLS)
    assert "<tools>" in text and "<tool_call>" in text and "<tool_response>" in text
    want = server.post("/tokenize", {"content": text}).json()["tokens"]
    assert r.usage.prompt_tokens == len(want)
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")


def check_calls(choice, names):
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.tool_calls, choice
    for call in choice.message.tool_calls:
        assert call.type == "function" and call.id.startswith("call_")
        assert call.function.name in names
        tool = next(t for t in TOOLS if t["function"]["name"] == call.function.name)
        jsonschema.validate(json.loads(call.function.arguments), tool["function"]["parameters"])


@pytest.mark.parametrize("temperature", [0, 0.9])
def test_tool_choice_required_and_named(client, temperature):
    msgs = [{"role": "user", "content": "What is the weather in Rome?"}]
    r = client.chat.completions.create(model=MODEL_ID, messages=msgs, tools=TOOLS, seed=3,
                                       tool_choice="required", temperature=temperature, max_tokens=120)
    check_calls(r.choices[0], {"get_weather", "get_time"})
    r = client.chat.completions.create(
        model=MODEL_ID, messages=msgs, tools=TOOLS, seed=3, temperature=temperature, max_tokens=120,
        tool_choice={"type": "function", "function": {"name": "get_time"}})
    check_calls(r.choices[0], {"get_time"})
    assert len(r.choices[0].message.tool_calls) == 1


def test_tool_choice_auto_parses_the_models_call(client):
    r = client.chat.completions.create(
        model=MODEL_ID, tools=TOOLS, temperature=0, max_tokens=120,
        messages=[{"role": "user", "content": "What is the weather in Paris in celsius? Use the tool."}])
    c = r.choices[0]
    # Greedy Qwen2.5-Coder-0.5B calls get_weather here, as a bare call object (no <tool_call>
    # tags: the Hermes fallback), which is parsed back.
    check_calls(c, {"get_weather"})
    assert "<tool_call>" not in (c.message.content or "")


# A schema the model's own call breaks: asked about Paris, greedy Qwen2.5-Coder-0.5B writes
# "city": "Paris", longer than this maxLength.
SHORT_WEATHER = {"function": {"description": "Current weather in a city", "name": "get_weather",
                              "parameters": {"properties": {"city": {"maxLength": 3, "type": "string"},
                                                            "unit": {"enum": ["c", "f"]}},
                                             "required": ["city", "unit"], "type": "object"}},
                 "type": "function"}


def test_tool_choice_auto_call_arguments_follow_the_schema(server, client):
    # tool_choice auto: the reply is free until it opens a call (here a bare call at the reply's
    # start, which this small Qwen writes instead of a <tool_call> block), then the call grammar
    # holds (a lazy grammar), so a call the model makes has arguments its schema allows.
    msgs = [{"role": "user", "content": "What is the weather in Paris in celsius? Use the tool."}]
    tools = [SHORT_WEATHER, TIME]
    params = SHORT_WEATHER["function"]["parameters"]
    r = client.chat.completions.create(model=MODEL_ID, tools=tools, temperature=0,
                                       max_tokens=120, messages=msgs)
    # The oracle that the constraint did something: the same prompt (jinja2's rendering of the
    # template) as a plain completion is the model's free reply, whose call breaks the schema.
    free = client.completions.create(model=MODEL_ID, prompt=render(msgs, tools), temperature=0,
                                     max_tokens=120)
    assert free.usage.prompt_tokens == r.usage.prompt_tokens
    free_call = json.loads(free.choices[0].text)
    assert free_call["name"] == "get_weather", free_call
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(free_call["arguments"], params)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls", c
    assert [t.function.name for t in c.message.tool_calls] == ["get_weather"]
    args = json.loads(c.message.tool_calls[0].function.arguments)
    jsonschema.validate(args, params)
    # Greedy under the mask: the model's own city, in the 3 characters the schema leaves.
    assert "paris".startswith(args["city"].lower()), args
    # Sampled and streamed alike: every call made validates.
    for seed in (1, 2, 3):
        content, calls, finish = stream_reply(client, tools=tools, temperature=0.9, seed=seed,
                                              max_tokens=120, messages=msgs)
        for call in calls:
            schema = params if call["name"] == "get_weather" else \
                TIME["function"]["parameters"]
            jsonschema.validate(json.loads("".join(call["fragments"])), schema)
        assert finish == ("tool_calls" if calls else "stop"), (finish, content)


def test_tool_choice_auto_free_text_stays_free(client):
    # No call: the reply is exactly the model's free text, the same prompt as a plain completion
    # (greedy; this prompt gets an answer, not a call: STREAMED).
    msgs = [{"role": "user", "content": "Hi! Who are you?"}]
    auto = client.chat.completions.create(model=MODEL_ID, tools=TOOLS, temperature=0,
                                          max_tokens=40, messages=msgs).choices[0]
    free = client.completions.create(model=MODEL_ID, prompt=render(msgs, TOOLS), temperature=0,
                                     max_tokens=40).choices[0]
    assert auto.message.tool_calls is None, auto
    assert auto.message.content == free.text and auto.finish_reason == free.finish_reason


def test_tool_choice_auto_strict_tool_with_unenforceable_schema_is_400(server):
    bad = {"type": "function", "function": {"name": "mail", "strict": True, "parameters": {
        "type": "object", "properties": {"to": {"type": "string", "format": "email"}}}}}
    body = {"model": MODEL_ID, "max_tokens": 5, "tools": [bad],
            "messages": [{"role": "user", "content": "hi"}]}
    r = server.post("/v1/chat/completions", body)
    assert r.status == 400, r.text
    assert r.json()["error"]["param"] == "tools[0].function.parameters.properties.to.format"
    bad["function"]["strict"] = False  # not strict: auto calls to it take any object
    assert server.post("/v1/chat/completions", body).status == 200


def test_tool_choice_none_is_plain_text(client):
    r = client.chat.completions.create(
        model=MODEL_ID, tools=TOOLS, tool_choice="none", temperature=0, max_tokens=20,
        messages=[{"role": "user", "content": "Say hello."}])
    assert r.choices[0].message.tool_calls is None
    assert r.choices[0].finish_reason in ("stop", "length")


def stream_reply(client, **kw):
    """A streamed reply accumulated as an OpenAI client does: content, calls by index (each
    with its id, type, name and arguments fragments), finish_reason."""
    content, calls, finish = "", {}, None
    for ch in client.chat.completions.create(model=MODEL_ID, stream=True, **kw):
        if not ch.choices:
            continue
        d = ch.choices[0].delta
        content += d.content or ""
        for tc in d.tool_calls or []:
            if tc.index not in calls:  # a call's first delta: id, type and name
                assert tc.id and tc.id.startswith("call_") and tc.type == "function", tc
                assert tc.function.name, tc
                calls[tc.index] = {"name": "", "fragments": [], "id": tc.id}
            else:
                assert tc.id is None and not tc.function.name, tc
            e = calls[tc.index]
            e["name"] += tc.function.name or ""
            e["fragments"].append(tc.function.arguments or "")
        finish = ch.choices[0].finish_reason or finish
    assert sorted(calls) == list(range(len(calls)))
    return content, [calls[i] for i in sorted(calls)], finish


STREAMED = [
    # (tool_choice, prompt). Greedy Qwen2.5-Coder-0.5B: a bare call object (auto); two
    # <tool_call> blocks (required: the grammar); a text reply (auto); a call written as a
    # fenced ```json block, which is text (auto).
    ("auto", "What is the weather in Paris in celsius? Use the tool."),
    ("required", "What is the weather in Paris and the time in Tokyo?"),
    ("auto", "Hi! Who are you?"),
    ("auto", "Weather in Oslo?"),
]


@pytest.mark.parametrize("tool_choice,prompt", STREAMED)
def test_streamed_deltas_concatenate_to_the_whole_response(client, tool_choice, prompt):
    kw = dict(tools=TOOLS, tool_choice=tool_choice, temperature=0, max_tokens=120,
              messages=[{"role": "user", "content": prompt}])
    whole = client.chat.completions.create(model=MODEL_ID, **kw).choices[0]
    content, calls, finish = stream_reply(client, **kw)
    assert finish == whole.finish_reason
    assert content == (whole.message.content or "")
    want = [(c.function.name, c.function.arguments) for c in whole.message.tool_calls or []]
    assert [(c["name"], "".join(c["fragments"])) for c in calls] == want
    if tool_choice == "required":
        check_calls(whole, {"get_weather", "get_time"})
    if calls:
        assert finish == "tool_calls"
        # Streamed as generated: a call's arguments arrive in several fragments.
        assert all(len(c["fragments"]) > 2 for c in calls), calls
    else:
        assert whole.message.tool_calls is None and content


@pytest.mark.parametrize("tool_choice", ["required", "auto"])
def test_parallel_tool_calls_false_is_one_call(client, tool_choice):
    # Greedy Qwen2.5-Coder-0.5B forced ("required") makes two calls for this prompt (STREAMED);
    # with parallel_tool_calls false the grammar allows one; auto stops after the first call.
    kw = dict(tools=TOOLS, tool_choice=tool_choice, temperature=0, max_tokens=120,
              messages=[{"role": "user",
                         "content": "What is the weather in Paris and the time in Tokyo?"}])
    both = client.chat.completions.create(model=MODEL_ID, **kw).choices[0]
    if tool_choice == "required":
        assert len(both.message.tool_calls) == 2, both
    one = client.chat.completions.create(model=MODEL_ID, parallel_tool_calls=False, **kw)
    c = one.choices[0]
    assert len(c.message.tool_calls or []) <= 1, c
    if tool_choice == "required" or both.message.tool_calls:
        check_calls(c, {"get_weather", "get_time"})
        assert len(c.message.tool_calls) == 1
        first = both.message.tool_calls[0].function
        assert (c.message.tool_calls[0].function.name,
                c.message.tool_calls[0].function.arguments) == (first.name, first.arguments)
    content, calls, finish = stream_reply(client, parallel_tool_calls=False, **kw)
    assert finish == c.finish_reason
    assert content == (c.message.content or "")
    assert [(e["name"], "".join(e["fragments"])) for e in calls] == [
        (t.function.name, t.function.arguments) for t in c.message.tool_calls or []]


# A conversation after which greedy Qwen2.5-Coder-0.5B writes call after call (bare objects, one
# a line) until max_tokens: with parallel_tool_calls false the reply is cut after the first.
CONTINUES = [
    {"role": "user", "content": "Weather and time in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": json.dumps({"city": "Paris", "unit": "c"})}},
        {"id": "call_2", "type": "function", "function": {
            "name": "get_time", "arguments": json.dumps({"tz": "Europe/Paris"})}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"},
    {"role": "tool", "tool_call_id": "call_2", "content": "12:00"},
    {"role": "assistant", "content": "21 C and 12:00."},
    {"role": "user", "content": "Now the same for Rome."}]


def test_parallel_tool_calls_false_usage_is_the_tokens_generated(client):
    # Streamed and whole report the same completion_tokens: the tokens generated through the one
    # that completes the first call (generation is stopped right there, token by token, however
    # the engine's events are polled), which are exactly the tokens the logprobs list.
    kw = dict(tools=TOOLS, temperature=0, max_tokens=120, messages=CONTINUES)
    free = client.chat.completions.create(model=MODEL_ID, **kw)
    assert len(free.choices[0].message.tool_calls) > 1, free  # the model goes on
    kw["parallel_tool_calls"] = False
    whole = client.chat.completions.create(model=MODEL_ID, logprobs=True, **kw)
    usage, n_streamed = None, 0
    for ch in client.chat.completions.create(model=MODEL_ID, stream=True, logprobs=True,
                                             stream_options={"include_usage": True}, **kw):
        usage = ch.usage or usage
        if ch.choices and ch.choices[0].logprobs:
            n_streamed += len(ch.choices[0].logprobs.content)
    n = whole.usage.completion_tokens
    assert usage.completion_tokens == n == n_streamed
    assert n < free.usage.completion_tokens
    tokens = [bytes(e.bytes) for e in whole.choices[0].logprobs.content]
    assert len(tokens) == n
    raw = b"".join(tokens).decode()
    # The first call object ends in the last token, not before it.
    start = raw.index("{")
    _, end = json.JSONDecoder().raw_decode(raw, start)
    assert len(raw) - len(tokens[-1].decode()) < end <= len(raw), (raw, end)
    c = whole.choices[0]
    check_calls(c, {"get_weather", "get_time"})
    assert len(c.message.tool_calls) == 1


def test_streamed_tool_calls_validate(client):
    content, calls, finish = stream_reply(
        client, tools=TOOLS, tool_choice="required", temperature=0, max_tokens=120,
        messages=[{"role": "user", "content": "Time in Tokyo?"}])
    assert finish == "tool_calls"
    assert calls
    for e in calls:
        tool = next(t for t in TOOLS if t["function"]["name"] == e["name"])
        jsonschema.validate(json.loads("".join(e["fragments"])), tool["function"]["parameters"])


def test_streamed_tool_calls_carry_every_tokens_logprobs(client):
    kw = dict(model=MODEL_ID, tools=TOOLS, temperature=0, max_tokens=60, logprobs=True,
              messages=[{"role": "user", "content": "What is the weather in Paris in celsius? Use the tool."}])
    whole = client.chat.completions.create(**kw).choices[0]
    streamed = []
    for ch in client.chat.completions.create(stream=True, **kw):
        if ch.choices and ch.choices[0].logprobs:
            streamed += [(e.token, e.logprob) for e in ch.choices[0].logprobs.content]
    assert whole.message.tool_calls
    assert streamed == [(e.token, e.logprob) for e in whole.logprobs.content]


def test_streamed_call_cut_by_max_tokens_is_length(client):
    # max_tokens ends the reply inside the arguments: the call keeps what was generated (a
    # prefix of the uncut call's arguments) and the finish_reason is "length", streamed and
    # whole alike.
    kw = dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}},
              temperature=0, messages=[{"role": "user", "content": "Weather in Oslo?"}])
    full = client.chat.completions.create(model=MODEL_ID, max_tokens=120, **kw)
    full_args = full.choices[0].message.tool_calls[0].function.arguments
    # The uncut reply ends '..."}}' '</tool_call>' EOS: five tokens fewer ends in the arguments.
    kw["max_tokens"] = full.usage.completion_tokens - 5
    whole = client.chat.completions.create(model=MODEL_ID, **kw).choices[0]
    content, calls, finish = stream_reply(client, **kw)
    assert whole.finish_reason == finish == "length"
    assert [(c["name"], "".join(c["fragments"])) for c in calls] == \
        [(c.function.name, c.function.arguments) for c in whole.message.tool_calls]
    cut = whole.message.tool_calls[0].function.arguments
    assert full_args.startswith(cut) and len(cut) < len(full_args), (cut, full_args)


def test_langchain_bind_tools_stream_matches_invoke(server):
    lc = pytest.importorskip("langchain_openai")
    llm = lc.ChatOpenAI(model=MODEL_ID, base_url=server.url + "/v1", api_key="x", temperature=0,
                        max_tokens=120, max_retries=0).bind_tools(TOOLS, tool_choice="required")
    msgs = [("user", "What is the weather in Paris and the time in Tokyo?")]
    whole = llm.invoke(msgs)
    acc = None
    n_chunks = 0
    for chunk in llm.stream(msgs):
        acc = chunk if acc is None else acc + chunk
        n_chunks += bool(chunk.tool_call_chunks)
    assert whole.tool_calls, whole
    assert [(c["name"], c["args"]) for c in acc.tool_calls] == \
        [(c["name"], c["args"]) for c in whole.tool_calls]
    assert acc.content == whole.content
    assert acc.response_metadata.get("finish_reason") == "tool_calls"
    assert n_chunks > len(whole.tool_calls)  # the calls came in pieces



@pytest.mark.parametrize("method,strict", [("function_calling", True), ("json_schema", None)])
def test_langchain_with_structured_output_through_the_tools_template(server, method, strict):
    # LangChain's structured output on a model whose template has a tools branch: by a forced
    # call (tool_choice named, parallel_tool_calls false, the tool `strict`), rendered through
    # Qwen's <tools> block and parsed back from its <tool_call>, or by response_format.
    lc = pytest.importorskip("langchain_openai")
    pydantic = pytest.importorskip("pydantic")

    class Weather(pydantic.BaseModel):
        """The weather question, as a tool's arguments."""
        city: str = pydantic.Field(max_length=20)
        unit: str = pydantic.Field(json_schema_extra={"enum": ["c", "f"]})

    llm = lc.ChatOpenAI(model=MODEL_ID, base_url=server.url + "/v1", api_key="x", temperature=0,
                        max_tokens=120, max_retries=0)
    kw = {"strict": strict} if strict is not None else {}
    out = llm.with_structured_output(Weather, method=method, include_raw=True, **kw).invoke(
        [("user", "What is the weather in Paris in celsius?")])
    assert out["parsing_error"] is None, out
    assert isinstance(out["parsed"], Weather) and out["parsed"].unit in ("c", "f"), out
    if method == "function_calling":
        assert [c["name"] for c in out["raw"].tool_calls] == ["Weather"], out["raw"]


BAD = [
    ({"tools": {"a": 1}}, "tools", "expected an array"),
    ({"tools": [{"type": "retrieval"}]}, "tools[0].type", "must be 'function'"),
    ({"tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools[0].function.name",
     "has a character other than"),
    ({"tools": [WEATHER, WEATHER]}, "tools[1].function.name", "names two tools"),
    ({"tools": TOOLS, "tool_choice": "always"}, "tool_choice", "'always' is not a tool choice"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "tool_choice.function.name", "'nope' is not one of the request's tools"),
    ({"tool_choice": "required"}, "tool_choice", "needs 'tools'"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "string", "format": "email"}}}}}],
      "tool_choice": "required"},
     "tools[0].function.parameters.properties.x.format", "'format' is not supported"),
]


@pytest.mark.parametrize("extra,param,message", BAD)
def test_bad_tools_are_400(server, extra, param, message):
    body = {"model": MODEL_ID, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    body.update(extra)
    r = server.post("/v1/chat/completions", body)
    assert r.status == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param, err
    assert message in err["message"], err


# A harmony-style template (gpt-oss's message layout; any template mentioning <|channel|> selects
# the format) on a copy of SmolLM2, written by gguf's own gguf_new_metadata: the server side of
# the format end to end (detection, the forced-call grammar, parsing whole and streamed). SmolLM2
# has no harmony tokens, so it spells the markers in plain tokens; a real gpt-oss is not here.
HARMONY_TEMPLATE = (
    "{%- for m in messages %}{% if m.role == 'assistant' %}<|start|>assistant<|channel|>final"
    "<|message|>{{ m.content }}<|end|>{% else %}<|start|>{{ m.role }}<|message|>{{ m.content }}"
    "<|end|>{% endif %}{% endfor -%}"
    "{%- if tools %}<|start|>developer<|message|># Tools\n{% for t in tools %}"
    "functions.{{ t.function.name }}: {{ t.function.description }}\n{% endfor %}<|end|>{% endif -%}"
    "{%- if add_generation_prompt %}<|start|>assistant{% endif %}")


@pytest.fixture(scope="module")
def harmony(tmp_path_factory):
    import subprocess
    import sys
    from server_harness import SMOL
    if not SMOL.exists():
        pytest.skip(f"{SMOL} missing (scripts/fetch-models)")
    dst = tmp_path_factory.mktemp("harmony") / "harmony.gguf"
    r = subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(SMOL),
                        str(dst), "--chat-template", HARMONY_TEMPLATE, "--force"],
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    s = Server("--parallel", "1", "-c", 1024, model=dst)
    yield s.client()
    s.close()


@pytest.mark.parametrize("tool_choice", ["required",
                                         {"type": "function", "function": {"name": "get_time"}}])
def test_harmony_forced_call_whole_and_streamed(harmony, tool_choice):
    kw = dict(tools=TOOLS, tool_choice=tool_choice, temperature=0, max_tokens=80,
              messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    whole = harmony.chat.completions.create(model=MODEL_ID, **kw).choices[0]
    names = {"get_time"} if isinstance(tool_choice, dict) else {"get_weather", "get_time"}
    check_calls(whole, names)
    assert len(whole.message.tool_calls) == 1  # harmony: one call a turn
    assert not whole.message.content, whole.message.content
    # What was generated (the tokens' bytes) is harmony's call, which the parser read back.
    call = whole.message.tool_calls[0].function
    raw = b"".join(bytes(e.bytes) for e in harmony.chat.completions.create(
        model=MODEL_ID, logprobs=True, **kw).choices[0].logprobs.content).decode()
    assert raw == (f"<|channel|>commentary to=functions.{call.name} <|constrain|>json<|message|>"
                   + call.arguments), raw
    content, calls, finish = stream_reply(harmony, **kw)
    assert finish == whole.finish_reason == "tool_calls"
    assert content == (whole.message.content or "")
    assert [(e["name"], "".join(e["fragments"])) for e in calls] == [
        (t.function.name, t.function.arguments) for t in whole.message.tool_calls]
