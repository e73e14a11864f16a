"""Chat-template parity: zinc's Jinja interpreter against Python jinja2 with Hugging Face's settings.

The oracle is jinja2's ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[loopcontrols, generation]) with transformers' tojson override (json.dumps,
ensure_ascii=False) and its raise_exception / strftime_now globals -- the environment
transformers.utils.chat_template_utils builds for apply_chat_template. The variables passed are
the ones apply_chat_template passes (messages, tools=None, documents=None, add_generation_prompt,
bos_token, eos_token, plus enable_thinking when set).

Templates: SmolLM2's real template (read from its GGUF with the gguf package), Qwen2.5-Coder's
(read by llama.cpp; tests/py/test_qwen_real.py adds tool-call conversations), the ChatML fallback
(what zinc uses for a GGUF without a template, e.g. Gemma 3's file), and the templates in
tests/data/jinja/*.jinja: written for these tests, and Gemma 4's real ones (gemma4.jinja and
gemma4-interleaved.jinja, llama.cpp's models/templates/google-gemma-4-31B-it*.jinja as vendored by
llama-cpp-python 0.3.36). Every template is rendered over every conversation
in tests/data/jinja/conversations.json with several variable sets; outputs must be
byte-identical, and where jinja2 raises, zinc must fail too (with the same raise_exception text).

zinc renders through build/jinja_tool --batch (one process for the whole corpus).
"""

import datetime
import json
import os
import pathlib
import subprocess

import jinja2
import jinja2.ext
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

SRC = pathlib.Path(os.environ.get("ZINC_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
BUILD = pathlib.Path(os.environ.get("ZINC_BUILD_DIR", SRC / "build"))
TOOL = BUILD / "jinja_tool"
DATA = SRC / "tests" / "data" / "jinja"
MODELS = SRC / "models"
NOW = 1721995200  # 2024-07-26T12:00:00Z: strftime_now() is pinned on both sides

TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}


# ---- the oracle -----------------------------------------------------------------------------

class GenerationTag(jinja2.ext.Extension):
    """transformers' AssistantTracker tag: {% generation %}...{% endgeneration %} renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.fromtimestamp(NOW).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENV = make_env()


def oracle(source, context):
    try:
        return True, ENV.from_string(source).render(**context)
    except Exception as e:  # noqa: BLE001 - any jinja2 failure is an expected error
        return False, f"{type(e).__name__}: {e}"


def zinc_batch(cases):
    """cases: list of (source, context) -> list of (ok, output-or-error)."""
    payload = [{"template": s, "context": c, "now": NOW} for s, c in cases]
    proc = subprocess.run([str(TOOL), "--batch"], input=json.dumps(payload).encode(),
                          capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    results = json.loads(proc.stdout)
    assert len(results) == len(cases)
    return [(r["ok"], r["output"] if r["ok"] else r["error"]) for r in results]


# ---- the corpus -----------------------------------------------------------------------------

def smollm2_template():
    from gguf import GGUFReader

    path = MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.exists():
        pytest.skip(f"{path} missing (make models)")
    reader = GGUFReader(str(path))
    field = reader.fields["tokenizer.chat_template"]
    return bytes(field.parts[field.data[0]]).decode("utf-8")


def qwen25_coder_template():
    """Qwen2.5-Coder-0.5B-Instruct's template (ChatML with a default system prompt and a tools
    branch), read by llama.cpp: gguf.GGUFReader would parse its 151936-token vocabulary first."""
    llama_cpp = pytest.importorskip("llama_cpp")
    path = MODELS / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    if not path.exists():
        pytest.skip(f"{path} missing (make models)")
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    return llm.metadata["tokenizer.chat_template"]


def fallback_template():
    """The fallback as zinc reports it for a GGUF without a template (Gemma 3's file)."""
    path = MODELS / "gemma-3-270m-q4_k_m.gguf"
    if not path.exists():
        pytest.skip(f"{path} missing (make models)")
    proc = subprocess.run([str(TOOL), "--gguf", str(path)], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"fallback=1" in proc.stderr
    return proc.stdout.decode("utf-8")


def written_templates():
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(DATA.glob("*.jinja"))}


def conversations():
    return json.loads((DATA / "conversations.json").read_text(encoding="utf-8"))


VARIANTS = [
    {"add_generation_prompt": True},
    {"add_generation_prompt": False},
    {"add_generation_prompt": True, "enable_thinking": False},
    {"add_generation_prompt": True, "enable_thinking": True},
]


def contexts():
    for conv in conversations():
        for k, variant in enumerate(VARIANTS):
            ctx = {"messages": conv["messages"], "tools": None, "documents": None, **TOKENS, **variant}
            yield f"{conv['name']}#{k}", ctx


def compare(templates):
    cases, names = [], []
    for tname, source in templates.items():
        for cname, ctx in contexts():
            cases.append((source, ctx))
            names.append(f"{tname}/{cname}")
    got = zinc_batch(cases)
    failures = []
    n_ok = n_err = 0
    for name, (source, ctx), (ok, out) in zip(names, cases, got):
        want_ok, want = oracle(source, ctx)
        if want_ok:
            n_ok += 1
            if not ok:
                failures.append(f"{name}: zinc failed: {out}")
            elif out != want:
                at = next((i for i, (a, b) in enumerate(zip(out, want)) if a != b), min(len(out), len(want)))
                failures.append(f"{name}: output differs at char {at}\n  jinja2: {want[max(0, at - 60):at + 60]!r}"
                                f"\n  zinc:   {out[max(0, at - 60):at + 60]!r}")
        else:
            n_err += 1
            if ok:
                failures.append(f"{name}: jinja2 raised ({want}) but zinc rendered {out!r}")
            elif want.startswith("TemplateError: ") and want[len("TemplateError: "):] not in out:
                failures.append(f"{name}: raise_exception text lost: {want!r} vs {out!r}")
    assert not failures, f"{len(failures)} mismatches:\n" + "\n".join(failures[:20])
    return n_ok, n_err


# ---- tests ----------------------------------------------------------------------------------

def test_tool_built():
    assert TOOL.exists(), f"{TOOL} not built"


def test_written_templates_cover_at_least_twelve():
    assert len(written_templates()) >= 12


def test_real_and_fallback_templates():
    n_ok, _ = compare({"smollm2": smollm2_template(), "fallback": fallback_template()})
    assert n_ok == 2 * len(conversations()) * len(VARIANTS)


def test_qwen25_coder_template():
    n_ok, _ = compare({"qwen2.5-coder": qwen25_coder_template()})
    assert n_ok == len(conversations()) * len(VARIANTS)


def test_gguf_template_is_read_verbatim():
    path = MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.exists():
        pytest.skip("model missing")
    proc = subprocess.run([str(TOOL), "--gguf", str(path)], capture_output=True, timeout=60)
    assert proc.returncode == 0
    assert b"fallback=0" in proc.stderr
    assert proc.stdout.decode("utf-8") == smollm2_template()


def test_written_templates():
    n_ok, n_err = compare(written_templates())
    # The corpus must exercise both successful renders and template-raised errors.
    assert n_ok > 300 and n_err > 5


def test_template_features_render_successfully():
    """Feature templates must render (not error) on ordinary conversations, so that parity is
    checked on real output rather than on both sides failing."""
    ordinary = [c for c in conversations() if c["name"] in ("system_user", "multi_turn", "unicode")]
    for name in ("filters", "tests", "expressions", "whitespace", "loops", "macros", "generation"):
        source = written_templates()[name]
        for conv in ordinary:
            ok, out = oracle(source, {"messages": conv["messages"], "add_generation_prompt": True, **TOKENS})
            assert ok, f"{name}/{conv['name']}: {out}"


def test_snippets():
    """Small expressions and statements (tests/data/jinja/snippets.txt, separated by lines
    "===="): each must render identically, or fail on both sides."""
    snippets = [s for s in (DATA / "snippets.txt").read_text(encoding="utf-8").split("\n====\n") if s.strip()]
    ctx = {"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}],
           "x": None, "d": {"a": 1, "items": 2}, "ms": [{"r": 0}, {"r": 1}]}
    got = zinc_batch([(s, ctx) for s in snippets])
    failures = []
    for source, (ok, out) in zip(snippets, got):
        want_ok, want = oracle(source, ctx)
        if ok != want_ok or (ok and out != want):
            failures.append(f"{source!r}\n  jinja2: {want_ok} {want!r}\n  zinc:   {ok} {out!r}")
    assert not failures, f"{len(failures)} of {len(snippets)} differ:\n" + "\n".join(failures[:10])
    assert len(snippets) > 80


# Error cases: (template, substring of zinc's error, "line:col" or None). jinja2 must fail too.
ERROR_CASES = [
    ("{{ raise_exception('Roles must alternate') }}", "template raised an exception: Roles must alternate", "1:4"),
    ("line1\n{% if true %}\n  {{ raise_exception('deep ' ~ 42) }}\n{% endif %}", "deep 42", "3:6"),
    ("{% include 'other.jinja' %}", "unsupported construct '{% include %}'", "1:4"),
    ("{% extends 'base' %}", "unsupported construct '{% extends %}'", "1:4"),
    ("{% import 'm' as m %}", "unsupported construct '{% import %}'", "1:4"),
    ("a\n{{ x | nosuchfilter }}", "unknown filter 'nosuchfilter'", "2:8"),
    ("{% if x is nosuchtest %}{% endif %}", "no test named 'nosuchtest'", "1:9"),
    ("{% do x.append(1) %}", "unknown tag 'do'", "1:4"),
    ("{% if true %}\nunclosed", "unexpected end of template", "2:9"),
    ("{% for a in b %}{% endif %}", "unknown tag 'endif'", "1:20"),
    ("{{ }}", "expected an expression", "1:4"),
    ("{{ (1 }}", "unexpected '}', expected ')'", "1:7"),
    ("{{ 'unterminated }}", "unterminated string", "1:4"),
    ("{# never closed", "missing end of comment", "1:1"),
    ("{% break %}", "'break' outside loop", "1:4"),
    ("{{ x.y }}", "'x' is undefined", "1:5"),
    ("{{ messages[0].content.nope.deeper }}", "'str object' has no attribute 'nope'", "1:28"),
    ("{{ 1 + 'a' }}", "unsupported operand type(s) for +", "1:6"),
    ("{{ 1 // 0 }}", "division or modulo by zero", "1:6"),
    ("{% set l = [1] %}{{ l.append(2) }}", "access to attribute 'append' of 'list' object is unsafe", None),
    ("{% set a, b = [1] %}", "not enough values to unpack", None),
    ("{% set n = 1 %}{% set n.attr = 2 %}", "cannot assign attribute on non-namespace object", None),
    ("{{ range(1000000) | length }}", "Range too big", None),
    ("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "takes not more than 1 argument", None),
    ("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "recursion", None),
]


@pytest.mark.parametrize("source,needle,pos", ERROR_CASES)
def test_error_cases(source, needle, pos):
    ctx = {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True}
    want_ok, want = oracle(source, ctx)
    assert not want_ok, f"jinja2 unexpectedly rendered {want!r}"
    [(ok, err)] = zinc_batch([(source, ctx)])
    assert not ok, f"zinc rendered {err!r}"
    assert needle in err, err
    assert "\n" not in err
    if pos is not None:
        assert err.startswith(f"template:{pos}: "), err


# Constructs jinja2 renders but zinc deliberately does not support: a clear error, never output.
UNSUPPORTED_CASES = [
    ("{% for x in [1, [2]] recursive %}{{ x }}{% endfor %}", "unsupported construct 'recursive'", "1:22"),
    ("{{ 10 ** 20 }}", "integer overflow", "1:7"),
    ("{{ f(*args) }}", "unsupported construct '*' argument unpacking", "1:6"),
]


@pytest.mark.parametrize("source,needle,pos", UNSUPPORTED_CASES)
def test_unsupported_constructs(source, needle, pos):
    [(ok, err)] = zinc_batch([(source, {})])
    assert not ok, f"zinc rendered {err!r}"
    assert needle in err and err.startswith(f"template:{pos}: "), err


def test_single_template_cli_exit_status(tmp_path):
    tpl = tmp_path / "t.jinja"
    tpl.write_text("{{ raise_exception('nope') }}")
    proc = subprocess.run([str(TOOL), str(tpl)], input=b"{}", capture_output=True, timeout=60)
    assert proc.returncode == 2
    assert b"nope" in proc.stderr
    tpl.write_text("{% for m in messages %}{{ m.role }}:{{ m.content }}\n{% endfor %}")
    proc = subprocess.run([str(TOOL), str(tpl)],
                          input=json.dumps({"messages": [{"role": "user", "content": "é"}]}).encode(),
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode("utf-8") == "user:é\n"
