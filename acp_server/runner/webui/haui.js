// HAUI blocks drawn natively from the `_meta["acp-server"].haui` the runner sends beside a fence's
// Markdown: neighbouring stats as one grid of metric cards, comparisons, key-value pairs, tables
// (number columns right-aligned), charts as SVG with a Chart/Table toggle over the same numbers,
// lists, notices, closed disclosures and actions. Every string is set with textContent; links only
// for http(s) URLs; markup only from createElement / createElementNS.

import { render, safeUrl } from "./markdown.js";

const SVG = "http://www.w3.org/2000/svg";
const ARROWS = { up: "▲", down: "▼", flat: "▶" };

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = text;
  if (className) node.className = className;
  return node;
}

function svg(tag, attributes) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, String(value));
  return node;
}

function button(label, className, onClick) {
  const b = el("button", label, className);
  b.type = "button";
  b.addEventListener("click", onClick);
  return b;
}

function titled(block, node) {
  if (!block.title) return node;
  const box = el("div", undefined, "haui-block");
  box.append(el("div", block.title, "haui-title"), node);
  return box;
}

// a fence still streaming: a box of fixed height, so the page does not jump, and never its JSON
export function placeholder() {
  const box = el("div", "Drawing…", "haui-pending");
  box.setAttribute("aria-busy", "true");
  return box;
}

export function drawBlocks(blocks, actions = {}) {
  const root = el("div", undefined, "haui");
  let grid = null;
  for (const block of blocks || []) {
    if (block.type === "stat") {
      if (!grid) grid = root.appendChild(el("div", undefined, "stat-grid"));
      grid.append(stat(block));
      continue;
    }
    grid = null;
    const drawn = drawOne(block, actions);
    if (drawn) {
      if (block.id) drawn.dataset.blockId = block.id;
      root.append(drawn);
    }
  }
  return root;
}

function drawOne(block, actions) {
  switch (block.type) {
    case "table": return titled(block, table(block.columns, block.rows, block.numeric, block.note));
    case "key_value": return titled(block, keyValue(block.items));
    case "comparison": return titled(block, comparison(block));
    case "chart": return chart(block);
    case "list": return titled(block, list(block));
    case "notice": return notice(block);
    case "disclosure": return disclosure(block, actions);
    case "actions": return titled(block, actionRow(block.actions, actions));
    case "text": { const box = el("div", undefined, "haui-text"); box.append(render(block.text || "")); return box; }
    default: return null;
  }
}

function stat(block) {
  const card = el("div", undefined, "stat");
  card.append(el("div", block.label, "stat-label"), el("div", block.value, "stat-value"));
  if (block.delta || block.trend) {
    const delta = [ARROWS[block.trend] || "", block.delta || ""].filter(Boolean).join(" ");
    card.append(el("div", delta, "stat-delta trend-" + (block.trend || "flat")));
  }
  if (block.caption) card.append(el("div", block.caption, "stat-caption"));
  return card;
}

function table(columns, rows, numeric, note) {
  const box = el("div", undefined, "haui-table table");
  const node = box.appendChild(el("table"));
  const head = node.appendChild(el("thead")).appendChild(el("tr"));
  const right = (n) => (numeric && numeric[n] ? "align-right" : undefined);
  columns.forEach((name, n) => head.append(el("th", name, right(n))));
  const body = node.appendChild(el("tbody"));
  for (const row of rows) {
    const tr = body.appendChild(el("tr"));
    columns.forEach((_, n) => tr.append(el("td", row[n] === null || row[n] === undefined ? "" : String(row[n]), right(n))));
  }
  if (note) box.append(el("div", note, "haui-note"));
  return box;
}

function keyValue(items) {
  const list = el("dl", undefined, "key-value");
  for (const [key, value] of items || []) list.append(el("dt", key), el("dd", value));
  return list;
}

function comparison(block) {
  if (block.rows) return table(["", ...block.labels], block.rows, null, null);
  const grid = el("div", undefined, "comparison");
  block.labels.forEach((label, n) => {
    const card = grid.appendChild(el("div", undefined, "option-card"));
    card.append(el("div", label, "option-label"));
    const points = card.appendChild(el("ul"));
    for (const point of (block.points || [])[n] || []) points.append(el("li", point));
  });
  return grid;
}

function number(value) {
  return value === null || value === undefined ? "" : String(value);
}

// the chart and its table hold the same numbers; the toggle shows one of them
function chart(block) {
  const figure = el("figure", undefined, "chart");
  if (block.title) figure.append(el("figcaption", block.title, "haui-title"));
  const toggle = figure.appendChild(el("div", undefined, "chart-toggle"));
  const picture = figure.appendChild(el("div", undefined, "chart-picture"));
  picture.append(plot(block), legend(block.series));
  const rows = block.labels.map((label, r) => [label, ...block.series.map((s) => number(s.values[r]))]);
  const numbers = table(["", ...block.series.map((s) => s.name)], rows, [false, ...block.series.map(() => true)], null);
  numbers.hidden = true;
  figure.append(numbers);
  const show = (asTable) => {
    picture.hidden = asTable;
    numbers.hidden = !asTable;
    chartButton.setAttribute("aria-pressed", String(!asTable));
    tableButton.setAttribute("aria-pressed", String(asTable));
  };
  const chartButton = button("Chart", "chart-view", () => show(false));
  const tableButton = button("Table", "table-view", () => show(true));
  toggle.append(chartButton, tableButton);
  show(false);
  return figure;
}

function plot(block) {
  const width = 320, height = 160, left = 34, bottom = 20, top = 8;
  const values = block.series.flatMap((s) => s.values).filter((v) => v !== null && Number.isFinite(v));
  const low = Math.min(0, ...values), high = Math.max(0, ...values);
  const span = high - low || 1;
  const y = (v) => top + (height - top - bottom) * (1 - (v - low) / span);
  const node = svg("svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "xMinYMid meet", role: "img", class: "chart-svg" });
  node.setAttribute("aria-label", block.title || "chart");
  node.append(svg("line", { x1: left, x2: width, y1: y(0), y2: y(0), class: "axis" }));
  for (const v of [high, low]) {
    const tick = node.appendChild(svg("text", { x: left - 4, y: y(v) + 4, "text-anchor": "end", class: "tick" }));
    tick.textContent = number(v);
  }
  const slot = (width - left) / Math.max(1, block.labels.length);
  block.labels.forEach((label, r) => {
    const text = node.appendChild(svg("text", { x: left + slot * (r + 0.5), y: height - 5, "text-anchor": "middle", class: "tick" }));
    text.textContent = label;
  });
  if (block.kind === "line") lines(node, block, slot, left, y);
  else bars(node, block, slot, left, y);
  return node;
}

function bars(node, block, slot, left, y) {
  const n = block.series.length;
  const barWidth = (slot * 0.8) / n;
  block.series.forEach((series, s) => {
    series.values.forEach((v, r) => {
      if (v === null || !Number.isFinite(v)) return;
      const x = left + slot * r + slot * 0.1 + barWidth * s;
      const bar = svg("rect", { x, y: Math.min(y(v), y(0)), width: barWidth, height: Math.abs(y(0) - y(v)), class: "series-" + s });
      bar.appendChild(svg("title")).textContent = `${series.name}, ${block.labels[r]}: ${number(v)}`;
      node.append(bar);
    });
  });
}

function lines(node, block, slot, left, y) {
  block.series.forEach((series, s) => {
    let points = [];
    const end = () => {
      if (points.length) node.append(svg("polyline", { points: points.join(" "), class: "line series-" + s }));
      points = [];
    };
    series.values.forEach((v, r) => {
      if (v === null || !Number.isFinite(v)) { end(); return; }
      const x = left + slot * (r + 0.5);
      points.push(`${x},${y(v)}`);
      const dot = node.appendChild(svg("circle", { cx: x, cy: y(v), r: 2.5, class: "series-" + s }));
      dot.appendChild(svg("title")).textContent = `${series.name}, ${block.labels[r]}: ${number(v)}`;
    });
    end();
  });
}

function legend(series) {
  const list = el("ul", undefined, "legend");
  series.forEach((s, n) => {
    const item = list.appendChild(el("li"));
    item.append(el("span", undefined, "swatch series-" + n), document.createTextNode(s.name));
  });
  return list;
}

function list(block) {
  const node = el(block.ordered ? "ol" : "ul", undefined, "haui-list");
  for (const item of block.items || []) {
    const li = node.appendChild(el("li"));
    li.append(el("span", item.text, "item-text"));
    if (item.detail) li.append(el("span", " — " + item.detail, "item-detail"));
    for (const tag of item.meta || []) li.append(el("span", tag, "tag"));
  }
  return node;
}

function notice(block) {
  const box = el("div", undefined, "notice tone-" + block.tone);
  box.setAttribute("role", block.tone === "error" || block.tone === "danger" ? "alert" : "note");
  const head = box.appendChild(el("div", undefined, "notice-head"));
  head.append(el("strong", block.label));
  if (block.title) head.append(document.createTextNode(" " + block.title));
  if (block.body) box.append(render(block.body));
  return box;
}

function disclosure(block, actions) {
  const details = el("details", undefined, "disclosure");  // closed until the user opens it
  details.append(el("summary", block.title));
  if (block.body) details.append(render(block.body));
  if (block.blocks && block.blocks.length) details.append(drawBlocks(block.blocks, actions));
  return details;
}

function host(url) {
  try { return new URL(url).host; } catch { return ""; }
}

function actionRow(items, actions) {
  const row = el("div", undefined, "actions");
  for (const item of items || []) {
    if (item.action === "open_url") row.append(openUrl(item));
    else if (item.action === "copy") row.append(copy(item));
    else if (item.action === "ask") {
      row.append(button(item.label, "ask", () => (actions.ask || (() => {}))(item.prompt)));
    }
  }
  return row;
}

function openUrl(item) {
  const url = safeUrl(item.url);
  if (url === null) return el("span", item.label, "refused-link");  // never a link: not http(s)
  const a = el("a", undefined, "open-url");
  a.href = url;
  a.rel = "noopener noreferrer nofollow";
  a.target = "_blank";
  a.append(el("span", item.label, "link-label"), el("span", host(url), "link-host"));
  return a;
}

// the preview is exactly what is copied: the same string, shown with its line breaks
function copy(item) {
  const box = el("div", undefined, "copy");
  const preview = el("pre", item.value, "copy-preview");
  const b = button(item.label || "Copy", "copy-button", async () => {
    try {
      await navigator.clipboard.writeText(item.value);
      b.textContent = "Copied";
    } catch {
      getSelection().selectAllChildren(preview);  // no clipboard here (plain http): selected to copy by hand
      b.textContent = "Selected: copy it";
    }
  });
  box.append(b, preview);
  return box;
}
