"""The smaller defects of issue 13, each checked so that it failed before its fix:
  * /tokenize honours "parse_special": false;
  * top_p 0 is accepted with OpenAI's meaning (only the most likely token), on chat and
    completions, and agrees with the CLI's --top-p 0 (both equal greedy decoding);
  * "model": "" is a 404 model_not_found, as docs/server.md says (a request names the served id);
  * /v1/completions: one context rule with and without max_tokens (the default 16 must fit too);
  * GGUF keys that are not valid UTF-8 are refused with the key and byte named, and `zinc
    inspect` never writes raw invalid bytes or control characters to the terminal;
  * the 37-byte file whose one key is empty gets "has an empty key";
  * a Gemma file without tokenizer.ggml.bos_token_id warns once, naming the default taken.
"""
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from server_harness import MODEL_ID, SMOL, Server

BUILD = Path(os.environ.get("ZINC_BUILD_DIR", "build")).resolve()
SOURCE = Path(os.environ.get("ZINC_SOURCE_DIR", Path(__file__).resolve().parents[2]))
ZINC = BUILD / "zinc"
GEMMA = SOURCE / "models" / "gemma-3-270m-q4_k_m.gguf"


def need(path):
    if not ZINC.exists():
        pytest.skip(f"{ZINC} not built")
    if not Path(path).exists():
        pytest.skip(f"{path} missing (scripts/fetch-models)")
    return path


def zinc(*args, timeout=300):
    return subprocess.run([str(ZINC), *map(str, args)], capture_output=True, timeout=timeout)


@pytest.fixture(scope="module")
def server():
    s = Server("-c", "64", "--parallel", "1")
    yield s
    assert s.stop() == 0, s.stderr()
    s.close()


# ---- /tokenize ---------------------------------------------------------------------------------

def test_tokenize_honours_parse_special(server):
    def tok(**kw):
        r = server.post("/tokenize", {"content": "a<|im_end|>", "add_special": False, **kw})
        assert r.status == 200, r.text
        return r.json()["tokens"]

    assert tok() == [81, 2]
    assert tok(parse_special=True) == [81, 2]
    plain = tok(parse_special=False)
    assert 2 not in plain and len(plain) > 2
    r = server.post("/detokenize", {"tokens": plain})
    assert r.json()["content"] == "a<|im_end|>"


# ---- top_p 0 -----------------------------------------------------------------------------------

def test_top_p_zero_is_the_most_likely_token(server):
    msgs = [{"role": "user", "content": "Name three fruits."}]
    greedy = server.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 12,
                                                  "temperature": 0})
    assert greedy.status == 200, greedy.text
    for seed in (1, 2, 3):
        r = server.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 12,
                                                 "temperature": 1.5, "top_p": 0, "seed": seed})
        assert r.status == 200, r.text
        assert r.json()["choices"][0]["message"] == greedy.json()["choices"][0]["message"]
    body = {"prompt": "The capital of France is", "max_tokens": 8}
    g = server.post("/v1/completions", dict(body, temperature=0)).json()["choices"][0]["text"]
    p = server.post("/v1/completions", dict(body, temperature=1.2, top_p=0.0, seed=9))
    assert p.status == 200, p.text
    assert p.json()["choices"][0]["text"] == g
    # the openai client sends it as a float
    c = server.client()
    out = c.completions.create(model=MODEL_ID, prompt=body["prompt"], max_tokens=8,
                               temperature=1.2, top_p=0.0, seed=4)
    assert out.choices[0].text == g
    # the CLI agrees
    cli_g = zinc("-m", need(SMOL), "--prompt", body["prompt"], "-n", "8", "--temp", "0",
                 "--no-echo", "-c", "64")
    cli_p = zinc("-m", SMOL, "--prompt", body["prompt"], "-n", "8", "--temp", "1.2",
                 "--top-p", "0", "--seed", "4", "--no-echo", "-c", "64")
    assert cli_g.returncode == 0 and cli_p.returncode == 0, cli_p.stderr.decode()
    assert cli_p.stdout == cli_g.stdout
    assert cli_g.stdout.decode().strip() == g.strip()


# ---- model "" ----------------------------------------------------------------------------------

def test_empty_model_is_not_the_served_model(server):
    for path, body in (("/v1/chat/completions",
                        {"messages": [{"role": "user", "content": "x"}], "max_tokens": 1}),
                       ("/v1/completions", {"prompt": "x", "max_tokens": 1})):
        r = server.post(path, dict(body, model=""))
        assert r.status == 404, r.text
        e = r.json()["error"]
        assert e["code"] == "model_not_found" and e["param"] == "model", e
        assert server.post(path, dict(body, model=MODEL_ID)).status == 200
        assert server.post(path, body).status == 200  # absent: the served model


# ---- the context rule for completions --------------------------------------------------------

def test_completions_one_context_rule_with_and_without_max_tokens(server):
    prompt = [28] * 55  # 55 tokens in a 64-position context: 9 left, fewer than the default 16
    r = server.post("/v1/completions", {"prompt": prompt})
    assert r.status == 400, r.text
    e = r.json()["error"]
    assert e["code"] == "context_length_exceeded" and e["param"] == "prompt", e
    assert "defaults to 16" in e["message"], e
    r = server.post("/v1/completions", {"prompt": prompt, "max_tokens": 16})
    assert r.status == 400 and r.json()["error"]["code"] == "context_length_exceeded"
    r = server.post("/v1/completions", {"prompt": prompt, "max_tokens": 9, "ignore_eos": True})
    assert r.status == 200, r.text
    assert r.json()["usage"]["completion_tokens"] == 9
    # room for the default: 16 tokens, as OpenAI
    r = server.post("/v1/completions", {"prompt": prompt[:48], "ignore_eos": True})
    assert r.status == 200, r.text
    assert r.json()["usage"]["completion_tokens"] == 16
    # chat without max_tokens still runs to the end of the context
    r = server.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}],
                                             "ignore_eos": True})
    assert r.status == 200, r.text
    u = r.json()["usage"]
    assert u["prompt_tokens"] + u["completion_tokens"] == 64


# ---- GGUF keys and zinc inspect ------------------------------------------------------------------

def gguf_bytes(kvs):
    """A GGUF v3 file with no tensors; kvs: list of (key bytes, type id, value bytes)."""
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs))
    for key, typ, val in kvs:
        out += struct.pack("<Q", len(key)) + key + struct.pack("<I", typ) + val
    return out


def gguf_string(b):
    return struct.pack("<Q", len(b)) + b


def assert_terminal_safe(raw):
    assert b"\x1b" not in raw and b"\xff" not in raw and b"\xc0" not in raw, raw
    raw.decode("utf-8")  # strict


def test_non_utf8_key_is_refused_with_the_key_named(tmp_path):
    need(SMOL)
    f = tmp_path / "badkey.gguf"
    f.write_bytes(gguf_bytes([(b"general.architecture", 8, gguf_string(b"llama")),
                              (b"\xff\xfe\xc0\xaf", 4, struct.pack("<I", 1))]))
    r = zinc("inspect", f)
    assert r.returncode != 0
    err = r.stderr.decode("utf-8")
    assert "metadata key #1 key '\\xff\\xfe\\xc0\\xaf' is not valid UTF-8" in err, err
    assert "byte 0 of the key is '\\xff'" in err, err
    assert_terminal_safe(r.stdout + r.stderr)
    r = zinc("-m", f, "--prompt", "hi", "-n", "1")
    assert r.returncode != 0 and b"not valid UTF-8" in r.stderr
    assert_terminal_safe(r.stdout + r.stderr)


def test_inspect_escapes_invalid_bytes_and_control_characters_in_values(tmp_path):
    need(SMOL)
    f = tmp_path / "values.gguf"
    f.write_bytes(gguf_bytes([(b"general.name", 8, gguf_string(b"a\xffb\x1b[2Jc\xc3\xa9\xe2\x82")),
                              (b"general.k\xc3\xa9y", 4, struct.pack("<I", 7))]))
    r = zinc("inspect", f)
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode("utf-8")
    assert '"a\\xffb\\u001b[2Jc\u00e9\\xe2\\x82"' in out, out
    assert "general.k\u00e9y" in out
    assert_terminal_safe(r.stdout)
    # a long string is cut at a character, never inside one
    f.write_bytes(gguf_bytes([(b"general.name", 8, gguf_string("é".encode() * 200))]))
    r = zinc("inspect", f)
    assert r.returncode == 0
    r.stdout.decode("utf-8")
    assert '"' + "é" * 96 + '"... (400 bytes)' in r.stdout.decode()


def test_errors_quoting_file_text_are_terminal_safe(tmp_path):
    # An error that quotes a value from the file (here the architecture name) escapes control
    # characters and invalid bytes (issue 13, item 3).
    need(SMOL)
    f = tmp_path / "arch.gguf"
    f.write_bytes(gguf_bytes([(b"general.architecture", 8, gguf_string(b"\x1b[31mevil\xff"))]))
    r = zinc("-m", f, "--prompt", "hi", "-n", "1")
    assert r.returncode != 0
    err = r.stderr.decode("utf-8")
    assert "unsupported architecture '\\u001b[31mevil\\xff'" in err, err
    assert_terminal_safe(r.stdout + r.stderr)


def test_the_37_byte_file_with_an_empty_key_names_it(tmp_path):
    need(SMOL)
    f = tmp_path / "empty-key.gguf"
    f.write_bytes(gguf_bytes([(b"", 0, b"\x07")]))
    assert f.stat().st_size == 37
    r = zinc("inspect", f)
    assert r.returncode != 0
    err = r.stderr.decode()
    assert "byte 24: metadata key #0 has an empty key" in err, err
    assert "truncated" not in err


# ---- Gemma without bos_token_id ------------------------------------------------------------------

def test_gemma_without_bos_id_warns_once_naming_the_default(tmp_path):
    need(GEMMA)
    f = tmp_path / "gemma-nobos.gguf"
    shutil.copyfile(GEMMA, f)
    data = f.read_bytes()[:64 << 20]  # the metadata (a 262k-token vocabulary) comes first
    key = b"tokenizer.ggml.bos_token_id"
    at = data.find(key)
    assert at > 0
    with open(f, "r+b") as fh:  # same length, so the layout is unchanged: the key is just gone
        fh.seek(at)
        fh.write(b"tokenizer.ggml.bos_token_iX")
    r = zinc("-m", f, "--prompt", "Hello", "-n", "1", "--temp", "0", "-c", "64")
    assert r.returncode == 0, r.stderr.decode()
    err = r.stderr.decode()
    assert err.count("tokenizer.ggml.bos_token_id is missing") == 1, err
    assert 'BOS defaults to id 1 "<eos>"' in err, err
    r = zinc("-m", GEMMA, "--prompt", "Hello", "-n", "1", "--temp", "0", "-c", "64")
    assert "is missing" not in r.stderr.decode()
