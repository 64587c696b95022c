// A small, safe Markdown renderer: model and agent text becomes DOM nodes built with
// textContent, never HTML. Raw HTML stays text; links are made only for http: and https: URLs
// (anything else, `javascript:` included, is shown as plain text).

const SAFE = new Set(["http:", "https:"]);

export function safeUrl(href) {
  try {
    const url = new URL(href);
    return SAFE.has(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

function el(tag, text) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  return node;
}

// inline: `code`, **strong**, *em* / _em_, [text](url), bare http(s) URLs, backslash escapes,
// and the character references HAUI's Markdown uses (&amp; &lt; ...) shown as their characters
const INLINE = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\\([!-/:-@[-`{-~])|&(amp|lt|gt|quot|apos|#\d{1,7}|#[xX][0-9a-fA-F]{1,6});|\*\*(.+?)\*\*|(?<![\w*])\*(?!\s)(.+?)\*(?!\w)|(?<!\w)_(?!\s)(.+?)_(?!\w)|\[((?:\\.|[^\]\\])+)\]\(([^)\s]+)\)|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/;
const NAMED = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

function reference(name) {
  if (name in NAMED) return NAMED[name];
  const code = name[1] === "x" || name[1] === "X" ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
  return code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff) ? String.fromCodePoint(code) : "\uFFFD";
}

export function inline(text, into) {
  let rest = text;
  while (rest) {
    const found = INLINE.exec(rest);
    if (!found) { into.append(document.createTextNode(rest)); break; }
    if (found.index) into.append(document.createTextNode(rest.slice(0, found.index)));
    rest = rest.slice(found.index + found[0].length);
    if (found[2] !== undefined) into.append(el("code", found[2]));
    else if (found[3] !== undefined) into.append(document.createTextNode(found[3]));
    else if (found[4] !== undefined) into.append(document.createTextNode(reference(found[4])));
    else if (found[5] !== undefined) inline(found[5], into.appendChild(el("strong")));
    else if (found[6] !== undefined) inline(found[6], into.appendChild(el("em")));
    else if (found[7] !== undefined) inline(found[7], into.appendChild(el("em")));
    else if (found[8] !== undefined) into.append(link(found[8], found[9]));
    else into.append(link(found[10], found[10]));
  }
  return into;
}

function link(label, href) {
  const url = safeUrl(href);
  if (url === null) return inline(`${label} (${href})`, document.createElement("span"));
  const a = inline(label, el("a"));
  a.href = url;
  a.rel = "noopener noreferrer nofollow";
  a.target = "_blank";
  return a;
}

const BLOCK_START = /^(#{1,6}\s|```|~~~|>\s?|\s*([-*+]|\d+[.)])\s|\s*$)/;
const DELIMITER = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

// a table row's cells: split at each `|` not escaped with a backslash, outer pipes dropped
function cells(line) {
  const parts = line.trim().replace(/^\|/, "").replace(/(?<!\\)\|$/, "").split(/(?<!\\)\|/);
  return parts.map((cell) => cell.trim());
}

function table(lines, i, out) {
  const head = cells(lines[i]);
  const align = cells(lines[i + 1]).map((d) => (d.endsWith(":") ? (d.startsWith(":") ? "align-center" : "align-right") : ""));
  const node = el("table");
  const row = node.appendChild(el("thead")).appendChild(el("tr"));
  head.forEach((text, n) => { const th = inline(text, el("th")); if (align[n]) th.className = align[n]; row.append(th); });
  const body = node.appendChild(el("tbody"));
  i += 2;
  while (i < lines.length && lines[i].includes("|") && lines[i].trim()) {
    const tr = body.appendChild(el("tr"));
    const values = cells(lines[i++]);
    head.forEach((_, n) => { const td = inline(values[n] || "", el("td")); if (align[n]) td.className = align[n]; tr.append(td); });
  }
  const scroll = el("div", undefined);
  scroll.className = "table";
  scroll.append(node);
  out.append(scroll);
  return i;
}

export function render(text) {
  const out = document.createDocumentFragment();
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = /^(```|~~~)\s*([\w+-]*)/.exec(line);
    if (fence) {
      const body = [];
      i++;
      while (i < lines.length && !lines[i].startsWith(fence[1])) body.push(lines[i++]);
      i++;  // the closing fence (or the end while streaming)
      const pre = el("pre");
      const code = pre.appendChild(el("code", body.join("\n")));
      if (fence[2]) code.dataset.lang = fence[2];
      out.append(pre);
    } else if (line.includes("|") && i + 1 < lines.length && DELIMITER.test(lines[i + 1]) && lines[i + 1].includes("-")) {
      i = table(lines, i, out);
    } else if (/^#{1,6}\s/.test(line)) {
      const level = line.indexOf(" ");
      out.append(inline(line.slice(level + 1), el("h" + Math.min(level + 2, 6))));
      i++;
    } else if (/^>\s?/.test(line)) {
      const body = [];
      while (i < lines.length && /^>\s?/.test(lines[i])) body.push(lines[i++].replace(/^>\s?/, ""));
      const quote = el("blockquote");
      quote.append(render(body.join("\n")));
      out.append(quote);
    } else if (/^\s*([-*+]|\d+[.)])\s/.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const list = el(ordered ? "ol" : "ul");
      while (i < lines.length && /^\s*([-*+]|\d+[.)])\s/.test(lines[i])) {
        inline(lines[i++].replace(/^\s*([-*+]|\d+[.)])\s/, ""), list.appendChild(el("li")));
      }
      out.append(list);
    } else if (!line.trim()) {
      i++;
    } else {
      const body = [line];
      i++;
      while (i < lines.length && !BLOCK_START.test(lines[i])) body.push(lines[i++]);
      out.append(inline(body.join("\n"), el("p")));
    }
  }
  return out;
}
