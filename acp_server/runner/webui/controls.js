// The controls of an open session (none for a read-only token): the message box with Send (a
// prompt sent while a turn runs waits behind it, shown as queued) and Cancel, and the permission
// questions the runner asks, each answered with the option the user picks.

import { questionBody } from "./toolcards.js";

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}

function button(label, className, onClick) {
  const b = el("button", label, className);
  b.type = "button";
  b.addEventListener("click", onClick);
  return b;
}

export class Composer {
  constructor(rpc, sessionId) {
    this.rpc = rpc;
    this.sessionId = sessionId;
    this.sent = [];  // our prompts not yet answered: the first one runs, the others are queued
    this.onStart = () => {};  // a prompt of ours starts its turn (the runner echoes it to the others)
    this.onError = () => {};
    this.root = el("form", undefined, "composer");
    this.queue = this.root.appendChild(el("ul", undefined, "queue"));
    this.box = this.root.appendChild(el("textarea"));
    this.box.id = "message";
    this.box.rows = 2;
    this.box.placeholder = "Message the agent (Enter sends, Shift+Enter new line, Esc cancels)";
    this.box.setAttribute("aria-label", "Message");
    const row = this.root.appendChild(el("div", undefined, "buttons"));
    row.append(button("Send", "send", () => this.send()), button("Cancel", "cancel", () => this.cancel()));
    this.root.addEventListener("submit", (event) => { event.preventDefault(); this.send(); });
    this.box.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) { event.preventDefault(); this.send(); }
    });
  }

  // a suggested reply (a HAUI `ask` action): in the box to edit or send, never sent by itself
  suggest(text) {
    this.box.value = text;
    this.box.focus();
  }

  // sent at once: the runner queues a prompt behind the running turn and answers it when its own ends
  send() {
    const text = this.box.value.trim();
    if (!text) return;
    this.box.value = "";
    const item = { text, node: el("li", "Queued: " + text, "queued") };
    this.sent.push(item);
    if (this.sent.length === 1) this.onStart(text);
    else this.queue.append(item.node);
    const params = { sessionId: this.sessionId, prompt: [{ type: "text", text }] };
    this.rpc.call("session/prompt", params).then(
      () => this.done(item),
      (error) => { this.done(item); this.onError(error); },
    );
  }

  done(item) {
    const first = this.sent[0] === item;
    this.sent = this.sent.filter((other) => other !== item);
    item.node.remove();
    if (first && this.sent.length) {
      this.sent[0].node.remove();
      this.onStart(this.sent[0].text);
    }
  }

  cancel() {
    this.rpc.notify("session/cancel", { sessionId: this.sessionId });
  }
}

export class Questions {
  constructor() {
    this.root = el("section", undefined, "questions");
    this.open = new Map();  // request id -> {node, resolve}
    this.onOpen = () => {};
  }

  // session/request_permission: resolves with the outcome the user picks
  ask(id, params) {
    return new Promise((resolve) => {
      const tool = params.toolCall || {};
      const card = el("article", undefined, "question");
      card.setAttribute("role", "alertdialog");
      card.append(el("h2", tool.title || "The agent asks for permission"));
      card.append(...questionBody(tool));
      const options = card.appendChild(el("div", undefined, "options"));
      for (const option of params.options || []) {
        const choose = () => { this.close(id); resolve({ outcome: { outcome: "selected", optionId: option.optionId } }); };
        options.append(button(option.name, "option option-" + option.kind, choose));
      }
      this.open.set(id, { node: card, resolve });
      this.root.append(card);
      card.scrollIntoView({ block: "nearest" });
      this.onOpen(tool.title || "permission");
    });
  }

  // $/cancel_request: another connection answered first, or the turn ended
  withdraw(id) {
    const entry = this.open.get(id);
    if (!entry) return;
    this.close(id);
    entry.resolve({ outcome: { outcome: "cancelled" } });
  }

  close(id) {
    const entry = this.open.get(id);
    if (entry) entry.node.remove();
    this.open.delete(id);
  }
}
