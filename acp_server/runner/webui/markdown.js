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

// inline: `code`, **strong**, *em* / _em_, [text](url), bare http(s) URLs
const INLINE = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\*\*(.+?)\*\*|(?<![\w*])\*(?!\s)(.+?)\*(?!\w)|(?<!\w)_(?!\s)(.+?)_(?!\w)|\[([^\]]+)\]\(([^)\s]+)\)|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/;

export function inline(text, into) {
  let rest = text;
  while (rest) {
    const found = INLINE.exec(rest);
    if (!found) { into.append(document.createTextNode(rest)); break; }
    if (found.index) into.append(document.createTextNode(rest.slice(0, found.index)));
    rest = rest.slice(found.index + found[0].length);
    if (found[2] !== undefined) into.append(el("code", found[2]));
    else if (found[3] !== undefined) inline(found[3], into.appendChild(el("strong")));
    else if (found[4] !== undefined) inline(found[4], into.appendChild(el("em")));
    else if (found[5] !== undefined) inline(found[5], into.appendChild(el("em")));
    else if (found[6] !== undefined) into.append(link(found[6], found[7]));
    else into.append(link(found[8], found[8]));
  }
  return into;
}

function link(label, href) {
  const url = safeUrl(href);
  if (url === null) return document.createTextNode(`${label} (${href})`);
  const a = el("a", label);
  a.href = url;
  a.rel = "noopener noreferrer nofollow";
  a.target = "_blank";
  return a;
}

const BLOCK_START = /^(#{1,6}\s|```|~~~|>\s?|\s*([-*+]|\d+[.)])\s|\s*$)/;

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
