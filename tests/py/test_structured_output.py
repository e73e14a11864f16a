"""Structured output on `zinc serve` with the real SmolLM2 model: response_format json_schema /
json_object, llama.cpp's `grammar` and `json_schema` fields, vLLM's `guided_json`, through the
openai client and raw HTTP, greedy and sampled, several requests batched at once; vLLM's
`guided_choice` (and `guided_regex` refused), `response_format` on /v1/completions too.

Oracle: every answer must parse as JSON and validate against its schema (the `jsonschema`
package), or match the grammar (checked by hand for the small grammars used); bad schemas and
grammars are 400s naming the field and the place.
"""
import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from server_harness import MODEL_ID, Server

jsonschema = pytest.importorskip("jsonschema")

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer"},
        "city": {"enum": ["Paris", "London", "Rome"]},
        "member": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3},
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string", "maxLength": 16},
                           "zip": {"type": ["integer", "null"]}},
            "required": ["street", "zip"],
            "additionalProperties": False,
        },
        "nickname": {"type": "string", "maxLength": 8},
    },
    "required": ["name", "age", "city", "member", "tags", "address"],
    "additionalProperties": False,
}
PROMPT = "Describe a person living in Paris as JSON with name, age, city, member, tags, address."


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", "4", "-c", 1024)
    yield s
    assert s.stop() == 0, s.stderr()
    s.close()


@pytest.fixture(scope="module")
def client(server):
    return server.client()


def schema_format(schema, name="person"):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def chat(client, schema, temperature=0.0, seed=1, prompt=PROMPT, max_tokens=300):
    r = client.chat.completions.create(
        model=MODEL_ID, temperature=temperature, seed=seed, max_tokens=max_tokens,
        messages=[{"role": "user", "content": prompt}], response_format=schema_format(schema))
    return r.choices[0]


@pytest.mark.parametrize("temperature,seed", [(0.0, 1), (0.8, 1), (1.2, 7), (1.0, 42)])
def test_json_schema_output_validates(client, temperature, seed):
    c = chat(client, PERSON, temperature, seed)
    assert c.finish_reason == "stop", c.message.content
    obj = json.loads(c.message.content)
    jsonschema.validate(obj, PERSON)


def test_json_schema_batched_sequences_keep_their_own_state(client):
    # Four different schemas at once: each sequence's matcher state is its own.
    schemas = [
        PERSON,
        {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4},
        {"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "number"}},
         "required": ["ok", "n"]},
        {"enum": ["yes", "no", 3, None]},
    ]
    with ThreadPoolExecutor(4) as ex:
        outs = list(ex.map(lambda s: chat(client, s[1], 0.9, s[0]), enumerate(schemas)))
    for s, c in zip(schemas, outs):
        assert c.finish_reason == "stop", c.message.content
        jsonschema.validate(json.loads(c.message.content), s)


def test_json_schema_streamed(client):
    stream = client.chat.completions.create(
        model=MODEL_ID, temperature=0.7, seed=3, max_tokens=300, stream=True,
        messages=[{"role": "user", "content": PROMPT}], response_format=schema_format(PERSON))
    text, finish = "", None
    for ch in stream:
        if ch.choices:
            text += ch.choices[0].delta.content or ""
            finish = ch.choices[0].finish_reason or finish
    assert finish == "stop"
    jsonschema.validate(json.loads(text), PERSON)


def test_refs_recursion_anyof_and_optional_properties(client):
    schema = {
        # (A recursive $ref is checked in tests/unit/server/test_tool_calls.cpp: a 135M model
        # nests a recursive schema until max_tokens.)
        "$defs": {"node": {"type": "object",
                           "properties": {"v": {"type": "integer"},
                                          "kids": {"type": "array", "items": {"$ref": "#/$defs/leaf"},
                                                   "maxItems": 2}},
                           "required": ["v"]},
                  "leaf": {"type": "object", "properties": {"w": {"type": "boolean"}},
                           "required": ["w"], "additionalProperties": False}},
        "type": "object",
        "properties": {"a": {"type": "string", "maxLength": 5}, "b": {"type": "integer"},
                       "root": {"$ref": "#/$defs/node"},
                       "x": {"anyOf": [{"type": "null"}, {"const": "fixed"}]}},
        "required": ["root", "x"],
        "additionalProperties": False,
    }
    for seed in (1, 2, 3):
        c = chat(client, schema, 1.0, seed, prompt="Give me a small tree as JSON.")
        assert c.finish_reason == "stop", c.message.content
        jsonschema.validate(json.loads(c.message.content), schema)


def test_json_object(client):
    for temperature in (0.0, 0.9):
        r = client.chat.completions.create(
            model=MODEL_ID, temperature=temperature, seed=5, max_tokens=400,
            messages=[{"role": "user", "content": "Reply with a JSON object with a key 'color'."}],
            response_format={"type": "json_object"})
        c = r.choices[0]
        if c.finish_reason == "stop":
            assert isinstance(json.loads(c.message.content), dict)
        else:  # cut by max_tokens: still a prefix of an object
            assert c.message.content.startswith("{")


def test_gbnf_grammar_field(server):
    grammar = r'''root ::= "The answer is " answer "."
answer ::= ("yes" | "no") (", " [a-z]{1,6}){0,2}'''
    for temperature in (0, 1.0):
        for path, key in (("/v1/chat/completions", "messages"), ("/v1/completions", "prompt")):
            body = {"model": MODEL_ID, "temperature": temperature, "seed": 9, "max_tokens": 40,
                    "grammar": grammar}
            body[key] = ([{"role": "user", "content": "Is the sky blue?"}]
                         if key == "messages" else "Q: Is the sky blue?\nA:")
            r = server.post(path, body)
            assert r.status == 200, r.text
            c = r.json()["choices"][0]
            text = c["message"]["content"] if key == "messages" else c["text"]
            assert c["finish_reason"] == "stop"
            assert re.fullmatch(r"The answer is (yes|no)(, [a-z]{1,6}){0,2}\.", text), text


def test_llama_cpp_json_schema_and_vllm_guided_json(server):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    for field, value in (("json_schema", schema), ("guided_json", schema),
                         ("guided_json", json.dumps(schema))):
        r = server.post("/v1/chat/completions", {
            "model": MODEL_ID, "temperature": 0, "max_tokens": 60, field: value,
            "messages": [{"role": "user", "content": "Pick a number."}]})
        assert r.status == 200, r.text
        jsonschema.validate(json.loads(r.json()["choices"][0]["message"]["content"]), schema)


def test_response_format_on_completions(server):
    # /v1/completions takes response_format as chat does (vLLM, llama.cpp's server); before, the
    # field was read for chat only and a completion came back free-form.
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    for fmt in ({"type": "json_object"}, schema_format(schema, "num")):
        r = server.post("/v1/completions", {
            "model": MODEL_ID, "temperature": 0, "max_tokens": 60, "response_format": fmt,
            "prompt": "A number as JSON:"})
        assert r.status == 200, r.text
        c = r.json()["choices"][0]
        assert c["finish_reason"] == "stop", c
        v = json.loads(c["text"])
        assert isinstance(v, dict)
        if fmt["type"] == "json_schema":
            jsonschema.validate(v, schema)
    assert_400(server.post("/v1/completions", {
        "model": MODEL_ID, "max_tokens": 5, "prompt": "x", "response_format": {"type": "xml"}}),
        "response_format.type", "'xml' is not supported")


def test_vllm_guided_choice(server):
    choices = ["positive", "negative", "it's \"mixed\""]
    for path, key in (("/v1/chat/completions", "messages"), ("/v1/completions", "prompt")):
        for temperature in (0, 1.0):
            body = {"model": MODEL_ID, "temperature": temperature, "seed": 3, "max_tokens": 20,
                    "guided_choice": choices}
            body[key] = ([{"role": "user", "content": "Sentiment of 'I love it'?"}]
                         if key == "messages" else "Sentiment of 'I love it':")
            r = server.post(path, body)
            assert r.status == 200, r.text
            c = r.json()["choices"][0]
            text = c["message"]["content"] if key == "messages" else c["text"]
            assert text in choices, text


def assert_400(r, param, message):
    assert r.status == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param, err
    assert message in err["message"], err


def test_unicode_in_strings_and_enums(server):
    schema = {"type": "object", "properties": {"w": {"enum": ["café", "naïve", "日本"]},
                                               "s": {"type": "string", "maxLength": 10}},
              "required": ["w", "s"]}
    r = server.post("/v1/chat/completions", {
        "model": MODEL_ID, "temperature": 1.0, "seed": 4, "max_tokens": 80,
        "response_format": schema_format(schema),
        "messages": [{"role": "user", "content": "Un mot français, s'il vous plaît."}]})
    assert r.status == 200, r.text
    jsonschema.validate(json.loads(r.json()["choices"][0]["message"]["content"]), schema)


BAD = [
    ({"grammar": "root ::= foo"}, "grammar", "line 1, column 10: rule 'foo' is referenced but never defined"),
    ({"grammar": "root ::= \"a\" (\"b\""}, "grammar", "expected ')' to close the group"),
    ({"grammar": "root ::= root \"a\""}, "grammar", "left-recursive"),
    ({"grammar": 5}, "grammar", "expected a string (a GBNF grammar)"),
    ({"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "string", "pattern": "^a+$"}}}},
     "response_format.json_schema.schema.pattern", "'pattern' is not supported"),
    ({"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}}}}},
     "response_format.json_schema.schema.properties.a.minimum", "'minimum' is not supported"),
    ({"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "strin"}}}},
     "response_format.json_schema.schema.type", "unknown type 'strin'"),
    ({"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"$ref": "#/$defs/missing"}}}},
     "response_format.json_schema.schema.$ref", "names no definition"),
    ({"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "object", "required": ["a"]}}}},
     "response_format.json_schema.schema.required[0]", "'a' is required but not in 'properties'"),
    ({"response_format": {"type": "json_schema"}}, "response_format.json_schema", "is required"),
    ({"response_format": {"type": "xml"}}, "response_format.type", "'xml' is not supported"),
    ({"response_format": {"type": "json_object"}, "grammar": "root ::= \"a\""}, "response_format",
     "cannot be combined with 'grammar'"),
    ({"guided_regex": "[a-z]+"}, "guided_regex", "is not supported by this server"),
    ({"guided_choice": []}, "guided_choice", "a non-empty array of strings"),
    ({"guided_choice": ["a", 5]}, "guided_choice[1]", "a non-empty string"),
    ({"guided_choice": ["a"], "guided_json": {"type": "object"}}, "guided_choice",
     "cannot be combined with 'guided_json'"),
]


@pytest.mark.parametrize("extra,param,message", BAD)
def test_bad_schema_or_grammar_is_400(server, extra, param, message):
    body = {"model": MODEL_ID, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    body.update(extra)
    r = server.post("/v1/chat/completions", body)
    assert r.status == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param, err
    assert message in err["message"], err


# The real clients' structured-output helpers: the openai client's `chat.completions.parse` (and
# its `stream` helper) and `pydantic_function_tool`, LangChain's `with_structured_output` by each
# method. Each turns a Pydantic model into a JSON Schema of its own (titles, $defs and $ref for
# nested models and enums, anyOf for Optional, additionalProperties false and every property
# required when strict), sends it with its own extra fields (`strict`, `parallel_tool_calls`,
# `stream_options`), and parses the reply back into the model, which validates it. The bodies the
# clients sent are recorded (an httpx event hook), so each test also says what it exercised.
pydantic = pytest.importorskip("pydantic")

from enum import Enum  # noqa: E402
from typing import Annotated, Literal, Optional  # noqa: E402

from pydantic import BaseModel, Field  # noqa: E402


class City(str, Enum):
    paris = "Paris"
    london = "London"
    rome = "Rome"


class Address(BaseModel):
    street: str = Field(max_length=16, description="street and number")
    zip: Optional[int]


class Person(BaseModel):
    """A person, as the schema's description."""
    name: str = Field(max_length=12)
    age: int
    city: City
    member: bool
    tags: list[Annotated[str, Field(max_length=8)]] = Field(max_length=3)
    address: Address


class GetWeather(BaseModel):
    """Current weather in a city."""
    city: City
    unit: Literal["c", "f"]


def recording_http_client():
    """An httpx client (the one the openai client is built on) that keeps each JSON body sent."""
    import openai
    sent = []
    hook = lambda req: sent.append(json.loads(req.content)) if req.content else None  # noqa: E731
    return openai.DefaultHttpxClient(event_hooks={"request": [hook]}, timeout=120), sent


@pytest.fixture
def recorded(server):
    """(an openai client on the server whose request bodies are recorded, the bodies)."""
    http, sent = recording_http_client()
    yield server.client(http_client=http), sent
    http.close()


def assert_person(p):
    assert isinstance(p, Person), p
    # Dumped and validated again: the object is one the schema allows, not a partial one.
    assert Person.model_validate_json(p.model_dump_json()) == p


@pytest.mark.parametrize("temperature,seed", [(0.0, 1), (1.0, 2)])
def test_openai_parse_pydantic_model(recorded, temperature, seed):
    client, sent = recorded
    r = client.chat.completions.parse(
        model=MODEL_ID, temperature=temperature, seed=seed, max_tokens=300,
        messages=[{"role": "user", "content": PROMPT}], response_format=Person)
    fmt = sent[-1]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True, fmt
    assert "$defs" in fmt["json_schema"]["schema"], fmt  # City and Address by $ref
    c = r.choices[0]
    assert c.finish_reason == "stop", c.message.content
    assert_person(c.message.parsed)
    assert c.message.parsed == Person.model_validate_json(c.message.content)


def test_openai_stream_helper_pydantic_model(recorded):
    # The stream helper sends stream=True (and stream_options here) with the model's schema and
    # parses the accumulated content at the end.
    client, sent = recorded
    with client.chat.completions.stream(
            model=MODEL_ID, temperature=0.7, seed=3, max_tokens=300,
            stream_options={"include_usage": True},
            messages=[{"role": "user", "content": PROMPT}], response_format=Person) as stream:
        n_deltas = sum(1 for e in stream if e.type == "content.delta")
        final = stream.get_final_completion()
    assert sent[-1]["stream"] is True and sent[-1]["stream_options"] == {"include_usage": True}
    assert n_deltas > 1
    assert final.usage and final.usage.completion_tokens > 0
    assert_person(final.choices[0].message.parsed)


def test_openai_parse_pydantic_function_tool(recorded):
    # pydantic_function_tool writes a strict tool (`"strict": true`, additionalProperties false);
    # parse reads the call's arguments back into the model. SmolLM2's template has no tools
    # branch, so the call is in the fallback format, Llama 3.x's bare JSON (tool_format.h): no
    # Llama 3 GGUF is here, and this is that format's end-to-end check on a real model.
    import openai
    client, sent = recorded
    r = client.chat.completions.parse(
        model=MODEL_ID, temperature=0, max_tokens=120, parallel_tool_calls=False, logprobs=True,
        messages=[{"role": "user", "content": "What is the weather in Rome?"}],
        tools=[openai.pydantic_function_tool(GetWeather)],
        tool_choice={"type": "function", "function": {"name": "GetWeather"}})
    assert sent[-1]["tools"][0]["function"]["strict"] is True
    assert sent[-1]["parallel_tool_calls"] is False
    c = r.choices[0]
    assert c.finish_reason == "tool_calls", c
    assert len(c.message.tool_calls) == 1
    call = c.message.tool_calls[0].function
    assert call.name == "GetWeather"
    assert isinstance(call.parsed_arguments, GetWeather), call
    raw = b"".join(bytes(e.bytes) for e in c.logprobs.content).decode()
    assert json.loads(raw) == {"name": "GetWeather", "parameters": json.loads(call.arguments)}, raw


def langchain_model(server, **kw):
    lc = pytest.importorskip("langchain_openai")
    http, sent = recording_http_client()
    llm = lc.ChatOpenAI(model=MODEL_ID, base_url=server.url + "/v1", api_key="x", temperature=0,
                        max_tokens=300, max_retries=0, http_client=http, **kw)
    return llm, sent


# (method, strict): None is LangChain's default (ChatOpenAI's: json_schema, which hands a Pydantic
# class to the openai client's parse, always strict); function_calling sends `strict` only when
# given.
@pytest.mark.parametrize("method,strict", [(None, None), ("json_schema", None),
                                           ("function_calling", None), ("function_calling", True),
                                           ("json_mode", None)])
def test_langchain_with_structured_output(server, method, strict):
    llm, sent = langchain_model(server)
    kw = {k: v for k, v in (("method", method), ("strict", strict)) if v is not None}
    structured = llm.with_structured_output(Person, include_raw=True, **kw)
    prompt = PROMPT
    if method == "json_mode":  # json_object constrains the syntax only: the prompt names the keys
        prompt += (" Keys: name (string), age (integer), city (Paris, London or Rome), member"
                   " (boolean), tags (list of strings), address ({street, zip}).")
    out = structured.invoke([("user", prompt)])
    body, raw = sent[-1], out["raw"]
    if method == "json_mode":
        assert body["response_format"] == {"type": "json_object"}, body
        # JSON syntax only: a 135M model may not match the Pydantic model; the reply is JSON.
        assert isinstance(json.loads(raw.content), dict), raw.content
        if out["parsing_error"] is None:
            assert_person(out["parsed"])
        return
    assert out["parsing_error"] is None, (out["parsing_error"], raw)
    assert_person(out["parsed"])
    if method == "function_calling":
        assert body["tool_choice"]["function"]["name"] == "Person", body
        assert body["parallel_tool_calls"] is False, body
        assert body["tools"][0]["function"].get("strict") is strict, body
        assert raw.tool_calls and raw.tool_calls[0]["name"] == "Person", raw
        assert raw.response_metadata.get("finish_reason") == "tool_calls"
    else:
        assert body["response_format"]["type"] == "json_schema", body
        assert body["response_format"]["json_schema"]["strict"] is True, body
        assert not raw.tool_calls
        assert raw.response_metadata.get("finish_reason") == "stop"


def test_langchain_with_structured_output_json_schema_dict(server):
    # A JSON Schema dict (Pydantic's own, not made strict: titles, $defs, no additionalProperties)
    # goes as response_format with strict false; the answer comes back a dict.
    llm, sent = langchain_model(server)
    schema = Person.model_json_schema()
    out = llm.with_structured_output(schema, method="json_schema").invoke([("user", PROMPT)])
    assert sent[-1]["response_format"]["json_schema"]["strict"] is False, sent[-1]
    jsonschema.validate(out, schema)
    assert_person(Person.model_validate(out))


def test_langchain_with_structured_output_streams(server):
    llm, sent = langchain_model(server, stream_usage=True)
    structured = llm.with_structured_output(Person)
    chunks = list(structured.stream([("user", PROMPT)]))
    assert sent[-1]["stream"] is True and sent[-1]["stream_options"] == {"include_usage": True}
    assert chunks, chunks
    assert_person(chunks[-1])
    assert chunks[-1] == structured.invoke([("user", PROMPT)])
