"""The web chat at / (src/server/webchat, docs/server.md "Web chat") in headless Chromium.

Debian's chromium and chromium-driver (scripts/install-deps) driven by selenium, against a live
`zinc serve` on SmolLM2: type a message and see the streamed reply grow (several updates, the same
text as the API's greedy answer), stop a reply mid-stream (the server cancels the sequence and
keeps serving), reload and find the conversations, a screenshot against the committed reference
(tests/py/webchat/reference.png), model output escaped (no HTML from the model), Markdown, the
thinking section, and an API key entered in the page under --tenants. Plus the HTTP side: content
types, caching, 404s, the other routes unchanged.

Deterministic screenshot: a fixed viewport, temperature 0 and a fixed seed, fonts from Debian's
fonts-dejavu-core only (a private fontconfig file), the caret and the timing numbers taken out.
ZINC_UPDATE_SCREENSHOT=1 rewrites the reference instead of comparing.
"""
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from server_harness import MODEL_ID, Server, http_call

CHROMIUM = Path(os.environ.get("ZINC_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("ZINC_CHROMEDRIVER", "/usr/bin/chromedriver"))
HERE = Path(__file__).resolve().parent
REFERENCE = HERE / "webchat" / "reference.png"
FONTS = Path("/usr/share/fonts/truetype/dejavu")
FONT_FILES = ["DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSansMono.ttf",
              "DejaVuSansMono-Bold.ttf"]
WIDTH, HEIGHT = 900, 600
WAIT = 60  # seconds for a reply on a busy 2-core machine


def need_browser():
    pytest.importorskip("selenium")
    pytest.importorskip("PIL")
    for p in (CHROMIUM, CHROMEDRIVER):
        if not p.exists():
            pytest.skip(f"{p} missing: apt-get install chromium chromium-driver (scripts/install-deps)")
    for f in FONT_FILES:
        if not (FONTS / f).exists():
            pytest.skip(f"{FONTS / f} missing: apt-get install fonts-dejavu-core")


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", 2, "-c", 2048)
    yield s
    s.close()


@pytest.fixture(scope="module")
def fontconfig(tmp_path_factory):
    """A fontconfig file that knows only DejaVu Sans / Sans Mono (copied from fonts-dejavu-core),
    whatever else the machine has, so text renders the same everywhere."""
    need_browser()
    d = tmp_path_factory.mktemp("fonts")
    for f in FONT_FILES:
        shutil.copy(FONTS / f, d / f)
    alias = "".join(
        f'<match target="pattern"><test name="family"><string>{generic}</string></test>'
        f'<edit name="family" mode="assign" binding="strong"><string>{font}</string></edit></match>'
        for generic, font in [("sans-serif", "DejaVu Sans"), ("serif", "DejaVu Sans"),
                              ("system-ui", "DejaVu Sans"), ("monospace", "DejaVu Sans Mono")])
    conf = d / "fonts.conf"
    conf.write_text('<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd"><fontconfig>'
                    f"<dir>{d}</dir><cachedir>{d}/cache</cachedir>{alias}</fontconfig>")
    return conf


@pytest.fixture(scope="module")
def browser(fontconfig):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              f"--window-size={WIDTH},{HEIGHT}", "--force-device-scale-factor=1",
              "--hide-scrollbars", "--force-color-profile=srgb", "--font-render-hinting=none",
              "--disable-lcd-text", "--disable-extensions", "--no-first-run",
              "--disable-background-networking", "--disable-component-update"]:
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    env = dict(os.environ, FONTCONFIG_FILE=str(fontconfig))
    d = webdriver.Chrome(options=opts, service=Service(str(CHROMEDRIVER), env=env))
    d.set_script_timeout(WAIT)
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                      {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
    yield d
    d.quit()


# --- helpers -------------------------------------------------------------------------------

def by_css(d, sel):
    from selenium.webdriver.common.by import By
    return d.find_elements(By.CSS_SELECTOR, sel)


def wait_for(cond, timeout=WAIT, what="condition"):
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def open_fresh(d, url):
    """The page with empty storage (no conversations, default settings, no key)."""
    d.get(url + "/")
    d.execute_script("localStorage.clear()")
    d.get(url + "/")
    wait_for(lambda: d.execute_script("return !!window.zincChat"), what="the page's script")


def set_settings(d, **values):
    """Fill the settings form as a user would (ids as in index.html)."""
    if not d.find_element("id", "settings").is_displayed():
        d.find_element("id", "settings-button").click()
    for field, v in values.items():
        e = d.find_element("id", field)
        e.clear()
        e.send_keys(str(v))
    d.find_element("id", "settings-button").click()  # close; change events have fired


def watch_reply(d):
    """Record every distinct length of the streaming reply's text (a MutationObserver)."""
    d.execute_script("""
        window.__lens = [];
        const m = document.getElementById('messages');
        new MutationObserver(() => {
          const c = m.querySelector('.msg.assistant:last-of-type .content');
          const n = c ? c.textContent.length : 0;
          if (window.__lens[window.__lens.length - 1] !== n) window.__lens.push(n);
        }).observe(m, {childList: true, subtree: true, characterData: true});""")


def type_message(d, text):
    box = d.find_element("id", "input")
    box.send_keys(text)
    box.send_keys("\n")  # Enter sends


def streaming(d):
    return d.find_element("id", "stop").is_displayed()


def wait_reply_done(d):
    wait_for(lambda: d.find_element("id", "send").is_displayed() and not streaming(d),
             what="the reply to end")


def stored(d):
    return d.execute_script("return JSON.parse(localStorage.getItem('zinc.chat.conversations'))")


def console_errors(d):
    return [e for e in d.get_log("browser") if e["level"] == "SEVERE"]


def greedy(server, content, max_tokens, seed=1, system=None):
    msgs = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": content}]
    r = server.post("/v1/chat/completions", {"model": MODEL_ID, "messages": msgs,
                                              "temperature": 0, "seed": seed, "top_p": 1,
                                              "max_tokens": max_tokens})
    assert r.status == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


# --- HTTP: the static files and the other routes --------------------------------------------

def test_static_files_types_caching_and_404(server):
    r = server.get("/")
    assert r.status == 200
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    assert '<script src="/webchat/chat.js"' in r.text and "<title>zinc chat</title>" in r.text
    assert r.headers["cache-control"] == "no-cache"
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"
    etag = r.headers["etag"]
    assert etag.startswith('"') and etag.endswith('"')
    again = server.get("/", headers={"If-None-Match": etag})
    assert again.status == 304 and again.body == b""
    assert server.get("/", headers={"If-None-Match": '"other"'}).status == 200
    for name, ctype in [("chat.js", "text/javascript; charset=utf-8"),
                        ("markdown.js", "text/javascript; charset=utf-8"),
                        ("chat.css", "text/css; charset=utf-8"), ("icon.svg", "image/svg+xml")]:
        f = server.get("/webchat/" + name)
        assert f.status == 200 and f.headers["content-type"] == ctype, (name, f.headers)
        assert f.headers["etag"] != etag and len(f.body) > 100
        # The bytes are the repository's file (embedded at build time).
        src = (HERE.parents[1] / "src" / "server" / "webchat" / name).read_bytes()
        assert f.body == src, f"{name}: the binary serves other bytes than the source (rebuild)"
    h = server.call("HEAD", "/webchat/chat.css")
    assert h.status == 200 and h.body == b"" and int(h.headers["content-length"]) > 100
    for path in ["/webchat/nope.js", "/webchat/", "/webchat/../index.html", "/index.htm",
                 "/webchat/x/chat.js"]:
        e = server.get(path)
        assert e.status == 404, (path, e.status)
        assert e.json()["error"]["code"] == "not_found", path
    p = server.post("/", {"x": 1})
    assert p.status == 405 and p.headers["allow"] == "GET, HEAD, OPTIONS"
    # The other routes are as before.
    assert server.get("/health").json()["status"] == "ok"
    models = server.get("/v1/models").json()
    assert models["data"][0]["id"] == MODEL_ID
    assert models["data"][0]["zinc"] == {"thinking_toggle": False}  # SmolLM2's template
    assert "zinc_requests_total" in server.get("/metrics").text
    assert 'endpoint="/webchat"' in server.get("/metrics").text


def test_chat_template_kwargs_is_checked(server):
    body = {"model": MODEL_ID, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
            "temperature": 0}
    ok = server.post("/v1/chat/completions", dict(body, chat_template_kwargs={
        "enable_thinking": False, "other": 1}))
    assert ok.status == 200, ok.text
    for bad, param in [({"chat_template_kwargs": 3}, "chat_template_kwargs"),
                       ({"chat_template_kwargs": {"enable_thinking": "no"}},
                        "chat_template_kwargs.enable_thinking")]:
        r = server.post("/v1/chat/completions", dict(body, **bad))
        assert r.status == 400 and r.json()["error"]["param"] == param, r.text


# --- the page in Chromium --------------------------------------------------------------------

PROMPT = "Write a Python function that adds two numbers, in a code block."
SYSTEM = "You are a helpful assistant."


def test_streamed_reply_and_screenshot(server, browser):
    d = browser
    open_fresh(d, server.url)
    assert wait_for(lambda: d.find_element("id", "model").text == MODEL_ID, what="the model id")
    set_settings(d, **{"system-prompt": SYSTEM, "temperature": 0, "top-p": 1, "max-tokens": 60,
                       "seed": 1})
    watch_reply(d)
    type_message(d, PROMPT)
    wait_for(lambda: streaming(d) or d.execute_script("return window.__lens.length") > 2,
             what="the reply to start")
    wait_reply_done(d)
    lens = d.execute_script("return window.__lens")
    growing = [n for n in lens if n > 0]
    assert len(set(growing)) >= 3, f"the reply did not stream (text lengths seen: {lens})"

    conv = stored(d)
    assert len(conv) == 1 and [m["role"] for m in conv[0]["messages"]] == ["user", "assistant"]
    reply = conv[0]["messages"][1]
    # The page asked for what the settings say: the same text as the API's greedy answer.
    assert reply["content"] == greedy(server, PROMPT, 60, system=SYSTEM)
    st = reply["stats"]
    assert st["model"] == MODEL_ID and st["finish"] in ("stop", "length") and st["tokens"] > 3
    assert st["evidence"]["execution_tier"] == "cpu" and st["evidence"]["shortcut_free"] is True
    shown = by_css(d, ".msg.assistant .stats")[0].text
    for want in [MODEL_ID, "tokens", "tok/s", "first token", "tier cpu", "not validated",
                 "shortcut-free"]:
        assert want in shown, (want, shown)
    # Markdown: the reply's code block is a code block.
    if "```" in reply["content"]:
        assert by_css(d, ".msg.assistant .code-block pre code"), "no code block rendered"
    assert not console_errors(d), console_errors(d)

    # The screenshot: the caret and the timing numbers (which vary) taken out.
    d.execute_script("""
        document.activeElement && document.activeElement.blur();
        for (const e of document.querySelectorAll('.volatile')) e.textContent = '(time)';""")
    png = d.get_screenshot_as_png()
    compare_screenshot(png)


def compare_screenshot(png):
    import io
    from PIL import Image, ImageChops, ImageStat
    shot = Image.open(io.BytesIO(png)).convert("L")
    assert shot.size == (WIDTH, HEIGHT), shot.size
    if os.environ.get("ZINC_UPDATE_SCREENSHOT") == "1":
        REFERENCE.parent.mkdir(exist_ok=True)
        shot.save(REFERENCE, optimize=True)
        return
    ref = Image.open(REFERENCE).convert("L")
    diff = ImageChops.difference(shot, ref)
    mean = ImageStat.Stat(diff).mean[0]
    off = sum(diff.point(lambda v: 255 if v > 64 else 0).histogram()[255:])
    frac = off / (WIDTH * HEIGHT)
    if mean > 1.0 or frac > 0.003:
        out = Path(os.environ.get("TMPDIR", "/tmp")) / "zinc-webchat-actual.png"
        shot.save(out)
        raise AssertionError(f"screenshot differs from {REFERENCE.name}: mean difference "
                             f"{mean:.2f}, {frac:.2%} of pixels off by > 64; this run's is {out} "
                             "(ZINC_UPDATE_SCREENSHOT=1 to accept it)")


def test_stop_mid_stream_then_the_server_keeps_serving(server, browser):
    d = browser
    open_fresh(d, server.url)
    set_settings(d, temperature=0, **{"max-tokens": 1500, "seed": 1})
    before = server.health()["requests"]["cancelled"]
    type_message(d, "Count from 1 to 1000, one number per line.")
    wait_for(lambda: len((by_css(d, ".msg.assistant .content") or [None])[0].text
                         if by_css(d, ".msg.assistant .content") else "") > 20,
             what="some streamed text")
    assert streaming(d), "the reply ended before it could be stopped"
    d.find_element("id", "stop").click()
    wait_reply_done(d)
    text = stored(d)[0]["messages"][1]["content"]
    time.sleep(0.5)
    assert stored(d)[0]["messages"][1]["content"] == text, "text kept coming after Stop"
    st = stored(d)[0]["messages"][1]["stats"]
    assert st["finish"] == "stopped"
    assert "stopped" in by_css(d, ".msg.assistant .stats")[0].text
    # The server noticed the closed connection and cancelled the sequence, freeing its blocks.
    wait_for(lambda: server.health()["requests"]["cancelled"] > before, timeout=15,
             what="the server to cancel the stopped request")
    h = server.wait_idle()
    assert h["slots"]["busy"] == 0 and h["kv_blocks"]["used"] == 0, h
    # And the next message is answered, in the same conversation.
    set_settings(d, **{"max-tokens": 12})
    type_message(d, "Say hello.")
    wait_for(lambda: len(stored(d)[0]["messages"]) == 4 and
             "stats" in stored(d)[0]["messages"][3], what="the second reply")
    second = stored(d)[0]["messages"][3]
    assert second["role"] == "assistant" and second["content"].strip() != ""
    assert second["stats"]["finish"] in ("stop", "length")


def test_reload_finds_the_conversations(server, browser):
    d = browser
    open_fresh(d, server.url)
    set_settings(d, temperature=0, **{"max-tokens": 8, "seed": 1})
    for q in ["What is the capital of France?", "Name a colour."]:
        d.find_element("id", "new-chat").click()
        type_message(d, q)
        wait_reply_done(d)
    d.refresh()
    wait_for(lambda: len(by_css(d, "#conversations li")) == 2, what="the conversation list")
    titles = [li.text for li in by_css(d, "#conversations li")]
    assert titles == ["Name a colour.", "What is the capital of France?"], titles
    # The current conversation is shown again, its reply with its stats.
    assert by_css(d, ".msg.user")[0].text.endswith("Name a colour.")
    assert len(by_css(d, ".msg.assistant .stats")) == 1
    # The older one opens from the list.
    by_css(d, "#conversations li")[1].click()
    wait_for(lambda: by_css(d, ".msg.user") and
             by_css(d, ".msg.user")[0].text.endswith("What is the capital of France?"),
             what="the older conversation")
    assert "active" in by_css(d, "#conversations li")[1].get_attribute("class")
    # The settings were kept too.
    d.find_element("id", "settings-button").click()
    assert d.find_element("id", "max-tokens").get_attribute("value") == "8"


def test_server_errors_are_shown(server, browser):
    d = browser
    open_fresh(d, server.url)
    set_settings(d, **{"max-tokens": 100000})  # more than the 2048-position context
    type_message(d, "Hi")
    wait_reply_done(d)
    err = wait_for(lambda: by_css(d, ".msg.error .content"), what="the error")[0].text
    assert err.startswith("400: ") and "context" in err, err
    assert [m["role"] for m in stored(d)[0]["messages"]] == ["user", "error"]
    # The error is not sent back as a turn: the next request works.
    set_settings(d, **{"max-tokens": 4})
    type_message(d, "Hi")
    wait_reply_done(d)
    assert [m["role"] for m in stored(d)[0]["messages"]] == ["user", "error", "user", "assistant"]


EVIL = ('<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
        '<b onmouseover="window.__xss=3">bold?</b> [click](javascript:window.__xss=4) '
        '[ok](https://example.org/a) <iframe src="javascript:window.__xss=5"></iframe>')


def test_model_output_is_text_not_html(server, browser):
    d = browser
    open_fresh(d, server.url)
    # A reply from the model holding HTML, stored as the page stores replies, then shown.
    conv = [{"id": "x1", "title": "evil", "created": 1, "updated": 1, "messages": [
        {"role": "user", "content": "<i>hi</i>"},
        {"role": "assistant", "content": EVIL + "\n\n```html\n<script>window.__xss=6</script>\n```"}]}]
    d.execute_script("localStorage.setItem('zinc.chat.conversations', arguments[0]);"
                     "localStorage.setItem('zinc.chat.current', '\"x1\"');", json.dumps(conv))
    d.refresh()
    wait_for(lambda: by_css(d, ".msg.assistant"), what="the stored reply")
    time.sleep(0.2)
    assert d.execute_script("return window.__xss") is None
    msg = by_css(d, ".msg.assistant .content")[0]
    for tag in ["img", "script", "b", "iframe"]:
        assert not msg.find_elements("tag name", tag), tag
    assert "<img src=x onerror=" in msg.text and "<script>window.__xss=6</script>" in msg.text
    links = [a.get_attribute("href") for a in msg.find_elements("tag name", "a")]
    assert links == ["https://example.org/a"], links  # the javascript: link is text
    assert by_css(d, ".msg.user .content")[0].text == "<i>hi</i>"
    # The same renderer a streamed reply goes through.
    n = d.execute_script("const r = zincChat.render(arguments[0]);"
                         "return r.querySelectorAll('img,script,iframe,b,[onerror]').length;", EVIL)
    assert n == 0


def test_markdown_and_thinking(server, browser):
    d = browser
    open_fresh(d, server.url)
    md = ("# Title\n\nSome **bold**, *em*, `code` and ~~gone~~.\n\n- one\n- two\n  - nested\n\n"
          "1. first\n2. second\n\n> quoted\n\n| a | b |\n|---|--:|\n| 1 | 2 |\n\n"
          "```python\ndef f(x):\n    return x < 1 and x > 0\n```\n")
    counts = d.execute_script("""
        const r = zincChat.render(arguments[0]);
        const q = (s) => r.querySelectorAll(s).length;
        return {h1: q('h1'), strong: q('strong'), em: q('em'), code: q('p code'), del: q('del'),
                ul: q('ul'), li: q('li'), ol: q('ol'), quote: q('blockquote'), td: q('td'),
                pre: r.querySelector('pre code.language-python').textContent};""", md)
    assert counts == {"h1": 1, "strong": 1, "em": 1, "code": 1, "del": 1, "ul": 2, "li": 5,
                      "ol": 1, "quote": 1, "td": 2,
                      "pre": "def f(x):\n    return x < 1 and x > 0"}, counts
    # A reply that thought first: the thinking is a collapsed section, the answer outside it.
    conv = [{"id": "t1", "title": "think", "created": 1, "updated": 1, "messages": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nTwo plus two is four.\n</think>\n\n**4**"}]}]
    d.execute_script("localStorage.setItem('zinc.chat.conversations', arguments[0]);"
                     "localStorage.setItem('zinc.chat.current', '\"t1\"');", json.dumps(conv))
    d.refresh()
    wait_for(lambda: by_css(d, ".msg.assistant details.thinking"), what="the thinking section")
    det = by_css(d, ".msg.assistant details.thinking")[0]
    assert det.get_attribute("open") is None  # collapsed
    assert "Two plus two" in det.get_attribute("textContent")
    assert by_css(d, ".msg.assistant .content > .md strong")[0].text == "4"
    det.find_element("tag name", "summary").click()
    assert "Two plus two is four." in det.text
    # The thinking is not sent back with the next request (a template-opened </think> too).
    split = d.execute_script("return zincChat.splitThinking('I think.</think>Answer')")
    assert split == {"thinking": "I think.", "answer": "Answer", "thinkingDone": True}
    # SmolLM2's template has no enable_thinking: no switch is offered.
    assert not d.find_element("id", "thinking-label").is_displayed()


def test_api_key_entered_in_the_page(tmp_path, browser):
    key = "sk-webchat-test"
    cfg = tmp_path / "tenants.toml"
    cfg.write_text('[[tenant]]\nid = "web"\napi_keys = ["sha256:%s"]\n'
                   % hashlib.sha256(key.encode()).hexdigest())
    s = Server("--tenants", cfg, "--parallel", 1, "-c", 512)
    try:
        assert s.get("/").status == 200  # the page itself needs no key
        assert s.get("/webchat/chat.js").status == 200
        assert s.get("/v1/models").status == 401
        d = browser
        open_fresh(d, s.url)
        wait_for(lambda: "API key" in d.find_element("id", "notice").text, what="the key notice")
        assert d.find_element("id", "api-key").is_displayed()  # settings opened for it
        d.find_element("id", "api-key").send_keys(key)
        d.find_element("id", "temperature").click()  # leave the field: change event
        wait_for(lambda: d.find_element("id", "model").text == MODEL_ID, what="the model id")
        assert d.execute_script("return localStorage.getItem('zinc.chat.apiKey')") == json.dumps(key)
        d.find_element("id", "settings-button").click()
        set_settings(d, **{"max-tokens": 4, "temperature": 0})
        type_message(d, "Hi")
        wait_reply_done(d)
        msgs = stored(d)[0]["messages"]
        assert msgs[-1]["role"] == "assistant", msgs  # not a 401 error
        assert msgs[-1]["stats"]["evidence"]["tenant"]["id"] == "web"
        # After a reload the key is still there and used.
        d.refresh()
        wait_for(lambda: d.find_element("id", "model").text == MODEL_ID, what="the model id")
    finally:
        s.close()


THINK_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n"
    "{% endif %}{% endif %}")


def test_thinking_switch_for_a_template_that_reads_enable_thinking(tmp_path, browser):
    # A copy of SmolLM2 whose template reads enable_thinking (Qwen3-style), written by gguf's own
    # gguf_new_metadata (as test_cli.py's --no-think test).
    import subprocess
    import sys
    from server_harness import SMOL
    dst = tmp_path / "think.gguf"
    r = subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(SMOL),
                        str(dst), "--chat-template", THINK_TEMPLATE, "--force"],
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    s = Server("--parallel", 1, "-c", 512, model=dst)
    try:
        assert s.get("/v1/models").json()["data"][0]["zinc"] == {"thinking_toggle": True}
        # The server passes the switch to the template: "off" adds the empty think block.
        usage = {}
        for on in (True, False):
            r = s.post("/v1/chat/completions", {
                "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1,
                "chat_template_kwargs": {"enable_thinking": on}})
            assert r.status == 200, r.text
            usage[on] = r.json()["usage"]["prompt_tokens"]
        assert usage[False] > usage[True], usage
        d = browser
        open_fresh(d, s.url)
        wait_for(lambda: d.find_element("id", "thinking-label").is_displayed(),
                 what="the thinking switch")
        box = d.find_element("id", "thinking")
        assert box.is_selected()  # on by default
        d.execute_script("window.__bodies = []; const f = window.fetch;"
                         "window.fetch = (u, o) => { if (o && o.body) window.__bodies.push("
                         "JSON.parse(o.body)); return f(u, o); };")
        set_settings(d, **{"max-tokens": 2, "temperature": 0})
        for expect in (True, False):
            if box.is_selected() != expect:
                box.click()
            type_message(d, "Hi")
            wait_reply_done(d)
        sent = d.execute_script("return window.__bodies.map(b => b.chat_template_kwargs)")
        assert sent == [{"enable_thinking": True}, {"enable_thinking": False}], sent
        assert d.execute_script("return JSON.parse(localStorage.getItem('zinc.chat.settings'))"
                                ".thinking") is False
    finally:
        s.close()
