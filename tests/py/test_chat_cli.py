"""`zinc chat`: the interactive multi-turn chat (issue 3).

Piped: the stats line after each reply says how many tokens were prefilled and how many were
reused from the KV cache. The oracle renders the same conversation with jinja2 (transformers'
settings) from the GGUF's own template and tokenizes it with llama.cpp: the reused count must be
the longest common prefix of the new rendering and what the context holds (the previous
rendering plus the reply), and the prefilled count the rest.

Terminal: `zinc chat` in a detached tmux session driven by send-keys / capture-pane: a turn,
Ctrl-C in the middle of a long reply (the prompt comes back, the process lives), /reset, Ctrl-D.
"""

import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

gguf = pytest.importorskip("gguf")

BUILD = Path(os.environ.get("ZINC_BUILD_DIR", "build")).resolve()
SOURCE = Path(os.environ.get("ZINC_SOURCE_DIR", Path(__file__).resolve().parents[2]))
ZINC = BUILD / "zinc"
SMOL = SOURCE / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"

STATS_RE = re.compile(r"^\[prefilled (\d+) tok, reused (\d+) tok, [0-9.]+ s \| generated (\d+) "
                      r"tok, [0-9.]+ tok/s \| context (\d+)/(\d+)\]$", re.M)


def need_zinc_and_model():
    if not ZINC.exists():
        pytest.skip(f"{ZINC} not built")
    if not SMOL.exists():
        pytest.skip(f"{SMOL} missing (scripts/fetch-models)")


def chat(lines, *args, timeout=120):
    need_zinc_and_model()
    return subprocess.run([str(ZINC), "chat", "-m", str(SMOL), "--temp", "0", *map(str, args)],
                          input="".join(l + "\n" for l in lines).encode(), capture_output=True,
                          timeout=timeout)


def replies(stdout):
    """The replies, from stdout "> reply\\n> reply\\n> " (a command prints nothing there)."""
    text = stdout.decode("utf-8")
    assert text.startswith("> "), text
    parts = text[2:].split("\n> ")
    return [p for p in parts if p.strip()]


class Oracle:
    def __init__(self):
        jinja2 = pytest.importorskip("jinja2")
        llama_cpp = pytest.importorskip("llama_cpp")
        r = gguf.GGUFReader(str(SMOL))
        f = r.fields["tokenizer.chat_template"]
        src = bytes(f.parts[f.data[0]]).decode()
        env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
        self.tmpl = env.from_string(src)
        self.llm = llama_cpp.Llama(model_path=str(SMOL), vocab_only=True, verbose=False)

    def render(self, msgs, gen=True):
        return self.tmpl.render(messages=msgs, add_generation_prompt=gen,
                                bos_token="<|im_start|>", eos_token="<|im_end|>")

    def tokens(self, text):
        # SmolLM2 adds no BOS (tokenizer.ggml.add_bos_token false).
        return self.llm.tokenize(text.encode(), add_bos=False, special=True)


def common_prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_piped_two_turns_reuse_the_kv_cache_and_reset():
    q1, q2, q3 = "What is 2+2?", "And what is 3+3?", "Name a colour."
    r = chat([q1, q2, "/reset", q3], "-n", "200")
    err = r.stderr.decode()
    assert r.returncode == 0, err
    stats = [tuple(map(int, m.groups())) for m in STATS_RE.finditer(err)]
    assert len(stats) == 3, err
    assert "(conversation cleared)" in err
    a1, a2, a3 = [x.rstrip("\n") for x in replies(r.stdout)]
    o = Oracle()
    t1 = o.tokens(o.render([{"role": "user", "content": q1}]))
    # turn 1: nothing to reuse, the whole rendering is prefilled
    assert stats[0][:2] == (len(t1), 0), (stats, err)
    # turn 2: the context holds turn 1's prompt and the reply's tokens (the end-of-turn token that
    # ended the reply is sampled but never fed back)
    held = o.tokens(o.render([{"role": "user", "content": q1}]) + a1)
    assert len(held) == stats[0][3], (held, stats)  # context occupancy after turn 1
    msgs2 = [{"role": "user", "content": q1}, {"role": "assistant", "content": a1},
             {"role": "user", "content": q2}]
    t2 = o.tokens(o.render(msgs2))
    reused = common_prefix(t2, held)
    assert reused >= len(t1) and reused > 0
    assert stats[1][:2] == (len(t2) - reused, reused), (stats, err)
    assert stats[1][0] < len(t2) // 2  # only the new turn, not the conversation
    # after /reset: nothing reused, the fresh conversation is prefilled whole
    t3 = o.tokens(o.render([{"role": "user", "content": q3}]))
    assert stats[2][:2] == (len(t3), 0), (stats, err)
    assert a1 and a2 and a3


def test_system_command_help_quit_and_eof():
    r = chat(["/help", "/system You answer in one word.", "Hi", "/quit", "never read"], "-n", "8")
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert "/reset" in err and "/system" in err  # help text
    stats = [tuple(map(int, m.groups())) for m in STATS_RE.finditer(err)]
    assert len(stats) == 1, err
    o = Oracle()
    want = o.tokens(o.render([{"role": "system", "content": "You answer in one word."},
                              {"role": "user", "content": "Hi"}]))
    assert stats[0][:2] == (len(want), 0)
    # EOF at the prompt: status 0
    r = chat([])
    assert r.returncode == 0 and r.stdout.decode().startswith("> ")


def test_context_full_is_explained_not_a_crash():
    # -c 48: the first turn (~37 tokens) fits and its reply fills the context; the second turn
    # does not fit at all. Both are explained on stderr; the chat goes on and exits 0 on EOF.
    r = chat(["Write a long story about a dragon.", "Continue.", "/reset", "Hi"], "-c", "48")
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert err.count("context full (48 positions") == 2, err
    stats = [tuple(map(int, m.groups())) for m in STATS_RE.finditer(err)]
    assert stats[0][3] == 48  # the reply ran until the context was full
    assert stats[-1][1] == 0  # after /reset, a turn works again


# ---------- a real terminal (tmux) ----------

class Tmux:
    def __init__(self):
        self.sock = f"zinc-test-{uuid.uuid4().hex[:8]}"
        self.name = "chat"

    def tmux(self, *args, check=True):
        env = {k: v for k, v in os.environ.items() if k != "TMUX"}
        return subprocess.run(["tmux", "-L", self.sock, *args], capture_output=True, text=True,
                              timeout=20, check=check, env=env)

    def screen(self):
        return self.tmux("capture-pane", "-p", "-J", "-t", self.name, "-S", "-3000").stdout

    def wait(self, pred, timeout, what):
        end = time.time() + timeout
        while time.time() < end:
            s = self.screen()
            if pred(s):
                return s
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; screen:\n{self.screen()}")

    def keys(self, *keys):
        self.tmux("send-keys", "-t", self.name, *keys)

    def kill(self):
        self.tmux("kill-server", check=False)


def at_prompt(s):
    lines = [l for l in s.rstrip("\n").split("\n")]
    while lines and not lines[-1].strip():
        lines.pop()
    return bool(lines) and lines[-1].rstrip() == ">"


def test_chat_in_a_real_terminal():
    need_zinc_and_model()
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    t = Tmux()
    cmd = (f"'{ZINC}' chat -m '{SMOL}' --temp 0 -n 3000 -c 4096; echo \"EXITED rc=$?\"; "
           f"sleep 60")
    try:
        t.tmux("new-session", "-d", "-s", t.name, "-x", "160", "-y", "50", "bash", "-c", cmd)
        t.wait(lambda s: "zinc chat:" in s and at_prompt(s), 30, "the first prompt")
        # turn 1
        t.keys("What is 2+2?", "Enter")
        s = t.wait(lambda s: s.count("[prefilled") == 1 and at_prompt(s), 30, "the first reply")
        assert "4" in s.split("What is 2+2?")[1]
        # turn 2: a long reply, interrupted with Ctrl-C while it streams
        t.keys("Write a very long story about a dragon and a knight.", "Enter")
        t.wait(lambda s: len(s.split("dragon and a knight.")[-1].strip()) > 20, 30,
               "the long reply to start")
        t.keys("C-c")
        s = t.wait(lambda s: "reply stopped (Ctrl-C)" in s and s.count("[prefilled") == 2
                   and at_prompt(s), 20, "the prompt after Ctrl-C")
        assert "EXITED" not in s
        m = list(STATS_RE.finditer(s))
        assert int(m[1].group(2)) > 0  # turn 2 reused turn 1's KV
        assert int(m[1].group(3)) < 3000  # stopped well before -n
        # Ctrl-C at the prompt: a hint, still alive
        t.keys("C-c")
        t.wait(lambda s: "line cleared" in s and at_prompt(s), 10, "the Ctrl-C hint")
        # /reset, then a turn that reuses nothing
        t.keys("/reset", "Enter")
        t.wait(lambda s: "(conversation cleared)" in s and at_prompt(s), 10, "/reset")
        t.keys("Hi", "Enter")
        s = t.wait(lambda s: s.count("[prefilled") == 3 and at_prompt(s), 30, "the third reply")
        assert int(list(STATS_RE.finditer(s))[2].group(2)) == 0
        # Ctrl-D leaves with status 0
        t.keys("C-d")
        t.wait(lambda s: "EXITED rc=0" in s, 10, "the exit")
    finally:
        t.kill()


def test_bad_input_and_invalid_utf8():
    need_zinc_and_model()
    for args, needle in ((["-m", "/nonexistent.gguf"], "/nonexistent.gguf"),
                         (["-n", "abc"], "--n-predict"), (["--temp", "-1"], "--temp")):
        r = subprocess.run([str(ZINC), "chat", *args], input=b"hi\n", capture_output=True,
                           timeout=60)
        err = r.stderr.decode()
        assert r.returncode == 2 and r.stdout == b"", (args, err)
        assert len(err.splitlines()) == 1 and needle in err, err
    # invalid UTF-8 in a user line: a reply, valid UTF-8 out, status 0
    need_zinc_and_model()
    r = subprocess.run([str(ZINC), "chat", "-m", str(SMOL), "--temp", "0", "-n", "8"],
                       input=b"\xff\xfe caf\xc3 ok?\n", capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    r.stdout.decode("utf-8")  # strict: raises on invalid UTF-8
    assert len(list(STATS_RE.finditer(r.stderr.decode()))) == 1


# ---------- multi-line input, line editing and history (issue 17) ----------

def test_piped_multi_line_turns():
    # A line ending in a backslash continues (llama.cpp); """ opens a block that a line ending in
    # """ closes (Ollama). Each assembled turn is one user message: its rendering's token count
    # is what the first turn prefills.
    o = Oracle()
    cases = [
        (["line one \\", "line two"], "line one \nline two"),
        (['"""', "block a", "", "block b", '"""'], "block a\n\nblock b"),
        (['"""first', "second", 'third"""'], "first\nsecond\nthird"),
        (['"""one line"""'], "one line"),
    ]
    for lines, want in cases:
        r = chat(lines, "-n", "4")
        err = r.stderr.decode()
        assert r.returncode == 0, err
        stats = [tuple(map(int, m.groups())) for m in STATS_RE.finditer(err)]
        assert len(stats) == 1, (lines, err)
        t = o.tokens(o.render([{"role": "user", "content": want}]))
        assert stats[0][:2] == (len(t), 0), (lines, want, stats)
        # the continuation prompt is shown for each further line
        assert r.stdout.decode().count("... ") == len(lines) - 1, r.stdout
    # an unfinished block at EOF is sent as it stands
    r = chat(['"""', "never closed"], "-n", "4")
    assert r.returncode == 0 and len(list(STATS_RE.finditer(r.stderr.decode()))) == 1
    # the help names the multi-line forms
    r = chat(["/help"])
    assert '"""' in r.stderr.decode() and "\\" in r.stderr.decode()


def test_line_editing_history_and_paste_in_a_terminal(tmp_path):
    need_zinc_and_model()
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    state = tmp_path / "state"
    hist = state / "zinc" / "history"

    def session(t):
        cmd = (f"XDG_STATE_HOME='{state}' '{ZINC}' chat -m '{SMOL}' --temp 0 -n 4 -c 2048; "
               f"echo \"EXITED rc=$?\"; sleep 60")
        t.tmux("new-session", "-d", "-s", t.name, "-x", "160", "-y", "50", "bash", "-c", cmd)
        t.wait(lambda s: "zinc chat:" in s and at_prompt(s), 30, "the first prompt")

    t = Tmux()
    try:
        session(t)
        # editing: type, move left twice, insert; the turn is the edited line (no escape codes)
        t.keys("abc", "Left", "Left", "X", "Enter")
        s = t.wait(lambda s: s.count("[prefilled") == 1 and at_prompt(s), 30, "reply 1")
        assert "> aXbc" in s and "^[" not in s
        t.keys("What is 2+2?", "Enter")
        t.wait(lambda s: s.count("[prefilled") == 2 and at_prompt(s), 30, "reply 2")
        # history: Up twice recalls the first turn; Ctrl-E moves to its end
        t.keys("Up", "Up", "C-e", "!", "Enter")
        s = t.wait(lambda s: s.count("[prefilled") == 3 and at_prompt(s), 30, "reply 3")
        assert "> aXbc!" in s and "^[[A" not in s
        # a bracketed paste of three lines is one turn (one stats line, one prompt)
        buf = tmp_path / "paste.txt"
        buf.write_text("first line\nsecond line\nthird line")
        t.tmux("load-buffer", str(buf))
        t.tmux("paste-buffer", "-p", "-t", t.name)
        time.sleep(0.3)
        assert t.screen().count("[prefilled") == 3  # nothing sent before Enter
        t.keys("Enter")
        s = t.wait(lambda s: s.count("[prefilled") == 4 and at_prompt(s), 30, "reply 4")
        assert "first line\nsecond line\nthird line" in s
        # Ctrl-C drops a half-typed line; Ctrl-D leaves
        t.keys("half typed", "C-c")
        t.wait(lambda s: "line cleared" in s and at_prompt(s), 10, "the Ctrl-C hint")
        t.keys("C-d")
        t.wait(lambda s: "EXITED rc=0" in s, 10, "the exit")
    finally:
        t.kill()
    # the history file holds the turns (the paste as one entry) and is private
    assert hist.exists()
    assert oct(hist.stat().st_mode & 0o777) == "0o600"
    text = hist.read_text()
    assert "aXbc" in text and "first\\040line\\012second" in text
    # a new session sees the old history: Up recalls the paste
    t = Tmux()
    try:
        session(t)
        t.keys("Up")
        t.wait(lambda s: "third line" in s, 10, "the recalled paste")
        t.keys("C-u", "C-d")
        t.wait(lambda s: "EXITED rc=0" in s, 10, "the exit")
    finally:
        t.kill()


def test_piped_chat_writes_no_history(tmp_path):
    need_zinc_and_model()
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path))
    r = subprocess.run([str(ZINC), "chat", "-m", str(SMOL), "--temp", "0", "-n", "2"],
                       input=b"hi\n", capture_output=True, timeout=120, env=env)
    assert r.returncode == 0
    assert not (tmp_path / "zinc").exists()


def test_history_file_flag_in_a_terminal(tmp_path):
    # --history-file FILE is used; one that cannot be written is one warning, and the chat goes
    # on; --history-file '' keeps none.
    need_zinc_and_model()
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    for hist, expect_warning in ((tmp_path / "h" / "hist", False), (blocker / "hist", True),
                                 ("", False)):
        t = Tmux()
        cmd = (f"XDG_STATE_HOME='{tmp_path}/xdg' '{ZINC}' chat -m '{SMOL}' --temp 0 -n 2 -c 512 "
               f"--history-file '{hist}'; echo \"EXITED rc=$?\"; sleep 60")
        try:
            t.tmux("new-session", "-d", "-s", t.name, "-x", "160", "-y", "50", "bash", "-c", cmd)
            t.wait(lambda s: "zinc chat:" in s and at_prompt(s), 30, "the first prompt")
            t.keys("Hi", "Enter")
            t.wait(lambda s: s.count("[prefilled") == 1 and at_prompt(s), 30, "reply 1")
            t.keys("Hello", "Enter")
            s = t.wait(lambda s: s.count("[prefilled") == 2 and at_prompt(s), 30, "reply 2")
            assert s.count("cannot save the input history") == (1 if expect_warning else 0), s
            t.keys("C-d")
            t.wait(lambda s: "EXITED rc=0" in s, 10, "the exit")
        finally:
            t.kill()
        if hist and not expect_warning:
            assert "Hello" in Path(hist).read_text()
    assert not (tmp_path / "xdg").exists()  # an explicit --history-file replaces the default


def test_prompt_flag_is_the_first_turn():
    # llama-cli's -p in conversation mode: the first user turn, answered before input is read;
    # the conversation then goes on from stdin (turn 2 reuses turn 1's KV).
    q1 = "What is 2+2?"
    r = chat(["And 3+3?"], "-n", "8", "-p", q1)
    err = r.stderr.decode()
    assert r.returncode == 0, err
    stats = [tuple(map(int, m.groups())) for m in STATS_RE.finditer(err)]
    assert len(stats) == 2, err
    o = Oracle()
    assert stats[0][:2] == (len(o.tokens(o.render([{"role": "user", "content": q1}]))), 0)
    assert stats[1][1] > 0
