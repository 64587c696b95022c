// One session's transcript as an editor shows it: user and agent text as safe Markdown, thoughts
// collapsed, tool-call cards by toolCallId, the plan, usage. Fed `session/update`s in order,
// history and live alike; consecutive chunks of one kind join into one message.

import { render } from "./markdown.js";
import { newCard, updateCard } from "./toolcards.js";

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
    this.onTitle = () => {};
    this.loading = true;
  }

  loaded() {
    this.loading = false;
    this.flush();
    this.scrollSoon();
  }

  apply(update) {
    // while the history loads, no layout is read per update (that made opening a long session
    // quadratic); `loaded` scrolls to the end once
    const stick = !this.loading && this.atBottom();
    const kind = update.sessionUpdate;
    if (kind in MESSAGES) this.chunk(MESSAGES[kind], update.content);
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

  chunk(who, content) {
    const text = content && content.type === "text" ? content.text : content ? `[${content.type}]` : "";
    if (!this.current || this.current.who !== who) {
      this.current = { who, text: "", node: this.message(who) };
    }
    this.current.text += text;
    this.dirty.add(this.current);
    if (!this.frame) this.frame = requestAnimationFrame(() => this.flush());
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
    for (const message of this.dirty) message.node.replaceChildren(render(message.text));
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
