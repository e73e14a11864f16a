// zinc web chat: a small Markdown renderer for model output (CommonMark's common subset plus
// GFM fences, tables and strikethrough). It builds DOM nodes with createElement and text nodes
// only, never innerHTML, so whatever the model writes (tags, scripts, attributes) is shown as
// text: no HTML from the model reaches the page. Links keep only http(s) and mailto targets.
// Incomplete input (a stream mid-fence) renders as far as it goes.
"use strict";

const ZincMarkdown = (() => {
  const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
  const HEADING = /^ {0,3}(#{1,6})(?:\s+(.*?))?(?:\s+#+)?\s*$/;
  const HR = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
  const QUOTE = /^ {0,3}> ?(.*)$/;
  const ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:\s+(.*)|$)/;
  const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // A link target, or null when its scheme is not one we follow.
  function safeUrl(u) {
    try {
      const url = new URL(u, window.location.href);
      return ["http:", "https:", "mailto:"].includes(url.protocol) ? url.href : null;
    } catch (e) {
      return null;
    }
  }

  const INLINE = new RegExp([
    /(`+)([\s\S]*?[^`]|)\1(?!`)/.source,                  // 1,2 code span
    /\*\*(?=\S)([\s\S]*?\S)\*\*/.source,                   // 3 strong
    /(?<![\w])__(?=\S)([\s\S]*?\S)__(?![\w])/.source,      // 4 strong
    /~~(?=\S)([\s\S]*?\S)~~/.source,                        // 5 strikethrough
    /\*(?=[^\s*])([\s\S]*?[^\s*])\*/.source,                // 6 emphasis
    /(?<![\w])_(?=[^\s_])([\s\S]*?[^\s_])_(?![\w])/.source, // 7 emphasis
    /\[([^\]\n]*)\]\(\s*<?([^\s()<>]+)>?(?:\s+"[^"\n]*")?\s*\)/.source,  // 8,9 link
    /(https?:\/\/[^\s<>()]*[^\s<>().,;:!?'"*_~])/.source,  // 10 bare URL
    /(\\[\\`*_{}\[\]()#+\-.!~|>])/.source,                  // 11 backslash escape
    /(\n)/.source,                                          // 12 line break
  ].join("|"), "g");

  function inline(text, parent) {
    const re = new RegExp(INLINE.source, "g");
    let last = 0, m;
    while ((m = re.exec(text)) !== null) {
      if (m[0] === "") { re.lastIndex++; continue; }
      if (m.index > last) parent.append(text.slice(last, m.index));
      if (m[1] !== undefined) {
        let code = m[2];
        if (/^ .*[^ ] $/.test(code)) code = code.slice(1, -1);
        parent.append(el("code", null, code));
      } else if (m[3] !== undefined || m[4] !== undefined) {
        const s = el("strong"); inline(m[3] ?? m[4], s); parent.append(s);
      } else if (m[5] !== undefined) {
        const s = el("del"); inline(m[5], s); parent.append(s);
      } else if (m[6] !== undefined || m[7] !== undefined) {
        const s = el("em"); inline(m[6] ?? m[7], s); parent.append(s);
      } else if (m[8] !== undefined) {
        const href = safeUrl(m[9]);
        if (href) {
          const a = el("a"); a.href = href; a.target = "_blank"; a.rel = "noopener noreferrer";
          inline(m[8] || m[9], a); parent.append(a);
        } else {
          parent.append(m[0]);
        }
      } else if (m[10] !== undefined) {
        const href = safeUrl(m[10]);
        if (href) {
          const a = el("a", null, m[10]); a.href = href; a.target = "_blank";
          a.rel = "noopener noreferrer"; parent.append(a);
        } else {
          parent.append(m[0]);
        }
      } else if (m[11] !== undefined) {
        parent.append(m[11].slice(1));
      } else if (m[12] !== undefined) {
        parent.append(el("br"));
      }
      last = re.lastIndex;
    }
    if (last < text.length) parent.append(text.slice(last));
  }

  function codeBlock(lang, code) {
    const wrap = el("div", "code-block");
    const bar = el("div", "code-bar");
    bar.append(el("span", "code-lang", lang || "text"));
    const copy = el("button", "code-copy", "Copy");
    copy.type = "button";
    copy.addEventListener("click", () => {
      if (navigator.clipboard) navigator.clipboard.writeText(code).then(() => {
        copy.textContent = "Copied";
        setTimeout(() => { copy.textContent = "Copy"; }, 1200);
      }, () => {});
    });
    bar.append(copy);
    const pre = el("pre");
    const c = el("code", null, code);
    if (lang && /^[\w+#.-]+$/.test(lang)) c.className = "language-" + lang;
    pre.append(c);
    wrap.append(bar, pre);
    return wrap;
  }

  function splitRow(line) {
    let s = line.trim();
    if (s.startsWith("|")) s = s.slice(1);
    if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
    const cells = [];
    let cur = "";
    for (let i = 0; i < s.length; i++) {
      if (s[i] === "\\" && s[i + 1] === "|") { cur += "|"; i++; }
      else if (s[i] === "|") { cells.push(cur.trim()); cur = ""; }
      else cur += s[i];
    }
    cells.push(cur.trim());
    return cells;
  }

  function table(lines) {
    const head = splitRow(lines[0]);
    const align = splitRow(lines[1]).map((c) =>
      c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : "");
    const t = el("table");
    const thead = el("thead"), tr = el("tr");
    head.forEach((h, i) => {
      const th = el("th"); if (align[i]) th.style.textAlign = align[i];
      inline(h, th); tr.append(th);
    });
    thead.append(tr); t.append(thead);
    const tbody = el("tbody");
    for (const line of lines.slice(2)) {
      const row = el("tr"), cells = splitRow(line);
      head.forEach((_, i) => {
        const td = el("td"); if (align[i]) td.style.textAlign = align[i];
        inline(cells[i] ?? "", td); row.append(td);
      });
      tbody.append(row);
    }
    t.append(tbody);
    const wrap = el("div", "table-wrap");
    wrap.append(t);
    return wrap;
  }

  function startsBlock(line, next) {
    return FENCE.test(line) || HEADING.test(line) || HR.test(line) || QUOTE.test(line) ||
      ITEM.test(line) || (line.includes("|") && next !== undefined && TABLE_RULE.test(next) &&
      next.includes("-"));
  }

  // Render lines into parent.
  function blocks(lines, parent) {
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if (line.trim() === "") { i++; continue; }
      if ((m = FENCE.exec(line))) {
        const fence = m[1], lang = m[2];
        const body = [];
        i++;
        while (i < lines.length) {
          const close = lines[i].match(/^ {0,3}(`{3,}|~{3,})\s*$/);
          if (close && close[1][0] === fence[0] && close[1].length >= fence.length) { i++; break; }
          body.push(lines[i]);
          i++;
        }
        parent.append(codeBlock(lang, body.join("\n")));
        continue;
      }
      if ((m = HEADING.exec(line))) {
        const h = el("h" + m[1].length);
        inline(m[2] || "", h);
        parent.append(h);
        i++;
        continue;
      }
      if (HR.test(line)) { parent.append(el("hr")); i++; continue; }
      if (QUOTE.test(line)) {
        const inner = [];
        while (i < lines.length && (m = QUOTE.exec(lines[i]))) { inner.push(m[1]); i++; }
        const q = el("blockquote");
        blocks(inner, q);
        parent.append(q);
        continue;
      }
      if ((m = ITEM.exec(line))) {
        const indent = m[1].length;
        const ordered = /\d/.test(m[2]);
        const list = el(ordered ? "ol" : "ul");
        if (ordered && parseInt(m[2], 10) !== 1) list.start = parseInt(m[2], 10);
        while (i < lines.length) {
          const im = ITEM.exec(lines[i]);
          if (!im || im[1].length !== indent || /\d/.test(im[2]) !== ordered) break;
          const content = [im[3] || ""];
          const pad = indent + im[2].length + 1;
          i++;
          // The item's further lines: indented past its marker, or a lazy continuation.
          while (i < lines.length) {
            const l = lines[i];
            if (l.trim() === "") {
              const n = lines[i + 1];
              if (n !== undefined && n.length - n.trimStart().length >= pad) {
                content.push(""); i++; continue;
              }
              break;
            }
            const ind = l.length - l.trimStart().length;
            const sub = ITEM.exec(l);
            if (ind >= pad || (sub && ind > indent)) {
              content.push(l.slice(Math.min(ind, pad))); i++; continue;
            }
            if (!sub && !startsBlock(l, lines[i + 1]) && content[content.length - 1] !== "") {
              content.push(l.trim()); i++; continue;
            }
            break;
          }
          const li = el("li");
          if (content.length === 1 || !content.slice(1).some((c) => startsBlock(c) || c === "")) {
            inline(content.join("\n"), li);
          } else {
            blocks(content, li);
          }
          list.append(li);
          while (i < lines.length && lines[i].trim() === "" &&
                 ITEM.exec(lines[i + 1] || "")?.[1].length === indent) i++;
        }
        parent.append(list);
        continue;
      }
      if (line.includes("|") && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1]) &&
          lines[i + 1].includes("-")) {
        const rows = [line, lines[i + 1]];
        i += 2;
        while (i < lines.length && lines[i].includes("|") && lines[i].trim() !== "") {
          rows.push(lines[i]); i++;
        }
        parent.append(table(rows));
        continue;
      }
      const para = [line.trim()];
      i++;
      while (i < lines.length && lines[i].trim() !== "" && !startsBlock(lines[i], lines[i + 1])) {
        para.push(lines[i].trim());
        i++;
      }
      const p = el("p");
      inline(para.join("\n"), p);
      parent.append(p);
    }
  }

  /// Render Markdown `text` into a new <div class="md">.
  function render(text) {
    const root = el("div", "md");
    blocks(String(text).replace(/\r\n?/g, "\n").split("\n"), root);
    return root;
  }

  return { render, safeUrl };
})();
