"""llama.cpp habits on zinc's command line (issue 17, item 6): -ngl, --ctx-size, -f FILE and
stdin prompts, -sys/-np, -q/--log-verbosity, "did you mean" on typos, -hf and other llama.cpp
flags refused with a sentence naming what zinc does instead, and the one-line note when
`zinc -m FILE` without a prompt starts the server. docs/cli.md, "Coming from llama.cpp".
"""

import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

BUILD = Path(os.environ.get("ZINC_BUILD_DIR", "build")).resolve()
SOURCE = Path(os.environ.get("ZINC_SOURCE_DIR", Path(__file__).resolve().parents[2]))
ZINC = BUILD / "zinc"
SMOL = SOURCE / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"

PREFILL_RE = re.compile(r"^prefill: (\d+) tok in", re.M)


def zinc(*args, stdin=subprocess.DEVNULL, input=None, timeout=300):
    if not ZINC.exists():
        pytest.skip(f"{ZINC} not built")
    if input is not None:
        stdin = None
    return subprocess.run([str(ZINC), *map(str, args)], capture_output=True, timeout=timeout,
                          stdin=stdin, input=input)


def smol():
    if not SMOL.exists():
        pytest.skip(f"{SMOL} missing (scripts/fetch-models)")
    return SMOL


def bad(r, *needles):
    """Status 2, nothing on stdout, one 'zinc: error:' line holding every needle."""
    err = r.stderr.decode()
    assert r.returncode == 2, (r.returncode, err)
    assert r.stdout == b"", r.stdout[:200]
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("zinc: error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def ok(*args, **kw):
    r = zinc(*args, **kw)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode(), r.stderr.decode()


GREEDY = ("--temp", "0", "-n", "6", "-t", "1")


def test_ngl_is_accepted_and_mapped_to_the_tier():
    m = smol()
    base, _ = ok("-m", m, "-p", "The capital of France is", *GREEDY)
    for flag in ("-ngl", "--n-gpu-layers", "--gpu-layers"):
        out, err = ok("-m", m, "-p", "The capital of France is", *GREEDY, flag, "99")
        assert out == base  # "all layers": the tier choice is unchanged
        assert "note" not in err, err
    for v in ("-1", "all", "auto", "999"):
        out, err = ok("-m", m, "-p", "The capital of France is", *GREEDY, "-ngl", v)
        assert out == base and "note" not in err, (v, err)
    # -ngl 0 is --tier cpu (the tier line says it was asked for)
    _, err = ok("-m", m, "-p", "hi", *GREEDY, "-ngl", "0")
    assert "zinc: tier cpu: --tier=cpu" in err, err
    # a partial count: one line saying zinc offloads all layers or none, then the run
    out, err = ok("-m", m, "-p", "The capital of France is", *GREEDY, "-ngl", "20")
    assert out == base
    notes = [l for l in err.splitlines() if "-ngl 20" in l]
    assert len(notes) == 1 and "does not split" in notes[0] and "-ngl 0" in notes[0], err
    bad(zinc("-m", m, "-p", "hi", "-ngl", "0", "--tier", "cuda"), "-ngl 0", "--tier cuda")
    bad(zinc("-m", m, "-p", "hi", "-ngl", "lots"), "'lots'", "-ngl")
    bad(zinc("-m", m, "-p", "hi", "-ngl", "-2"), "'-2'")
    # chat, bench and serve take it too (checked before any model is loaded)
    bad(zinc("chat", "-m", m, "-ngl", "0", "--tier", "cuda"), "-ngl 0")
    bad(zinc("bench", "-m", m, "-ngl", "x"), "'x'")
    bad(zinc("serve", "-m", m, "-ngl", "0", "--tier", "cuda"), "-ngl 0")


def test_ctx_size_and_other_llama_spellings():
    m = smol()
    line = bad(zinc("-m", m, "-p", "one two three four five six seven", "--ctx-size", "4"))
    assert "context of 4 positions" in line
    line = bad(zinc("-m", m, "-p", "one two three four five six seven", "--ctx-size=4"))
    assert "context of 4 positions" in line
    # --no-display-prompt is --no-echo
    a, _ = ok("-m", m, "-p", "The capital of France is", *GREEDY, "--no-display-prompt")
    b, _ = ok("-m", m, "-p", "The capital of France is", *GREEDY, "--no-echo")
    assert a == b and not a.startswith("The capital")
    # -sys is the system prompt (with --chat)
    a, _ = ok("-m", m, "--chat", "-p", "Hi", *GREEDY, "-sys", "Answer in French.")
    b, _ = ok("-m", m, "--chat", "-p", "Hi", *GREEDY, "--system", "Answer in French.")
    assert a == b
    # -np is --parallel for the server (its range check proves the mapping)
    bad(zinc("serve", "-m", m, "-np", "0"), "--parallel")
    # -n5 (a value attached to a short flag) still works
    out, _ = ok("-m", m, "-p", "The capital of France is", "--temp", "0", "-n6", "-t", "1")
    base, _ = ok("-m", m, "-p", "The capital of France is", *GREEDY)
    assert out == base
    # a flag's value is never rewritten: "-fa" here is a stop string, not llama.cpp's -fa
    ok("-m", m, "-p", "hi", *GREEDY, "--stop", "-fa")


def test_hf_and_other_llama_only_flags_say_what_to_do():
    m = smol()
    for flag in ("-hf", "--hf-repo", "-hfr", "--hf-file", "-mu", "--model-url"):
        line = bad(zinc(flag, "bartowski/Some-Model-GGUF"), flag + ":", "Hugging Face", "-m ")
        assert "download" in line
        bad(zinc("serve", flag, "x/y"), "Hugging Face")
        bad(zinc("chat", flag, "x/y"), "Hugging Face")
    bad(zinc("-m", m, "-p", "hi", "-cnv"), "zinc chat")
    bad(zinc("-m", m, "-p", "hi", "-i"), "zinc chat")
    bad(zinc("-m", m, "-p", "hi", "-fa"), "-fa:", "drop")
    bad(zinc("-m", m, "-p", "hi", "-ctk", "q8_0"), "-ctk:", "f16")
    bad(zinc("-m", m, "-p", "hi", "-mg", "1"), "-d N")
    bad(zinc("chat", "-m", m, "-ts", "1,1"), "-ts", "zinc chat")  # run/serve/bench take it
    # a llama.cpp flag zinc maps, on a subcommand without the target: named plainly
    bad(zinc("inspect", "-ngl", "99", m), "-ngl", "zinc inspect")


@pytest.mark.parametrize("args,typo,want", [
    (["--tmep", "0.5"], "--tmep", "--temp"),
    (["--n-predcit", "5"], "--n-predcit", "--n-predict"),
    (["--seeed", "1"], "--seeed", "--seed"),
    (["--top_k", "5"], "--top_k", "--top-k"),
    (["--contxt", "64"], "--contxt", "--context"),
    (["--ngl", "99"], "--ngl", "-ngl"),
    (["-temp", "1"], "-temp", "--temp"),
])
def test_typos_get_did_you_mean(args, typo, want):
    line = bad(zinc("-m", "whatever.gguf", "-p", "hi", *args))
    assert line.startswith(f"zinc: error: {typo}: unknown flag") and f"did you mean {want}?" in line
    # nothing close: no suggestion
    line = bad(zinc("-m", "whatever.gguf", "-p", "hi", "--frobnicate"))
    assert "did you mean" not in line and "--frobnicate" in line
    # subcommands too
    assert "did you mean --system?" in bad(zinc("chat", "--sytem", "x"))
    assert "did you mean --n-prompt?" in bad(zinc("bench", "--n-promt", "8"))


def test_prompt_from_file_and_stdin(tmp_path):
    m = smol()
    text = "The capital of France is"
    base_out, base_err = ok("-m", m, "-p", text, *GREEDY)
    n_base = int(PREFILL_RE.search(base_err).group(1))
    f = tmp_path / "prompt.txt"
    f.write_text(text + "\n")  # one trailing newline is dropped, as llama.cpp's -f does
    for args, kw in ((["-f", f], {}), (["--file", f], {}), ([f"--file={f}"], {}),
                     (["-f", "-"], {"input": (text + "\n").encode()}),
                     ([], {"input": (text + "\n").encode()}),  # piped stdin, no prompt flag
                     ([], {"stdin": open(f, "rb")})):  # redirected from a file
        out, err = ok("-m", m, *args, *GREEDY, **kw)
        assert out == base_out, (args, out)
        assert int(PREFILL_RE.search(err).group(1)) == n_base, (args, err)
    # two trailing newlines: one stays (it is part of the prompt)
    f.write_text(text + "\n\n")
    _, err = ok("-m", m, "-f", f, *GREEDY)
    assert int(PREFILL_RE.search(err).group(1)) > n_base
    # a multi-line file is one prompt
    f.write_text("Line one.\nLine two.\nLine three.")
    out, _ = ok("-m", m, "-f", f, *GREEDY)
    assert out.startswith("Line one.\nLine two.\nLine three.")
    # bad input
    bad(zinc("-m", m, "-f", tmp_path / "missing.txt"), "missing.txt", "cannot open")
    bad(zinc("-m", m, "-f", tmp_path), "is a directory")
    bad(zinc("-m", m, "-f", f, "-p", "hi"), "--prompt", "--file")
    bad(zinc("-m", m, "-f"), "--file")
    e = tmp_path / "empty.txt"
    e.write_bytes(b"")
    bad(zinc("-m", m, "-f", e), "empty")
    bad(zinc("-m", m, "--check", "-f", f), "--check does not generate")


def test_quiet_and_log_verbosity():
    m = smol()
    out, err = ok("-m", m, "-p", "The capital of France is", *GREEDY)
    assert "zinc: tier" in err and "evidence:" in err and "prefill:" in err
    for flags in (["-q"], ["--quiet"], ["--log-verbosity", "2"], ["-lv", "1"]):
        q_out, q_err = ok("-m", m, "-p", "The capital of France is", *GREEDY, *flags)
        assert q_out == out and q_err == "", (flags, q_err)
    # warnings stay with -q, go with --log-verbosity 1; errors always print
    _, err = ok("-m", m, "-p", "hi", *GREEDY, "-q", "-c", "9000")
    assert "warning: -c 9000 exceeds" in err and err.count("\n") == 1, err
    _, err = ok("-m", m, "-p", "hi", *GREEDY, "-lv", "1", "-c", "9000")
    assert err == "", err
    bad(zinc("-m", m, "-p", "hi", "-q", "--temp", "-1"), "--temp")
    bad(zinc("-m", m, "-p", "hi", "--log-verbosity", "x"), "--log-verbosity")
    # chat: -q drops the banner, tier, stats and evidence lines
    r = zinc("chat", "-m", m, "--temp", "0", "-n", "4", "-q", input=b"Hi\n")
    assert r.returncode == 0 and r.stderr == b"", r.stderr.decode()
    assert r.stdout.decode().startswith("> ")


def serve_until_listening(*args):
    """Start `zinc -m SMOL --port 0 ... args`; return its stderr lines up to 'listening on'."""
    p = subprocess.Popen([str(ZINC), "-m", str(SMOL), "--port", "0", "-c", "256", "--parallel",
                          "1", *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    lines = []
    try:
        end = time.time() + 60
        while time.time() < end:
            line = p.stderr.readline().decode()
            if not line:
                break
            lines.append(line)
            if "listening on" in line:
                break
        # SIGTERM only once the server answers: a stop racing the accept loop's start is the
        # server's business (tests/py/test_server_*.py), not this test's.
        port = re.search(r"listening on http://[^:]+:(\d+)", "".join(lines))
        if port:
            for _ in range(100):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port.group(1)}/health", timeout=5)
                    break
                except OSError:
                    time.sleep(0.1)
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            import os as _o
            st = open(f"/proc/{p.pid}/status").read()
            ch = [open(f"/proc/{p.pid}/task/{t}/wchan").read() for t in _o.listdir(f"/proc/{p.pid}/task")]
            p.kill()
            raise AssertionError((lines, st, ch, p.stderr.read()))
        p.stderr.close()
    assert any("listening on" in l for l in lines), lines
    return lines


def test_model_without_prompt_says_it_serves():
    smol()
    if not ZINC.exists():
        pytest.skip("zinc not built")
    lines = serve_until_listening()
    assert lines[0].startswith("zinc: no --prompt: serving the model over HTTP"), lines
    assert "--prompt TEXT" in lines[0] and "zinc chat" in lines[0]
    assert any(l.startswith("zinc: tier") for l in lines)
    # -q: neither the note nor the tier line; the listening line stays
    lines = serve_until_listening("-q")
    assert len(lines) == 1 and "listening on" in lines[0], lines
    # a bad serve flag names the serve-by-default case in its one line
    m = SMOL
    line = bad(zinc("-m", m, "--tmep", "1"), "did you mean --temp?", "serves the model")
    assert "--prompt" in line
    bad(zinc("-m", m, "--port", "99999"), "--port", "serves the model")
    # errors after parsing stay one line (the note comes once the model is loaded)
    import socket
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        bad(zinc("-m", m, "--port", busy.getsockname()[1]), "cannot listen")
    bad(zinc("-m", "/nonexistent.gguf"), "/nonexistent.gguf")
