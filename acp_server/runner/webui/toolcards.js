// Tool calls as cards, one per toolCallId, updated in place: kind, title, status, text content,
// diffs, terminals and locations. Every string is set with textContent.

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}

export function newCard(id) {
  const card = el("article", undefined, "tool");
  card.dataset.toolCallId = id;
  card.state = { toolCallId: id };
  return card;
}

export function updateCard(card, update) {
  const state = card.state;
  for (const [key, value] of Object.entries(update)) {
    if (value !== undefined && value !== null && key !== "sessionUpdate") state[key] = value;
  }
  card.replaceChildren(...cardParts(state));
  card.dataset.status = state.status || "pending";
}

function cardParts(state) {
  const head = el("header");
  head.append(el("span", state.kind || "other", "kind"), el("span", state.title || "tool", "tool-title"));
  head.append(el("span", state.status || "pending", "status status-" + (state.status || "pending")));
  const parts = [head];
  for (const item of state.content || []) parts.push(contentPart(item));
  if (state.locations && state.locations.length) {
    const list = el("ul", undefined, "locations");
    for (const where of state.locations) list.append(el("li", where.line ? `${where.path}:${where.line}` : where.path));
    parts.push(list);
  }
  return parts;
}

export function contentPart(item) {
  if (item.type === "diff") return diffPart(item);
  if (item.type === "terminal") return el("pre", `terminal ${item.terminalId}`, "terminal");
  const block = item.content || {};
  if (block.type === "text") return el("pre", block.text, "output");
  if (block.type === "resource_link") return el("p", block.uri, "resource");
  return el("p", `[${block.type || item.type}]`, "other");
}

function diffPart(diff) {
  const box = el("div", undefined, "diff");
  box.append(el("div", diff.path, "diff-path"));
  const pre = el("pre");
  const old = diff.oldText === null || diff.oldText === undefined ? [] : lines(diff.oldText);
  const now = lines(diff.newText || "");
  for (const line of unified(old, now)) pre.append(el("span", line, line[0] === "+" ? "add" : line[0] === "-" ? "del" : "same"));
  box.append(pre);
  return box;
}

function lines(text) {
  return text.replace(/\n$/, "").split("\n");
}

// a plain line diff: common head and tail kept, the middle shown as removed then added
function unified(old, now) {
  let head = 0;
  while (head < old.length && head < now.length && old[head] === now[head]) head++;
  let tail = 0;
  while (tail < old.length - head && tail < now.length - head && old[old.length - 1 - tail] === now[now.length - 1 - tail]) tail++;
  return [
    ...old.slice(Math.max(0, head - 2), head).map((l) => "  " + l),
    ...old.slice(head, old.length - tail).map((l) => "- " + l),
    ...now.slice(head, now.length - tail).map((l) => "+ " + l),
    ...old.slice(old.length - tail, old.length - tail + 2).map((l) => "  " + l),
  ];
}

// a permission question's view of its tool call: the diff or the command to approve
export function questionBody(toolCall) {
  const parts = [];
  for (const item of toolCall.content || []) parts.push(contentPart(item));
  const input = toolCall.rawInput;
  if (input && typeof input === "object" && typeof input.command === "string") parts.push(el("pre", input.command, "command"));
  else if (!parts.length && input !== undefined) parts.push(el("pre", JSON.stringify(input, null, 2), "command"));
  return parts;
}
