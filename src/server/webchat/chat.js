// zinc web chat (served by `zinc serve` at /; docs/server.md, "Web chat"). Plain JS, no
// framework, no network but this server: POST /v1/chat/completions with stream: true (Stop
// aborts the fetch; the server cancels the sequence when the connection closes), GET /v1/models
// for the model id, GET /health for the tier. Conversations, settings and the API key are kept
// in this browser's localStorage. Model text is rendered by markdown.js (DOM nodes, no HTML).
"use strict";

(() => {
  const KEY_CONVERSATIONS = "zinc.chat.conversations";
  const KEY_CURRENT = "zinc.chat.current";
  const KEY_SETTINGS = "zinc.chat.settings";
  const KEY_API = "zinc.chat.apiKey";
  const DEFAULTS = { system: "", temperature: 0.7, top_p: 0.95, max_tokens: 1024, seed: "",
                     thinking: true };

  const $ = (id) => document.getElementById(id);
  const ui = {
    conversations: $("conversations"), messages: $("messages"), input: $("input"),
    send: $("send"), stop: $("stop"), model: $("model"), tier: $("server-tier"),
    notice: $("notice"), settings: $("settings"), settingsButton: $("settings-button"),
    system: $("system-prompt"), temperature: $("temperature"), topP: $("top-p"),
    maxTokens: $("max-tokens"), seed: $("seed"), apiKey: $("api-key"),
    thinking: $("thinking"), thinkingLabel: $("thinking-label"),
  };

  // --- storage ---------------------------------------------------------------------------
  function load(key, fallback) {
    try {
      const v = localStorage.getItem(key);
      return v === null ? fallback : JSON.parse(v);
    } catch (e) {
      return fallback;
    }
  }
  function save(key, value) {
    try {
      localStorage.setItem(key, JSON.stringify(value));
    } catch (e) {
      showNotice("Could not save in this browser's storage: " + e.message);
    }
  }

  const state = {
    conversations: load(KEY_CONVERSATIONS, []),
    currentId: load(KEY_CURRENT, null),
    settings: Object.assign({}, DEFAULTS, load(KEY_SETTINGS, {})),
    apiKey: load(KEY_API, ""),
    model: null,          // /v1/models card
    thinkingToggle: false, // the template reads enable_thinking
    controller: null,     // AbortController of the reply being streamed
  };
  if (!Array.isArray(state.conversations)) state.conversations = [];

  function current() {
    return state.conversations.find((c) => c.id === state.currentId) || null;
  }
  function saveConversations() {
    save(KEY_CONVERSATIONS, state.conversations);
    save(KEY_CURRENT, state.currentId);
  }
  function newId() {
    return Date.now().toString(36) + Math.random().toString(36).slice(2, 8);
  }

  // --- notices ---------------------------------------------------------------------------
  function showNotice(text) {
    ui.notice.textContent = text;
    ui.notice.classList.toggle("hidden", !text);
  }

  // --- API -------------------------------------------------------------------------------
  function headers() {
    const h = { "Content-Type": "application/json" };
    if (state.apiKey) h["Authorization"] = "Bearer " + state.apiKey;
    return h;
  }
  async function errorText(res) {
    try {
      const j = await res.json();
      if (j && j.error && j.error.message) return `${res.status}: ${j.error.message}`;
    } catch (e) { /* not JSON */ }
    return `HTTP ${res.status}`;
  }

  async function loadModel() {
    try {
      const res = await fetch("/v1/models", { headers: headers() });
      if (res.status === 401) {
        ui.model.textContent = "API key needed";
        showNotice("This server needs an API key: enter it under Settings (it is kept in this browser).");
        openSettings(true);
        ui.apiKey.focus();
        return;
      }
      if (!res.ok) throw new Error(await errorText(res));
      const j = await res.json();
      state.model = j.data && j.data[0];
      ui.model.textContent = state.model ? state.model.id : "no model";
      ui.model.title = state.model ? `${state.model.id}: ${state.model.max_model_len} positions` : "";
      state.thinkingToggle = !!(state.model && state.model.zinc && state.model.zinc.thinking_toggle);
      ui.thinkingLabel.classList.toggle("hidden", !state.thinkingToggle);
      showNotice("");
    } catch (e) {
      ui.model.textContent = "server unreachable";
      showNotice("Cannot reach the server: " + e.message);
    }
    try {
      const h = await (await fetch("/health")).json();
      const ev = h.evidence || {};
      ui.tier.textContent = ev.execution_tier ? "tier " + ev.execution_tier : "";
    } catch (e) { /* /health is informational */ }
  }

  // --- rendering ---------------------------------------------------------------------------
  // Split a reply into its thinking and its answer: <think>...</think> (Qwen3, DeepSeek-R1 style;
  // a template may open the tag itself, so a lone </think> ends thinking that began at the start).
  function splitThinking(text) {
    const open = text.indexOf("<think>");
    const close = text.indexOf("</think>");
    if (open !== -1 && (close === -1 || open < close) && text.slice(0, open).trim() === "") {
      const rest = text.slice(open + 7);
      const c = rest.indexOf("</think>");
      if (c === -1) return { thinking: rest, answer: "", thinkingDone: false };
      return { thinking: rest.slice(0, c), answer: rest.slice(c + 8), thinkingDone: true };
    }
    if (close !== -1 && open === -1)
      return { thinking: text.slice(0, close), answer: text.slice(close + 8), thinkingDone: true };
    return { thinking: null, answer: text, thinkingDone: true };
  }

  function fmt(x, digits) {
    return Number.isFinite(x) ? x.toFixed(digits) : "–";
  }

  // The stats line under a reply: model, tokens, speed, and the server's evidence.
  function statsNode(st) {
    const div = document.createElement("div");
    div.className = "stats";
    const part = (text, title, cls) => {
      const s = document.createElement("span");
      s.textContent = text;
      if (title) s.title = title;
      if (cls) s.className = cls;
      div.append(s);
    };
    if (st.model) part(st.model, "the model that answered");
    if (st.finish) part(st.finish === "stopped" ? "stopped" : st.finish,
                        "finish_reason (or stopped by you)", st.finish === "stopped" ? "warn" : "");
    if (st.prompt !== undefined)
      part(`prompt ${st.prompt}` + (st.cached ? ` (${st.cached} cached)` : ""),
           "prompt tokens (of them served from the prefix cache)");
    if (st.tokens !== undefined)
      part(`${st.approx ? "≈" : ""}${st.tokens} tokens`,
           st.approx ? "streamed pieces (no usage: the reply was stopped)" : "completion tokens");
    if (st.tps !== undefined)
      part(`${fmt(st.tps, 1)} tok/s`, "decode speed: tokens after the first / their time",
           "volatile");
    if (st.ttft !== undefined)
      part(`first token ${fmt(st.ttft, 2)} s`, "time to first token", "volatile");
    const ev = st.evidence;
    if (ev) {
      part(`tier ${ev.execution_tier}`, `steps ${ev.steps}; prompt rows ${ev.prompt_rows}, ` +
           `generated rows ${ev.generated_rows}; cpu_fallback ${ev.cpu_fallback}`);
      if (ev.validated_steps > 0)
        part(ev.validation_failures ? `validation FAILED (${ev.validation_failures})`
                                    : `validated ${ev.validated_steps}/${ev.steps} steps`,
             "steps compared with the CPU oracle", ev.validation_failures ? "bad" : "good");
      else
        part("not validated", "no step of this request was compared with the CPU oracle");
      if (ev.shortcut_free === false)
        part("shortcuts: " + (ev.shortcuts || "yes"), "the forward pass took a shortcut", "bad");
      else
        part("shortcut-free", "no layer skipped, no capped lm_head, no clamped experts");
      if (ev.cpu_fallback > 0)
        part(`cpu fallback ${ev.cpu_fallback}`, ev.fallback_ops || "", "warn");
      if (ev.tenant && ev.tenant.id) part("tenant " + ev.tenant.id, "the tenant of the API key");
    }
    return div;
  }

  function renderContent(container, msg, streaming) {
    container.replaceChildren();
    if (msg.role === "error") {
      const p = document.createElement("p");
      p.textContent = msg.content;
      container.append(p);
      return;
    }
    if (msg.role !== "assistant") {
      // The user's own text: shown as typed (text, line breaks kept), not as Markdown.
      const p = document.createElement("p");
      p.className = "plain";
      p.textContent = msg.content;
      container.append(p);
      return;
    }
    const { thinking, answer, thinkingDone } = splitThinking(msg.content);
    const reasoning = (msg.reasoning || "") + (thinking || "");
    if (reasoning.trim() !== "" || (thinking !== null && streaming)) {
      const d = document.createElement("details");
      d.className = "thinking";
      d.open = streaming && !thinkingDone;
      const s = document.createElement("summary");
      s.textContent = thinkingDone || !streaming ? "Thinking" : "Thinking…";
      d.append(s, ZincMarkdown.render(reasoning.trim()));
      container.append(d);
    }
    container.append(ZincMarkdown.render(answer));
    if (streaming) {
      const c = document.createElement("span");
      c.className = "cursor";
      container.append(c);
    }
  }

  function messageNode(msg, index, streaming) {
    const div = document.createElement("div");
    div.className = "msg " + msg.role;
    div.dataset.index = index;
    const role = document.createElement("div");
    role.className = "role";
    role.textContent = msg.role === "user" ? "You" : msg.role === "error" ? "Error" : "Assistant";
    const content = document.createElement("div");
    content.className = "content";
    renderContent(content, msg, streaming);
    div.append(role, content);
    if (msg.stats) div.append(statsNode(msg.stats));
    return div;
  }

  function renderMessages() {
    const conv = current();
    ui.messages.replaceChildren();
    if (!conv || conv.messages.length === 0) {
      const e = document.createElement("div");
      e.className = "empty";
      e.textContent = "Start a conversation below.";
      ui.messages.append(e);
      return;
    }
    conv.messages.forEach((m, i) => ui.messages.append(messageNode(m, i, false)));
    ui.messages.scrollTop = ui.messages.scrollHeight;
  }

  function renderList() {
    ui.conversations.replaceChildren();
    const sorted = [...state.conversations].sort((a, b) => b.updated - a.updated);
    for (const c of sorted) {
      const li = document.createElement("li");
      li.textContent = c.title || "New chat";
      li.title = c.title || "";
      li.dataset.id = c.id;
      li.tabIndex = 0;
      if (c.id === state.currentId) li.className = "active";
      const pick = () => {
        if (state.controller) return;
        state.currentId = c.id;
        saveConversations();
        renderAll();
      };
      li.addEventListener("click", pick);
      li.addEventListener("keydown", (e) => { if (e.key === "Enter") pick(); });
      ui.conversations.append(li);
    }
  }

  function renderAll() {
    renderList();
    renderMessages();
  }

  // --- settings ----------------------------------------------------------------------------
  function showSettings() {
    const s = state.settings;
    ui.system.value = s.system;
    ui.temperature.value = s.temperature;
    ui.topP.value = s.top_p;
    ui.maxTokens.value = s.max_tokens;
    ui.seed.value = s.seed;
    ui.thinking.checked = !!s.thinking;
    ui.apiKey.value = state.apiKey;
  }
  function readSettings() {
    const num = (v, d) => (v === "" || !Number.isFinite(Number(v)) ? d : Number(v));
    state.settings = {
      system: ui.system.value,
      temperature: num(ui.temperature.value, DEFAULTS.temperature),
      top_p: num(ui.topP.value, DEFAULTS.top_p),
      max_tokens: Math.max(1, Math.round(num(ui.maxTokens.value, DEFAULTS.max_tokens))),
      seed: ui.seed.value === "" ? "" : Math.round(num(ui.seed.value, 0)),
      thinking: ui.thinking.checked,
    };
    save(KEY_SETTINGS, state.settings);
    const key = ui.apiKey.value.trim();
    if (key !== state.apiKey) {
      state.apiKey = key;
      save(KEY_API, key);
      loadModel();
    }
  }
  function openSettings(open) {
    ui.settings.classList.toggle("hidden", !open);
    ui.settingsButton.setAttribute("aria-expanded", String(open));
  }

  // --- sending -----------------------------------------------------------------------------
  function setStreaming(on) {
    ui.send.classList.toggle("hidden", on);
    ui.stop.classList.toggle("hidden", !on);
    document.body.classList.toggle("streaming", on);
  }

  function requestBody(conv) {
    const s = state.settings;
    const messages = [];
    if (s.system.trim() !== "") messages.push({ role: "system", content: s.system });
    for (const m of conv.messages) {
      if (m.role === "user") messages.push({ role: "user", content: m.content });
      // Earlier thinking is not sent back (as the thinking models' own templates drop it).
      else if (m.role === "assistant")
        messages.push({ role: "assistant", content: splitThinking(m.content).answer.trim() });
    }
    const body = {
      model: state.model ? state.model.id : undefined,
      messages,
      stream: true,
      stream_options: { include_usage: true },
      temperature: s.temperature,
      top_p: s.top_p,
      max_tokens: s.max_tokens,
    };
    if (s.seed !== "") body.seed = s.seed;
    if (state.thinkingToggle) body.chat_template_kwargs = { enable_thinking: !!s.thinking };
    return body;
  }

  // Read an SSE body: calls onEvent(data) for each "data:" event (comments are skipped).
  async function readSse(res, onEvent) {
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let end;
      while ((end = buf.search(/\r?\n\r?\n/)) !== -1) {
        const block = buf.slice(0, end);
        buf = buf.slice(end).replace(/^\r?\n\r?\n/, "");
        const data = block.split(/\r?\n/).filter((l) => l.startsWith("data:"))
          .map((l) => l.slice(5).replace(/^ /, "")).join("\n");
        if (data !== "" && onEvent(data) === false) return;
      }
    }
  }

  async function send(text) {
    if (state.controller || text.trim() === "") return;
    readSettings();
    let conv = current();
    if (!conv) {
      conv = { id: newId(), title: "", created: Date.now(), updated: Date.now(), messages: [] };
      state.conversations.push(conv);
      state.currentId = conv.id;
    }
    if (!conv.title) conv.title = text.trim().replace(/\s+/g, " ").slice(0, 60);
    conv.messages.push({ role: "user", content: text });
    const body = JSON.stringify(requestBody(conv));  // the history before this reply
    const reply = { role: "assistant", content: "", reasoning: "" };
    conv.messages.push(reply);
    conv.updated = Date.now();
    saveConversations();
    renderAll();

    const node = ui.messages.lastElementChild;
    const content = node.querySelector(".content");
    const st = { model: state.model ? state.model.id : "" };
    const controller = new AbortController();
    state.controller = controller;
    setStreaming(true);
    const t0 = performance.now();
    let tFirst = null, tLast = null, chunks = 0, usage = null, finish = null, evidence = null;
    let pending = false;
    const paint = () => {
      pending = false;
      // Follow the reply unless the reader scrolled up to read something else.
      const m = ui.messages;
      const follow = m.scrollHeight - m.scrollTop - m.clientHeight < 40;
      renderContent(content, reply, true);
      if (follow) m.scrollTop = m.scrollHeight;
    };
    try {
      const res = await fetch("/v1/chat/completions", {
        method: "POST", headers: headers(), body,
        signal: controller.signal,
      });
      if (!res.ok) throw new Error(await errorText(res));
      await readSse(res, (data) => {
        if (data === "[DONE]") return false;
        let j;
        try { j = JSON.parse(data); } catch (e) { return true; }
        if (j.error) throw new Error(j.error.message || "the server reported an error");
        if (j.model) st.model = j.model;
        if (j.usage) usage = j.usage;
        if (j.zinc && j.zinc.evidence) evidence = j.zinc.evidence;
        for (const c of j.choices || []) {
          const d = c.delta || {};
          const piece = (d.content || "") + (d.reasoning_content || "");
          if (piece !== "") {
            const now = performance.now();
            if (tFirst === null) tFirst = now;
            tLast = now;
            chunks++;
            reply.content += d.content || "";
            reply.reasoning += d.reasoning_content || "";
            if (!pending) { pending = true; requestAnimationFrame(paint); }
          }
          if (c.finish_reason) finish = c.finish_reason;
        }
        return true;
      });
    } catch (e) {
      if (e.name === "AbortError") {
        finish = "stopped";
      } else {
        conv.messages.push({ role: "error", content: e.message });
      }
    }
    state.controller = null;
    setStreaming(false);
    if (!reply.reasoning) delete reply.reasoning;
    if (reply.content === "" && !reply.reasoning && finish !== "stopped") {
      conv.messages.splice(conv.messages.indexOf(reply), 1);
    } else {
      st.finish = finish || "incomplete";
      st.tokens = usage ? usage.completion_tokens : chunks;
      st.approx = !usage;
      if (usage) {
        st.prompt = usage.prompt_tokens;
        const details = usage.prompt_tokens_details;
        if (details && details.cached_tokens) st.cached = details.cached_tokens;
      }
      if (tFirst !== null) st.ttft = (tFirst - t0) / 1000;
      if (tFirst !== null && tLast > tFirst && st.tokens > 1)
        st.tps = (st.tokens - 1) / ((tLast - tFirst) / 1000);
      if (evidence) st.evidence = evidence;
      reply.stats = st;
    }
    conv.updated = Date.now();
    saveConversations();
    renderAll();
    ui.input.focus();
  }

  // --- wiring ------------------------------------------------------------------------------
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = ui.input.value;
    if (text.trim() === "" || state.controller) return;
    ui.input.value = "";
    send(text);
  });
  ui.input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $("composer").requestSubmit();
    }
  });
  ui.stop.addEventListener("click", () => {
    if (state.controller) state.controller.abort();
  });
  $("new-chat").addEventListener("click", () => {
    if (state.controller) return;
    state.currentId = null;
    saveConversations();
    renderAll();
    ui.input.focus();
  });
  $("delete-chat").addEventListener("click", () => {
    if (state.controller || !current()) return;
    state.conversations = state.conversations.filter((c) => c.id !== state.currentId);
    state.currentId = null;
    saveConversations();
    renderAll();
  });
  ui.settings.addEventListener("submit", (e) => { e.preventDefault(); readSettings(); });
  ui.settingsButton.addEventListener("click", () =>
    openSettings(ui.settings.classList.contains("hidden")));
  $("settings-reset").addEventListener("click", () => {
    state.settings = Object.assign({}, DEFAULTS);
    save(KEY_SETTINGS, state.settings);
    showSettings();
  });
  for (const input of [ui.system, ui.temperature, ui.topP, ui.maxTokens, ui.seed, ui.apiKey,
                       ui.thinking])
    input.addEventListener("change", readSettings);
  window.addEventListener("storage", (e) => {
    // Another tab changed the conversations: show them (unless a reply is streaming here).
    if (e.key === KEY_CONVERSATIONS && !state.controller) {
      state.conversations = load(KEY_CONVERSATIONS, []);
      renderAll();
    }
  });

  if (!current()) state.currentId = null;
  showSettings();
  renderAll();
  loadModel();
  ui.input.focus();
  // For tests and the console: the renderer and the state (read-only use).
  window.zincChat = { state, render: ZincMarkdown.render, splitThinking };
})();
