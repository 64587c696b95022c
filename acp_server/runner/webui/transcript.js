// One session's transcript as an editor shows it: user and agent text as safe Markdown, thoughts
// collapsed, tool-call cards by toolCallId, the plan, usage. Fed `session/update`s in order,
// history and live alike; consecutive chunks of one kind join into one message. A chunk with
// HAUI blocks in its `_meta` is drawn natively instead of its Markdown (haui.js). Only what is on
// screen is drawn: the history's text out of view waits, as a box of about its height, until it
// scrolls near (so a session of thousands of turns opens and scrolls like a short one).

import { render } from "./markdown.js";
import { newCard, updateCard } from "./toolcards.js";
import { drawBlocks, placeholder } from "./haui.js";

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}

const MESSAGES = { user_message_chunk: "user", agent_message_chunk: "agent", agent_thought_chunk: "thought" };

export class Transcript {
  constructor() {
    this.root = el("section", undefined, "transcript");
    this.root.setAttribute("aria-live", "polite");
    this.log = this.root.appendChild(el("div", undefined, "log"));
    this.plan = this.root.appendChild(el("ol", undefined, "plan"));
    this.plan.hidden = true;
    this.usage = el("span", "", "usage");
    this.cards = new Map();
    this.current = null;  // the message chunks are joining into
    this.dirty = new Set();
    this.pending = null;  // the placeholder of a HAUI fence still streaming
    this.waiting = new Map();  // a text part's node -> the part, until it comes near the view
    this.onTitle = () => {};
    this.onAsk = () => {};  // an `ask` action: its text goes to the message box
    this.loading = true;
    this.log.hidden = true;  // no layout of the history while it comes: drawn once it has all come
    this.note = this.root.insertBefore(el("p", "Loading the history…", "loading"), this.log);
  }

  loaded() {
    this.loading = false;
    this.lazyHistory();
    this.log.hidden = false;
    this.note.remove();
    this.scrollSoon();
  }

  // the history's text parts: the last screens drawn now (the view opens at the end), the rest
  // when they come within a screen of the view, each at an estimated height until then
  lazyHistory() {
    this.frame = 0;
    const parts = [...this.dirty].reverse();
    this.dirty.clear();
    let height = 0;
    const screens = 2 * window.innerHeight;
    for (const part of parts) {
      const estimate = estimateHeight(part.text);
      if (height < screens) {
        part.node.replaceChildren(render(part.text));
        height += estimate;
        continue;
      }
      part.node.style.minHeight = `${estimate}px`;
      this.waiting.set(part.node, part);
      this.observer().observe(part.node);
    }
    this.drainSoon();
  }

  // what waits is drawn in idle time too, nearest the end first, so scrolling far finds it drawn
  drainSoon() {
    if (!this.waiting.size) return;
    requestIdleCallback((deadline) => {
      const nodes = [...this.waiting.keys()].reverse();
      for (const node of nodes) {
        if (deadline.timeRemaining() < 3) break;
        this.draw(this.waiting.get(node));
      }
      this.drainSoon();
    });
  }

  observer() {
    if (!this.watcher) {
      this.watcher = new IntersectionObserver((entries) => {
        for (const entry of entries) {
          if (!entry.isIntersecting) continue;
          this.draw(this.waiting.get(entry.target));
        }
      }, { rootMargin: `${window.innerHeight}px 0px` });
    }
    return this.watcher;
  }

  draw(part) {
    if (this.waiting.delete(part.node)) {
      this.watcher.unobserve(part.node);
      part.node.style.minHeight = "";
    }
    part.node.replaceChildren(render(part.text));
  }

  apply(update) {
    // while the history loads, no layout is read per update (that made opening a long session
    // quadratic); `loaded` scrolls to the end once
    const stick = !this.loading && this.atBottom();
    const kind = update.sessionUpdate;
    if (kind in MESSAGES) this.chunk(MESSAGES[kind], update.content, update._meta);
    else if (kind === "tool_call" || kind === "tool_call_update") this.tool(update);
    else if (kind === "plan") this.showPlan(update.entries || []);
    else if (kind === "usage_update") this.showUsage(update);
    else if (kind === "session_info_update" && update.title) this.onTitle(update.title);
    if (stick) this.scrollSoon();
  }

  // our own prompt, as its turn starts: a message of its own, even right after another user message
  userMessage(text) {
    this.current = null;
    this.apply({ sessionUpdate: "user_message_chunk", content: { type: "text", text } });
  }

  chunk(who, content, meta) {
    const text = content && content.type === "text" ? content.text : content ? `[${content.type}]` : "";
    if (!this.current || this.current.who !== who) {
      this.current = { who, body: this.message(who), part: null };
    }
    const haui = who === "agent" && meta && meta["acp-server"] && meta["acp-server"].haui;
    if (haui) return this.blocks(haui);
    const message = this.current;
    if (!message.part) message.part = { text: "", node: message.body.appendChild(el("div", undefined, "md")) };
    message.part.text += text;
    this.dirty.add(message.part);
    if (!this.frame) this.frame = requestAnimationFrame(() => this.flush());
  }

  // a fence opened: a placeholder of fixed height until it closes; then its blocks, where the
  // reply stands by then (a tool call may have come between, as in the Markdown). The text after
  // them is a part of its own.
  blocks(haui) {
    const message = this.current;
    message.part = null;
    if (haui.opened) {
      if (!this.pending) this.pending = message.body.appendChild(placeholder());
      return;
    }
    const drawn = drawBlocks(haui.blocks, { ask: (text) => this.onAsk(text) });
    if (this.pending && this.pending.parentNode === message.body) this.pending.replaceWith(drawn);
    else {
      if (this.pending) this.pending.remove();
      message.body.append(drawn);
    }
    this.pending = null;
  }

  message(who) {
    if (who === "thought") {
      const details = this.log.appendChild(el("details", undefined, "thought"));
      details.append(el("summary", "Thought"));
      return details.appendChild(el("div", undefined, "body"));
    }
    const box = this.log.appendChild(el("div", undefined, "message " + who));
    box.append(el("div", who === "user" ? "You" : "Agent", "who"));
    return box.appendChild(el("div", undefined, "body"));
  }

  // markdown is drawn once per animation frame, however many deltas arrived
  flush() {
    this.frame = 0;
    if (this.loading) return;  // the history is drawn when it has all come (lazyHistory)
    for (const part of this.dirty) this.draw(part);
    this.dirty.clear();
  }

  tool(update) {
    let card = this.cards.get(update.toolCallId);
    if (!card) {
      card = newCard(update.toolCallId);
      this.cards.set(update.toolCallId, card);
      this.log.append(card);
      this.current = null;
    }
    updateCard(card, update);
  }

  showPlan(entries) {
    this.plan.replaceChildren(...entries.map((e) => el("li", e.content, "entry status-" + e.status)));
    this.plan.hidden = !entries.length;
  }

  showUsage(update) {
    const percent = update.size ? (100 * update.used) / update.size : 0;
    const share = update.size ? ` (${percent < 10 ? percent.toFixed(1) : Math.round(percent)}% of context)` : "";
    const cost = update.cost ? ` · ${update.cost.amount.toFixed(4)} ${update.cost.currency}` : "";
    this.usage.textContent = `${update.used.toLocaleString()} tokens${share}${cost}`;
  }

  atBottom() {
    const s = document.scrollingElement;
    return s.scrollHeight - s.scrollTop - s.clientHeight < 80;
  }

  scrollSoon() {
    requestAnimationFrame(() => window.scrollTo(0, document.scrollingElement.scrollHeight));
  }
}

// about the height a Markdown text takes: its lines, a long one wrapping every ~80 characters
function estimateHeight(text) {
  let lines = 1;
  for (const line of text.split("\n")) lines += Math.max(1, Math.ceil(line.length / 80));
  return lines * 22;
}
