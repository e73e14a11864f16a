"""The `zinc` command: bad input and CLI behaviour.

Bad input (issue 2): each case must print exactly ONE line to stderr ("zinc: error: ..."), nothing
to stdout, and exit with status 2 (a signal, e.g. a core dump, shows as a negative status).
Broken model files are made by copying the real SmolLM2 file and patching bytes at offsets found
with gguf.GGUFReader (an independent parser), so each file is broken in exactly one way.

Behaviour: the timing line, greedy/seeded determinism, --version, --check, the default model,
`zinc inspect` against gguf.GGUFReader, and `zinc bench --json`.
"""

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

gguf = pytest.importorskip("gguf")

BUILD = Path(os.environ.get("ZINC_BUILD_DIR", "build")).resolve()
SOURCE = Path(os.environ.get("ZINC_SOURCE_DIR", Path(__file__).resolve().parents[2]))
ZINC = BUILD / "zinc"
SMOL = SOURCE / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA = SOURCE / "models" / "gemma-3-270m-q4_k_m.gguf"

STATS_RE = re.compile(r"^prefill: (\d+) tok in [0-9.]+ s \([0-9.]+ tok/s\) \| "
                      r"decode: (\d+) tok in [0-9.]+ s \([0-9.]+ tok/s\)$")


def zinc(*args, timeout=600, **kw):
    if not ZINC.exists():
        pytest.skip(f"{ZINC} not built")
    return subprocess.run([str(ZINC), *map(str, args)], capture_output=True, timeout=timeout,
                          **kw)


def need(path):
    if not path.exists():
        pytest.skip(f"{path} missing (scripts/fetch-models)")
    return path


def assert_bad_input(r, *needles):
    """Status 2, stdout empty, exactly one stderr line starting 'zinc: error:' with needles."""
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 2, f"status {r.returncode}, stderr: {err!r}"
    assert r.stdout == b"", r.stdout[:200]
    lines = err.splitlines()
    assert len(lines) == 1, f"expected one line, got: {err!r}"
    assert lines[0].startswith("zinc: error: "), lines[0]
    for n in needles:
        assert n.lower() in lines[0].lower(), f"{n!r} not in {lines[0]!r}"
    return lines[0]


# ---------- broken model files: copies of SmolLM2 patched in one place ----------

def tensor_info_offsets(path, name):
    """Byte offsets of (dims, type) in the tensor info of `name`, per gguf.GGUFReader."""
    r = gguf.GGUFReader(str(path))
    for t in r.tensors:
        if t.name == name:
            base = t.field.offset  # start of the tensor info: u64 name length, name, u32 n_dims
            dims = base + 8 + len(name.encode()) + 4
            return dims, dims + 8 * len(t.shape), list(map(int, t.shape)), int(t.tensor_type)
    raise KeyError(name)


def patched_copy(tmp_path, patches, name="broken.gguf"):
    dst = tmp_path / name
    shutil.copyfile(need(SMOL), dst)
    with open(dst, "r+b") as f:
        for off, data in patches:
            f.seek(off)
            f.write(data)
    return dst


def test_missing_file(tmp_path):
    missing = tmp_path / "nope.gguf"
    assert_bad_input(zinc("-m", missing, "--prompt", "hi"), str(missing))


def test_directory(tmp_path):
    assert_bad_input(zinc("-m", tmp_path, "--prompt", "hi"), str(tmp_path))


def test_fifo_is_refused_not_waited_on(tmp_path):
    # opening a FIFO blocks until a writer appears: the file is checked before it is opened
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    for sub in ([], ["inspect"]):
        args = [*sub, fifo] if sub else ["-m", fifo, "--prompt", "hi"]
        assert_bad_input(zinc(*args, timeout=20), str(fifo), "not a regular file")


def test_synth_to_a_missing_directory_is_bad_input(tmp_path):
    out = tmp_path / "no" / "such" / "dir" / "x.gguf"
    assert_bad_input(zinc("synth", "--preset", "llama-tiny", "--type", "q4_0", "-o", out,
                          timeout=60), str(out), "cannot create")


@pytest.mark.parametrize("keep", [3, 100, 5000, 50_000_000])
def test_truncated_file(tmp_path, keep):
    # 3 bytes: inside the magic; 100: inside the metadata; 5000: inside the metadata arrays;
    # 50 MB: inside the tensor data.
    dst = tmp_path / "trunc.gguf"
    with open(need(SMOL), "rb") as f:
        dst.write_bytes(f.read(keep))
    assert_bad_input(zinc("-m", dst, "--prompt", "hi"), str(dst))


def test_not_gguf(tmp_path):
    dst = tmp_path / "text.gguf"
    dst.write_bytes(b"this is not a model file at all\n" * 10)
    assert_bad_input(zinc("-m", dst, "--prompt", "hi"), str(dst))


def test_tensor_with_wrong_shape(tmp_path):
    # blk.0.attn_k.weight is (576, 192); swapping its dims keeps the byte size (so the file is
    # still a valid GGUF) but the shape is not what a llama layer with 3 KV heads needs.
    dims, _, shape, _ = tensor_info_offsets(SMOL, "blk.0.attn_k.weight")
    assert shape == [576, 192]
    dst = patched_copy(tmp_path, [(dims, struct.pack("<QQ", 192, 576))])
    assert_bad_input(zinc("-m", dst, "--prompt", "hi"), "blk.0.attn_k.weight")


def test_tensor_with_wrong_type(tmp_path):
    # output_norm.weight is F32 (576 * 4 bytes); marking it F16 keeps it inside its slot, but a
    # norm weight must be F32.
    _, typ, _, t = tensor_info_offsets(SMOL, "output_norm.weight")
    assert t == int(gguf.GGMLQuantizationType.F32)
    dst = patched_copy(tmp_path, [(typ, struct.pack("<I", int(gguf.GGMLQuantizationType.F16)))])
    assert_bad_input(zinc("-m", dst, "--prompt", "hi"), "output_norm.weight")


@pytest.mark.parametrize("type_id", [16, 99])  # 16: IQ2_XXS, a real ggml type we lack; 99: none
def test_unsupported_quant_type(tmp_path, type_id):
    _, typ, _, _ = tensor_info_offsets(SMOL, "blk.3.ffn_up.weight")
    dst = patched_copy(tmp_path, [(typ, struct.pack("<I", type_id))])
    line = assert_bad_input(zinc("-m", dst, "--prompt", "hi"), str(dst))
    assert "type" in line.lower(), line


def test_unsupported_architecture(tmp_path):
    r = gguf.GGUFReader(str(need(SMOL)))
    field = r.fields["general.architecture"]
    key = b"general.architecture"
    # key: u64 length + bytes; u32 value type; string: u64 length + bytes
    value_off = field.offset + 8 + len(key) + 4 + 8
    with open(SMOL, "rb") as f:
        f.seek(value_off)
        assert f.read(5) == b"llama"
    dst = patched_copy(tmp_path, [(value_off, b"zorba")])
    assert_bad_input(zinc("-m", dst, "--prompt", "hi"), "zorba")


# ---------- bad flags and numbers ----------

@pytest.mark.parametrize("args,needle", [
    (["--bogus-flag"], "--bogus-flag"),
    (["-n", "abc"], "abc"),
    (["-n", "-5"], "-5"),
    (["--temp", "-1"], "-1"),
    (["--temp", "nan"], "nan"),
    (["--temp", "0.5x"], "0.5x"),
    (["--top-p", "1.5"], "1.5"),
    (["--min-p", "-0.1"], "-0.1"),
    (["--top-k", "-3"], "-3"),
    (["-c", "lots"], "lots"),
    (["-t", "-2"], "-2"),
    (["--repeat-penalty", "0"], "0"),
    (["--presence-penalty", "5"], "5"),
    (["--seed", "-1"], "-1"),
    (["-n"], "-n"),
])
def test_bad_flags(args, needle):
    # Flags are checked before any file is opened, so the model path does not matter.
    assert_bad_input(zinc("-m", "whatever.gguf", "--prompt", "hi", *args), needle)


def test_bad_flags_subcommands(tmp_path):
    assert_bad_input(zinc("bench", "-p", "x"), "x")
    assert_bad_input(zinc("bench", "-r", "0"), "0")
    assert_bad_input(zinc("inspect"), "file")
    assert_bad_input(zinc("inspect", tmp_path / "nope.gguf"), "nope.gguf")


def test_no_prompt():
    # `zinc -m FILE` alone serves the model (tests/py/test_server_errors.py); without -m and
    # without a prompt (and with no piped stdin) there is nothing to do: the line says what to type.
    line = assert_bad_input(zinc("-n", "4", stdin=subprocess.DEVNULL), "prompt")
    assert "-f FILE" in line and "zinc chat" in line and "serves" in line
    # -m FILE with a flag only generation has (-n) is a generation, not a server
    assert_bad_input(zinc("-m", need(SMOL), "-n", "4", stdin=subprocess.DEVNULL), "no prompt")


def test_prompt_longer_than_context():
    prompt = "The quick brown fox jumps over the lazy dog. " * 20  # ~200 tokens
    assert_bad_input(zinc("-m", need(SMOL), "-c", "64", "--prompt", prompt), "context")


# ---------- behaviour ----------

def run_ok(*args, **kw):
    r = zinc(*args, **kw)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode("utf-8"), r.stderr.decode("utf-8")


def test_generation_streams_and_reports_speed():
    prompt = "The capital of France is"
    out, err = run_ok("-m", need(SMOL), "--prompt", prompt, "-n", "12", "--temp", "0", "-t", "2")
    assert out.startswith(prompt)
    assert len(out) > len(prompt) + 5
    last = err.strip().splitlines()[-1]
    m = STATS_RE.match(last)
    assert m, last
    # SmolLM2 adds no BOS: the prefill is exactly the prompt's tokens, per llama.cpp's tokenizer
    # when it is installed (else just positive).
    n_prefill, n_decode = int(m.group(1)), int(m.group(2))
    assert 0 < n_decode <= 11  # -n 12: at most 11 tokens are fed back (12 if none is EOG)
    try:
        import llama_cpp
        llm = llama_cpp.Llama(model_path=str(SMOL), vocab_only=True, verbose=False)
        want = llm.tokenize(prompt.encode(), add_bos=True, special=True)
        assert n_prefill == len(want)
    except ImportError:
        assert n_prefill > 0


def test_no_echo_prints_only_the_continuation():
    prompt = "Once upon a time"
    a, _ = run_ok("-m", need(SMOL), "--prompt", prompt, "-n", "8", "--temp", "0")
    b, _ = run_ok("-m", need(SMOL), "--prompt", prompt, "-n", "8", "--temp", "0", "--no-echo")
    assert a == prompt + b


def test_greedy_and_seeded_runs_repeat():
    base = ["-m", need(SMOL), "--prompt", "List three colours:", "-n", "24", "--no-echo"]
    g1, _ = run_ok(*base, "--temp", "0")
    g2, _ = run_ok(*base, "--temp", "0", "--seed", "5")  # the seed does not matter when greedy
    assert g1 == g2
    s1, _ = run_ok(*base, "--temp", "1.2", "--top-k", "0", "--top-p", "1", "--min-p", "0",
                   "--seed", "42")
    s2, _ = run_ok(*base, "--temp", "1.2", "--top-k", "0", "--top-p", "1", "--min-p", "0",
                   "--seed", "42")
    assert s1 == s2
    others = {run_ok(*base, "--temp", "1.2", "--top-k", "0", "--top-p", "1", "--min-p", "0",
                     "--seed", str(s))[0] for s in (1, 2, 3)}
    assert len(others | {s1}) > 1, "different seeds gave the same text every time"


def test_n_predict_stops_and_context_full_stops():
    # -n N: exactly N tokens are sampled, the last is not fed back, so the stats line counts N-1
    # decode passes (a counting prompt under greedy sampling does not end itself within 8).
    out, err = run_ok("-m", need(SMOL), "--prompt", "1, 2, 3, 4,", "-n", "8", "--temp", "0",
                      "--no-echo")
    m = STATS_RE.match(err.strip().splitlines()[-1])
    assert m, err
    assert int(m.group(2)) == 7, err
    assert "context" not in err, err
    # -n -1 with a small context: generation runs until the context is full (every position
    # holds a prompt token or a fed-back generated one: prompt + decode passes == -c), says so.
    out, err = run_ok("-m", need(SMOL), "--prompt", "1, 2, 3, 4,", "-n", "-1", "-c", "24",
                      "--temp", "0", "--no-echo")
    lines = err.strip().splitlines()
    m = STATS_RE.match(lines[-1])
    assert m, lines
    assert int(m.group(1)) + int(m.group(2)) == 24, lines
    assert "zinc: stopped: the context (24 positions) is full" in lines, lines


def test_version():
    out, _ = run_ok("--version")
    assert out.startswith("zinc ")
    assert "build:" in out and "cpu:" in out


def build_has_cuda():
    """Whether this build has the CUDA tier: `zinc --version`'s cuda: line (cuda::build_info)."""
    out, _ = run_ok("--version")
    line = [ln for ln in out.splitlines() if ln.startswith("cuda: ")]
    assert len(line) == 1, out
    return "built without the CUDA tier" not in line[0]


def test_tier_cuda_in_a_build_without_cuda():
    """-DZINC_CUDA=OFF: `--tier cuda` is one error line saying the build has no CUDA tier, and
    `--tier auto` runs on the CPU saying why. A CUDA build must never give that reason (it runs,
    or refuses for a device reason: test_evidence_cuda.py), so this checks both builds."""
    r = zinc("-m", need(SMOL), "--tier", "cuda", "-p", "hi", "-n", "4")
    if build_has_cuda():
        assert "built without the CUDA tier" not in r.stderr.decode(), r.stderr.decode()
        return
    assert_bad_input(r, "--tier=cuda: cannot use the CUDA tier: zinc was built without the CUDA "
                     "tier")
    out, err = run_ok("-m", SMOL, "--tier", "auto", "-p", "hi", "-n", "4")
    assert "zinc: tier cpu: --tier=auto: using the CPU tier because zinc was built without the " \
        "CUDA tier" in err, err
    assert len(out) > len("hi"), out


def test_check_ready():
    out, _ = run_ok("--check", "-m", need(SMOL))
    lines = out.splitlines()
    assert lines[-1].startswith("zinc --check: READY") or lines[-1].startswith("zinc --check: WARN")
    levels = [ln.split()[0] for ln in lines[:-1]]
    assert set(levels) <= {"READY", "WARN"}, out
    for item in ("host:", "cpu:", "model:", "weights:", "tokenizer:", "chat template:", "memory:"):
        assert any(item in ln for ln in out.splitlines()), (item, out)
    r = gguf.GGUFReader(str(SMOL))
    assert f"{len(r.tensors)} tensors" in out


def test_check_fails_on_broken_model(tmp_path):
    dims, _, _, _ = tensor_info_offsets(SMOL, "blk.0.attn_k.weight")
    dst = patched_copy(tmp_path, [(dims, struct.pack("<QQ", 192, 576))])
    r = zinc("--check", "-m", dst)
    out = r.stdout.decode()
    assert r.returncode == 1, out
    assert any(ln.startswith("FAIL") and "blk.0.attn_k.weight" in ln for ln in out.splitlines())
    r = zinc("--check", "-m", tmp_path / "missing.gguf")
    assert r.returncode == 1
    assert any(ln.startswith("FAIL") for ln in r.stdout.decode().splitlines())


def test_check_memory_fail_when_context_too_big():
    # A 16M-position KV cache for SmolLM2 (30 layers x 2 x 192 x 2 bytes a position) is ~370 GB.
    r = zinc("--check", "-m", need(SMOL), "-c", str(1 << 24))
    out = r.stdout.decode()
    assert r.returncode == 1, out
    assert any(ln.startswith("FAIL") and "memory" in ln for ln in out.splitlines()), out


def test_default_model_from_source_models(tmp_path):
    # No -m, run from an empty directory with an empty cache: the source tree's models/ (known
    # at build time) holds the default model, so nothing is fetched.
    need(SMOL)
    env = dict(os.environ, HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"))
    r = zinc("--prompt", "Hi", "-n", "2", "--temp", "0", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr.decode()
    assert "fetching" not in r.stderr.decode()
    assert STATS_RE.match(r.stderr.decode().strip().splitlines()[-1])


@pytest.mark.parametrize("model", [SMOL, GEMMA], ids=["smollm2", "gemma3"])
def test_inspect_matches_gguf_reader(model):
    out, _ = run_ok("inspect", need(model))
    r = gguf.GGUFReader(str(model))
    rows = {}
    in_table = False
    for ln in out.splitlines():
        if ln.startswith("tensors ("):
            in_table = True
            continue
        if in_table and ln.startswith("  ") and not ln.strip().startswith("name "):
            parts = ln.split()
            # name type d0 [x d1 ...] bytes offset
            shape = [int(x) for x in parts[2:-2] if x != "x"]
            rows[parts[0]] = (parts[1], shape, int(parts[-2]), int(parts[-1]))
    assert len(rows) == len(r.tensors)
    for t in r.tensors:
        typ, shape, nbytes, off = rows[t.name]
        assert typ.lower() == t.tensor_type.name.lower(), t.name
        assert shape == [int(x) for x in t.shape], t.name
        assert nbytes == int(t.n_bytes), t.name
        assert off == int(t.data_offset) - int(r.data_offset), t.name
    # Metadata: every key is listed, long arrays are summarised.
    for key in r.fields:
        if key.startswith("GGUF."):
            continue
        assert re.search(r"^  " + re.escape(key) + r" ", out, re.M), key
    assert "more]" in out
    vocab = len(r.fields["tokenizer.ggml.tokens"].data)
    assert f"string[{vocab}]" in out


def test_bench_json():
    out, _ = run_ok("bench", "-m", need(SMOL), "-p", "16", "-n", "4", "-r", "2", "-t", "2",
                    "--json")
    res = json.loads(out)
    assert [x["test"] for x in res] == ["pp16", "tg4"]
    for x in res:
        assert len(x["samples_ts"]) == 2
        assert x["avg_ts"] > 0
        assert x["n_threads"] == 2
        assert x["peak_rss_bytes"] > 0
        dm = x["device_memory"]  # the CUDA runner's bytes; null on the CPU tier
        if x["evidence"]["execution_tier"] == "cpu":
            assert dm is None
        else:
            assert dm["weight_bytes"] > 0 and dm["kv_bytes"] > 0
        n = x["n_prompt"] or x["n_gen"]
        # tokens/s samples are consistent with the nanosecond samples
        for ns, ts in zip(x["samples_ns"], x["samples_ts"]):
            assert abs(ts - n * 1e9 / ns) <= 1e-3 * ts


def test_bench_depth():
    # llama-bench's -d: the tests run with D tokens already in the KV cache; n_ctx covers them.
    out, _ = run_ok("bench", "-m", need(SMOL), "-p", "8", "-n", "2", "-r", "1", "-t", "2",
                    "--n-depth", "0,40", "--json")
    res = json.loads(out)
    assert [x["test"] for x in res] == ["pp8", "tg2", "pp8 @ d40", "tg2 @ d40"]
    assert [x["n_depth"] for x in res] == [0, 0, 40, 40]
    assert all(x["n_ctx"] == 40 + 8 + 2 for x in res)
    assert_bad_input(zinc("bench", "--n-depth", "-5"), "-5")


def test_bench_table():
    out, _ = run_ok("bench", "-m", need(SMOL), "-p", "8", "-n", "2", "-r", "2")
    rows = [ln for ln in out.splitlines() if re.search(r"\| +(pp8|tg2) +\|", ln)]
    assert len(rows) == 2, out
    for ln in rows:
        assert re.search(r"\d+\.\d\d ± \d+\.\d\d \|$", ln), ln
    assert "peak RSS" in out


def test_n_zero_generates_nothing():
    out, err = run_ok("-m", need(SMOL), "--prompt", "Hello there", "-n", "0")
    assert out == "Hello there\n"
    m = STATS_RE.match(err.strip().splitlines()[-1])
    assert m and int(m.group(2)) == 0


def test_gemma_prefill_counts_bos_and_stream_is_valid_utf8():
    # Gemma adds BOS; CJK and emoji continuations exercise the incremental detokenizer, whose
    # output must always be valid UTF-8 (run_ok decodes stdout strictly).
    prompt = "用中文写一首关于猫的短诗 🐱:"
    for seed in (1, 2, 3):
        out, err = run_ok("-m", need(GEMMA), "--prompt", prompt, "-n", "24", "--temp", "1.0",
                          "--seed", str(seed), "-c", "256")
        assert out.startswith(prompt)
    m = STATS_RE.match(err.strip().splitlines()[-1])
    assert m, err
    try:
        import llama_cpp
    except ImportError:
        return
    llm = llama_cpp.Llama(model_path=str(GEMMA), vocab_only=True, verbose=False)
    want = llm.tokenize(prompt.encode(), add_bos=True, special=True)
    assert want[0] == llm.token_bos()
    assert int(m.group(1)) == len(want)


def test_context_too_big_for_memory():
    # 16M positions of SmolLM2's f16 KV cache is ~350 GiB: refused up front, not left to the
    # kernel's overcommit to fail later.
    assert_bad_input(zinc("-m", need(SMOL), "-c", "16000000", "--prompt", "hi"), "-c 16000000")


def test_chat_uses_the_model_template():
    # Oracle: the GGUF's template rendered by jinja2 with transformers' settings, tokenized by
    # llama.cpp; zinc's prefill must be exactly that many tokens.
    jinja2 = pytest.importorskip("jinja2")
    llama_cpp = pytest.importorskip("llama_cpp")
    prompt = "What is the capital of France?"
    out, err = run_ok("-m", need(SMOL), "--chat", "--prompt", prompt, "-n", "16", "--temp", "0")
    assert prompt not in out  # the reply alone
    m = STATS_RE.match(err.strip().splitlines()[-1])
    assert m, err
    r = gguf.GGUFReader(str(SMOL))
    f = r.fields["tokenizer.chat_template"]
    src = bytes(f.parts[f.data[0]]).decode()
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    text = env.from_string(src).render(messages=[{"role": "user", "content": prompt}],
                                       add_generation_prompt=True, bos_token="<|im_start|>",
                                       eos_token="<|im_end|>")
    llm = llama_cpp.Llama(model_path=str(SMOL), vocab_only=True, verbose=False)
    want = llm.tokenize(text.encode(), add_bos=False, special=True)
    assert int(m.group(1)) == len(want), text


def test_gguf_writer_file_missing_hyperparameters(tmp_path):
    # A valid GGUF (written by gguf.GGUFWriter) that is not a runnable model.
    p = tmp_path / "empty_llama.gguf"
    w = gguf.GGUFWriter(str(p), "llama")
    w.add_block_count(1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert_bad_input(zinc("-m", p, "--prompt", "hi"), str(p))

    run_ok("inspect", p)  # inspect only reads the file, so it still works


# ---------- fresh-user defects: memory, out of memory, Ctrl-C, ignored options ----------

def kv_cache_bytes_from_metadata(path, n_ctx):
    """f16 K and V for every layer and position, from the GGUF's own hyperparameters."""
    r = gguf.GGUFReader(str(path))

    def val(key):
        f = r.fields[key]
        return int(f.parts[f.data[0]][0])

    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    n_layer = val(f"{arch}.block_count")
    n_kv = val(f"{arch}.attention.head_count_kv")
    k_len = val(f"{arch}.attention.key_length")
    v_len = val(f"{arch}.attention.value_length")
    return n_layer * n_ctx * n_kv * (k_len + v_len) * 2


def test_gemma_peak_rss_within_budget():
    # Issue 2's budget: model file + KV cache + 64 MiB. The KV size comes from the file's own
    # hyperparameters; the peak is measured by the kernel for this one child (wait4 rusage).
    need(GEMMA)
    if not ZINC.exists():
        pytest.skip(f"{ZINC} not built")
    n_ctx = 512
    budget = GEMMA.stat().st_size + kv_cache_bytes_from_metadata(GEMMA, n_ctx) + (64 << 20)
    for args in (["-m", GEMMA, "-c", n_ctx, "-n", 16, "--prompt", "hi", "--temp", "0"],
                 ["bench", "-m", GEMMA, "-p", n_ctx - 16, "-n", 16, "-r", 1, "--json"]):
        # Linux carries a parent's RSS at fork into the child's ru_maxrss, so a small helper
        # interpreter forks zinc and reports that grandchild's wait4 peak.
        helper = ("import os, sys\n"
                  "pid = os.fork()\n"
                  "if pid == 0:\n"
                  "    fd = os.open(os.devnull, os.O_WRONLY); os.dup2(fd, 1); os.dup2(fd, 2)\n"
                  "    os.execv(sys.argv[1], sys.argv[1:])\n"
                  "_, st, ru = os.wait4(pid, 0)\n"
                  "print(os.waitstatus_to_exitcode(st), ru.ru_maxrss)\n")
        r = subprocess.run([sys.executable, "-c", helper, str(ZINC), *map(str, args)],
                           capture_output=True, text=True, timeout=600)
        status, maxrss_kib = map(int, r.stdout.split())
        assert status == 0, args
        peak = maxrss_kib * 1024
        assert peak <= budget, f"{args[0]}: peak RSS {peak / 2**20:.1f} MiB > budget " \
                               f"{budget / 2**20:.1f} MiB"
    # bench reports the same budget in its JSON and must agree it is met.
    out, _ = run_ok("bench", "-m", GEMMA, "-p", n_ctx - 16, "-n", 16, "-r", 1, "--json")
    for x in json.loads(out):
        assert x["kv_cache_bytes"] == kv_cache_bytes_from_metadata(GEMMA, n_ctx)
        assert x["peak_rss_bytes"] <= budget


def under_ulimit(kib, *args):
    cmd = " ".join(["ulimit -v %d;" % kib, "exec", str(ZINC), *map(str, args)])
    if not ZINC.exists():
        pytest.skip(f"{ZINC} not built")
    return subprocess.run(["bash", "-c", cmd], capture_output=True, timeout=600)


def test_out_of_address_space_is_one_line_not_an_abort():
    # 200k positions of SmolLM2's KV cache (~4.3 GiB) fit this machine's RAM but not a 2.9 GiB
    # address-space limit: refused up front with the sizes, not std::bad_alloc (status 134).
    assert_bad_input(under_ulimit(3000000, "-m", need(SMOL), "-p", "hi", "-c", "200000",
                                  "-n", "2"), "-c 200000", "ulimit -v")
    assert_bad_input(under_ulimit(3000000, "-m", need(SMOL), "-p", "hi", "-c", "1000000",
                                  "-n", "2"), "-c 1000000")
    # bench checks its p+n context the same way.
    assert_bad_input(under_ulimit(3000000, "bench", "-m", need(SMOL), "-p", "100000", "-n",
                                  "100000"), "200000 positions", "-p/-n")


def test_sigint_stops_generation_cleanly():
    need(SMOL)
    if not ZINC.exists():
        pytest.skip(f"{ZINC} not built")
    import signal
    p = subprocess.Popen([str(ZINC), "-m", str(SMOL), "--prompt", "1, 2, 3, 4,", "-n", "-1",
                          "-c", "4096", "--temp", "0", "--no-echo"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = p.stdout.read(8)  # generation is under way once text streams
    assert first, p.stderr.read()
    p.send_signal(signal.SIGINT)
    rest, err = p.communicate(timeout=120)
    err = err.decode()
    assert p.returncode == 130, (p.returncode, err)
    out = first + rest
    assert out.endswith(b"\n")
    out.decode("utf-8")  # the detokenizer was flushed whole
    lines = err.strip().splitlines()
    m = STATS_RE.match(lines[-1])
    assert m, lines
    assert 0 < int(m.group(2)) < 4000, lines  # stopped long before the context filled
    assert any(l.startswith("zinc: interrupted after ") for l in lines), lines


def test_threads_above_hardware_warn():
    n = min(1024, (os.cpu_count() or 1) * 2)
    out, err = run_ok("-m", need(SMOL), "--prompt", "hi", "-n", "2", "-t", n)
    assert re.search(rf"^zinc: warning: -t {n} exceeds the \d+ hardware threads", err, re.M), err


def test_context_above_trained_warns():
    n_train = int(gguf.GGUFReader(str(need(SMOL))).fields["llama.context_length"].parts[-1][0])
    c = n_train + 16
    out, err = run_ok("-m", SMOL, "--prompt", "hi", "-n", "2", "-c", c)
    assert f"zinc: warning: -c {c} exceeds the model's trained context of {n_train}" in err, err


def test_silently_ignored_options_are_errors():
    assert_bad_input(zinc("-m", need(SMOL), "--prompt", "hi", "--system", "be brief"),
                     "--system", "--chat")
    assert_bad_input(zinc("bench", "-m", SMOL, "-p", "0", "-n", "0"), "-p 0", "-n 0")
    assert_bad_input(zinc("-m", SMOL, "--check", "--prompt", "hi"), "--check does not generate")
    assert_bad_input(zinc("-m", SMOL, "--check", "-n", "5"), "--check does not generate")


def test_prompt_too_long_message_is_grammatical():
    for prompt, c in (("hi", 1), ("1, 2, 3", 2)):
        line = assert_bad_input(zinc("-m", need(SMOL), "--prompt", prompt, "-c", c))
        m = re.search(r"the prompt is (\d+) (tokens?), .* context of (\d+) (positions?) ", line)
        assert m, line
        assert m.group(2) == ("token" if m.group(1) == "1" else "tokens"), line
        assert m.group(4) == ("position" if m.group(3) == "1" else "positions"), line
    assert "the prompt is 1 token," in zinc("-m", SMOL, "--prompt", "hi", "-c", "1").stderr.decode()


def test_fetch_models_progress_without_a_terminal(monkeypatch):
    # In a CI log (stderr not a terminal) progress is one newline-terminated line per 25%, no \r.
    import importlib.machinery
    import importlib.util
    import io
    loader = importlib.machinery.SourceFileLoader("fetch_models",
                                                  str(SOURCE / "scripts" / "fetch-models"))
    spec = importlib.util.spec_from_loader("fetch_models", loader)
    fm = importlib.util.module_from_spec(spec)
    loader.exec_module(fm)
    for tty in (False, True):
        buf = io.StringIO()
        buf.isatty = lambda: tty
        monkeypatch.setattr(sys, "stderr", buf)
        total = 1000 << 20
        for i in range(1, 1001):
            fm.progress("unpack", i << 20, total)
        fm.end_progress("unpack")
        monkeypatch.undo()
        text = buf.getvalue()
        if tty:
            assert text.count("\r") == 1000 and text.endswith("\n"), text[:200]
        else:
            assert "\r" not in text, text[:200]
            lines = text.splitlines()
            assert [l.split()[1] for l in lines] == ["25.0%", "50.0%", "75.0%", "100.0%"], lines


def test_make_bench_has_a_rule():
    # `bench` is a .PHONY target: it must build llama.cpp and run the benchmark suite (bench/run)
    # with this build's zinc (a dry run lists the commands without running them).
    r = subprocess.run(["make", "-n", "-C", str(SOURCE), "bench", "BUILD=build-x"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "scripts/build-llama-cpp" in r.stdout, r.stdout
    assert "bench/run --target cpu --zinc build-x/zinc" in r.stdout, r.stdout


# ---------- issue 3: stop strings, --raw, --system-prompt, --no-think ----------

def greedy(*extra, prompt="The capital of France is", n=40):
    return run_ok("-m", need(SMOL), "--prompt", prompt, "-n", str(n), "--temp", "0",
                  "--no-echo", *extra)


def test_stop_string_across_tokens_is_cut_exactly():
    # Oracle: the unstopped greedy text cut at str.find(stop). The stop string must span several
    # tokens (checked with llama.cpp's tokenizer), so it is matched across token boundaries.
    llama_cpp = pytest.importorskip("llama_cpp")
    full, _ = greedy()
    words = full.split()
    assert len(words) >= 6, full
    # a stop string starting and ending mid-word, well inside the text
    mid = full.index(words[3])
    stop = full[mid + 1:mid + 1 + 12]
    assert full.find(stop) == mid + 1 and len(stop.strip()) >= 8, (full, stop)
    llm = llama_cpp.Llama(model_path=str(SMOL), vocab_only=True, verbose=False)
    ids = llm.tokenize(full.encode(), add_bos=False, special=False)
    assert len(llm.tokenize(stop.encode(), add_bos=False, special=False)) >= 3
    assert len(ids) > 10
    cut, err = greedy("--stop", stop)
    assert cut == full[:full.find(stop)] + "\n", (cut, full, stop)
    # several stop strings: the one that completes first wins; one never seen changes nothing
    later = full[mid + 1 + 20:mid + 1 + 26]
    assert full.find(later) > full.find(stop) + len(stop) - len(later)
    cut2, _ = greedy("--stop", later, "--stop", stop, "--stop", "zzqqxx")
    assert cut2 == cut
    same, _ = greedy("--stop", "zzqqxx")
    assert same == full
    # the stop ends the run: fewer decode passes than the full run
    m_full = STATS_RE.match(greedy()[1].strip().splitlines()[-1])
    m_cut = STATS_RE.match(err.strip().splitlines()[-1])
    assert int(m_cut.group(2)) < int(m_full.group(2))


def test_stop_string_in_chat_mode():
    base = ["--chat", "--prompt", "What is the capital of France?"]
    out, _ = run_ok("-m", need(SMOL), *base, "-n", "40", "--temp", "0")
    reply = out.rstrip("\n")
    assert len(reply) > 12, out
    stop = reply[5:9]
    cut, _ = run_ok("-m", need(SMOL), *base, "-n", "40", "--temp", "0", "--stop", stop)
    assert cut == reply[:reply.find(stop)] + "\n"


def test_raw_prompt_is_not_parsed_for_special_tokens():
    llama_cpp = pytest.importorskip("llama_cpp")
    prompt = "<|im_start|>user\nhello<|im_end|>"
    llm = llama_cpp.Llama(model_path=str(SMOL), vocab_only=True, verbose=False)
    for extra, special in (([], True), (["--raw"], False)):
        _, err = run_ok("-m", need(SMOL), "--prompt", prompt, "-n", "1", "--temp", "0", *extra)
        m = STATS_RE.match(err.strip().splitlines()[-1])
        want = llm.tokenize(prompt.encode(), add_bos=True, special=special)
        assert int(m.group(1)) == len(want), (extra, err)


def test_system_prompt_alias_and_flag_conflicts():
    a = run_ok("-m", need(SMOL), "--chat", "--system", "Be brief.", "--prompt", "Hi", "-n", "8",
               "--temp", "0")
    b = run_ok("-m", need(SMOL), "--chat", "--system-prompt", "Be brief.", "--prompt", "Hi",
               "-n", "8", "--temp", "0")
    assert a[0] == b[0]
    assert STATS_RE.match(a[1].strip().splitlines()[-1]).group(1) == \
        STATS_RE.match(b[1].strip().splitlines()[-1]).group(1)
    assert_bad_input(zinc("-m", need(SMOL), "--raw", "--chat", "--prompt", "hi"), "--raw")
    assert_bad_input(zinc("-m", need(SMOL), "--no-think", "--prompt", "hi"), "--no-think")
    assert_bad_input(zinc("-m", need(SMOL), "--system-prompt", "x", "--prompt", "hi"), "--chat")


THINK_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n"
    "{% endif %}{% endif %}")


def test_no_think_sets_enable_thinking_false(tmp_path):
    # A copy of SmolLM2 whose template reads enable_thinking (Qwen3-style), written by gguf's
    # own gguf_new_metadata; the prefill must match jinja2 + llama.cpp with and without it.
    jinja2 = pytest.importorskip("jinja2")
    llama_cpp = pytest.importorskip("llama_cpp")
    dst = tmp_path / "think.gguf"
    r = subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(need(SMOL)),
                        str(dst), "--chat-template", THINK_TEMPLATE, "--force"],
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    llm = llama_cpp.Llama(model_path=str(SMOL), vocab_only=True, verbose=False)
    msgs = [{"role": "user", "content": "Hi"}]
    counts = {}
    for extra, kw in (([], {}), (["--no-think"], {"enable_thinking": False})):
        _, err = run_ok("-m", dst, "--chat", "--prompt", "Hi", "-n", "1", "--temp", "0", *extra)
        text = env.from_string(THINK_TEMPLATE).render(messages=msgs, add_generation_prompt=True,
                                                       **kw)
        want = llm.tokenize(text.encode(), add_bos=False, special=True)
        got = int(STATS_RE.match(err.strip().splitlines()[-1]).group(1))
        assert got == len(want), (extra, text, err)
        counts[bool(extra)] = got
    assert counts[True] > counts[False]


def test_chatml_fallback_stops_at_its_end_of_turn_text():
    # Gemma 3's file has no template: the ChatML fallback's "<|im_end|>" is not a token of its
    # vocabulary, so it arrives as text and must stop the reply (not be printed) like an EOG.
    need(GEMMA)
    out, err = run_ok("-m", GEMMA, "--chat", "--prompt", "What is the capital of France?",
                      "-n", "60", "--temp", "0")
    assert "<|im_end|>" not in out and "<|im_start|>" not in out, out
    m = STATS_RE.match(err.strip().splitlines()[-1])
    assert int(m.group(2)) < 59, err  # stopped before -n
