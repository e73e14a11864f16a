"""Gemma 4's tool calling on `zinc serve`, through the openai client: a `zinc synth --preset
gemma4-tiny` model (Gemma 4's structure, seeded random weights, SmolLM2's tokenizer) carrying
Gemma 4's real chat templates (tests/data/jinja/gemma4.jinja: the official one, from llama.cpp's
models/templates/google-gemma-4-31B-it.jinja, which reads `tool` messages itself;
gemma4-interleaved.jinja: an older one, which takes results as `tool_responses`), written in by
gguf's own gguf_new_metadata.

Oracles: the template itself, rendered by jinja2 with transformers' settings. A conversation with
tools, calls and tool results has exactly the tokens of that rendering (for the older template
after llama.cpp's convert_tool_responses_gemma4 folding, mirrored here); a forced call's
generated text (its tokens' bytes) is the template's rendering of the call the server parsed
back (whitespace outside strings aside: the grammar allows it), so the arguments' JSON is
exactly what Gemma 4 wrote; the arguments validate against the tool's schema; streamed deltas
concatenate to the whole response. Random weights make no calls of their own, so auto-mode
replies are not tested here (tests/unit/server/test_gemma4_tools.cpp reads Gemma 4's shapes).
"""
import json
import re
import subprocess
import sys

import jinja2.sandbox
import pytest

from server_harness import MODEL_ID, SOURCE, Server
from test_synth import synth
from test_tools import TOOLS, check_calls, stream_reply

gguf = pytest.importorskip("gguf")

TEMPLATES = SOURCE / "tests" / "data" / "jinja"


def model_with_template(tmp_path_factory, name):
    base = synth(str(tmp_path_factory.mktemp("gemma4-synth")), "gemma4-tiny", "q8_0")
    dst = tmp_path_factory.mktemp(name) / f"{name}.gguf"
    src = (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", base, str(dst),
                        "--chat-template", src, "--force"], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    return dst, src


def bos_text(path):
    f = gguf.GGUFReader(str(path))
    field = f.fields["tokenizer.ggml.bos_token_id"]
    bos = int(field.parts[field.data[0]][0])
    tokens = f.fields["tokenizer.ggml.tokens"]
    return bytes(tokens.parts[tokens.data[bos]]).decode()


class Served:
    def __init__(self, path, template):
        self.path, self.template = path, template
        self.server = Server("--parallel", "1", "-c", 2048, model=path)
        self.client = self.server.client()
        self.bos = bos_text(path)

    def render(self, messages, tools):
        env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.filters["tojson"] = lambda x, ensure_ascii=False, indent=None, separators=None, \
            sort_keys=False: json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                                        separators=separators, sort_keys=sort_keys)
        return env.from_string(self.template).render(
            messages=messages, tools=tools, documents=None, add_generation_prompt=True,
            bos_token=self.bos, eos_token="")


@pytest.fixture(scope="module")
def official(tmp_path_factory):
    s = Served(*model_with_template(tmp_path_factory, "gemma4"))
    yield s
    s.server.close()


@pytest.fixture(scope="module")
def older(tmp_path_factory):
    s = Served(*model_with_template(tmp_path_factory, "gemma4-interleaved"))
    yield s
    s.server.close()


CALLS = [{"id": "call_1", "type": "function",
          "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris", "unit": "c"})}},
         {"id": "call_2", "type": "function",
          "function": {"name": "get_time", "arguments": json.dumps({"tz": "Europe/Paris"})}}]
HISTORY = [{"role": "system", "content": "You are terse."},
           {"role": "user", "content": "Weather and time in Paris?"},
           {"role": "assistant", "content": None, "tool_calls": CALLS},
           {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
           {"role": "tool", "tool_call_id": "call_2", "content": "12:00"},
           {"role": "assistant", "content": "21 °C and clear, 12:00."},
           {"role": "user", "content": "And in Oslo?"}]


def as_transformers(messages):
    """What transformers hands a template: the calls' arguments parsed, null content as ""."""
    out = json.loads(json.dumps(messages))
    for m in out:
        if m.get("content") is None:
            m["content"] = ""
        for c in m.get("tool_calls") or []:
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    return out


def fold(messages):
    """llama.cpp's convert_tool_responses_gemma4 (common/parsers/gemma4.cpp), for templates that
    take results inside the model's turn."""
    out, i = [], 0
    while i < len(messages):
        m = messages[i]
        if m["role"] != "assistant" or not m.get("tool_calls"):
            out.append(m)
            i += 1
            continue
        calls, responses, i = m["tool_calls"], [], i + 1
        while i < len(messages) and messages[i]["role"] == "tool":
            t = messages[i]
            name = calls[len(responses)]["function"]["name"] if len(responses) < len(calls) else ""
            try:
                response = json.loads(t["content"])
            except ValueError:
                response = t["content"]
            responses.append({"name": name or t.get("tool_call_id", ""), "response": response})
            i += 1
        turn = {"role": "assistant", "tool_calls": calls, "content": ""}
        if responses:
            turn["tool_responses"] = responses
        if i < len(messages) and messages[i]["role"] == "assistant" and \
                not messages[i].get("tool_calls") and messages[i].get("content"):
            turn["content"] = messages[i]["content"]
            i += 1
        out.append(turn)
    return out


def prompt_tokens_of(served, text):
    return len(served.server.post("/tokenize", {"content": text}).json()["tokens"])


def test_history_with_tool_results_renders_as_the_official_template(official):
    r = official.client.chat.completions.create(model=MODEL_ID, messages=HISTORY, tools=TOOLS,
                                                temperature=0, max_tokens=4)
    text = official.render(as_transformers(HISTORY), TOOLS)
    # The official template reads `tool` messages itself: results inside the model's turn.
    assert "<|tool>declaration:get_weather{" in text
    assert "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,unit:<|\"|>c<|\"|>}<tool_call|>" in text
    assert ("<|tool_response>response:get_weather{value:<|\"|>{\"temp\": 21, \"sky\": \"clear\"}"
            "<|\"|>}<tool_response|>") in text
    assert r.usage.prompt_tokens == prompt_tokens_of(official, text)


def test_history_is_folded_for_an_older_template(older):
    r = older.client.chat.completions.create(model=MODEL_ID, messages=HISTORY, tools=TOOLS,
                                             temperature=0, max_tokens=4)
    folded = fold(as_transformers(HISTORY))
    text = older.render(folded, TOOLS)
    assert "<|tool_response>response:get_time{value:<|\"|>12:00<|\"|>}<tool_response|>" in text
    assert r.usage.prompt_tokens == prompt_tokens_of(older, text)
    # Unfolded, this template would render the `tool` turns as turns of their own: another text.
    unfolded = older.render(as_transformers(HISTORY), TOOLS)
    assert "<|turn>tool" in unfolded
    assert r.usage.prompt_tokens != prompt_tokens_of(older, unfolded)


def rendered_call(served, name, arguments):
    """The template's own text for one call (the model turn's content)."""
    msgs = [{"role": "user", "content": "x"},
            {"role": "assistant", "content": "",
             "tool_calls": [{"id": "c", "type": "function",
                             "function": {"name": name, "arguments": arguments}}]}]
    text = served.render(msgs, None)
    m = re.search(r"<\|tool_call>call:.*<tool_call\|>", text, re.S)
    assert m, text
    return m.group(0)


def without_layout(text):
    """Whitespace outside <|"|> strings removed (the grammar's optional layout)."""
    parts = text.split('<|"|>')
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"[ \n]", "", parts[i])
    return '<|"|>'.join(parts)


@pytest.mark.parametrize("tool_choice", ["required",
                                         {"type": "function", "function": {"name": "get_time"}}])
@pytest.mark.parametrize("seed", [1, 2])
def test_forced_calls_are_gemma4_calls_read_back(official, tool_choice, seed):
    kw = dict(tools=TOOLS, tool_choice=tool_choice, temperature=0.8, seed=seed, max_tokens=200,
              messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    c = official.client.chat.completions.create(model=MODEL_ID, logprobs=True, **kw).choices[0]
    names = {"get_time"} if isinstance(tool_choice, dict) else {"get_weather", "get_time"}
    check_calls(c, names)
    assert not c.message.content, c.message.content
    # What was generated is Gemma 4's call syntax, block after block; each block is what the
    # template renders for the call the server parsed from it.
    raw = b"".join(bytes(e.bytes) for e in c.logprobs.content).decode()
    want = "".join(rendered_call(official, t.function.name, json.loads(t.function.arguments))
                   for t in c.message.tool_calls)
    assert without_layout(raw) == want, (raw, want)
    if isinstance(tool_choice, dict):
        assert len(c.message.tool_calls) == 1
    elif seed == 1:  # pinned: this seed's reply is two calls, back to back
        assert len(c.message.tool_calls) == 2 and "<tool_call|><|tool_call>call:" in raw, raw
    # Streamed: the same calls, the arguments in fragments.
    content, calls, finish = stream_reply(official.client, **kw)
    assert finish == c.finish_reason == "tool_calls"
    assert content == ""
    assert [(e["name"], "".join(e["fragments"])) for e in calls] == [
        (t.function.name, t.function.arguments) for t in c.message.tool_calls]


def test_langchain_bind_tools_stream_matches_invoke(official):
    lc = pytest.importorskip("langchain_openai")
    llm = lc.ChatOpenAI(model=MODEL_ID, base_url=official.server.url + "/v1", api_key="x",
                        temperature=0, max_tokens=200, max_retries=0).bind_tools(
                            TOOLS, tool_choice="required")
    msgs = [("user", "What is the weather in Paris and the time in Tokyo?")]
    whole = llm.invoke(msgs)
    acc = None
    for chunk in llm.stream(msgs):
        acc = chunk if acc is None else acc + chunk
    assert whole.tool_calls, whole
    assert [(c["name"], c["args"]) for c in acc.tool_calls] == \
        [(c["name"], c["args"]) for c in whole.tool_calls]
    assert acc.response_metadata.get("finish_reason") == "tool_calls"


def test_parallel_tool_calls_false_is_one_forced_call(official):
    kw = dict(tools=TOOLS, tool_choice="required", temperature=0.8, max_tokens=300,
              parallel_tool_calls=False,
              messages=[{"role": "user", "content": "Weather in Paris and time in Tokyo?"}])
    for seed in range(4):
        c = official.client.chat.completions.create(model=MODEL_ID, seed=seed, **kw).choices[0]
        check_calls(c, {"get_weather", "get_time"})
        assert len(c.message.tool_calls) == 1


def test_unwritable_schema_is_a_400(official):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a b": {"type": "string"}}}}}]
    r = official.server.post("/v1/chat/completions", {
        "model": MODEL_ID, "max_tokens": 5, "tools": tools, "tool_choice": "required",
        "messages": [{"role": "user", "content": "hi"}]})
    assert r.status == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "tools[0].function.parameters.properties.a b", err
    assert "Gemma 4" in err["message"], err
