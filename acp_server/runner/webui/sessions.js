// The sessions view: every stored session (session/list, all pages), newest first, with its
// title, project directory, agent and state from the runner's `_meta["acp-server"]` ("waiting for
// you" while a question of it is open), and a filter. While shown, the states are asked again now
// and then (one session/list) and updated in place.

const REFRESH_MS = 5000;

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}

export async function listSessions(rpc) {
  const sessions = [];
  let cursor;
  do {
    const page = await rpc.call("session/list", cursor ? { cursor } : {});
    sessions.push(...page.sessions);
    cursor = page.nextCursor;
  } while (cursor);
  const when = (s) => Date.parse(s.updatedAt || "") || 0;
  return sessions.sort((a, b) => when(b) - when(a));
}

export function sessionsView(sessions, open, rpc) {
  const root = el("section", undefined, "sessions");
  const filter = el("input");
  filter.type = "search";
  filter.id = "filter";
  filter.placeholder = "Filter by title, folder or agent";
  filter.setAttribute("aria-label", "Filter sessions");
  const list = el("ul", undefined, "session-list");
  root.append(filter, list);
  const rows = sessions.map((session) => {
    const row = sessionRow(session, open);
    list.append(row);
    return { row, text: [session.title, session.cwd, meta(session).agent, session.sessionId].join(" ").toLowerCase() };
  });
  if (!sessions.length) list.append(el("li", "No sessions yet.", "empty"));
  if (rpc) keepFresh(rpc, root);
  filter.addEventListener("input", () => {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    for (const { row, text } of rows) row.hidden = !words.every((w) => text.includes(w));
  });
  return root;
}

function meta(session) {
  return (session._meta && session._meta["acp-server"]) || {};
}

function sessionRow(session, open) {
  const info = meta(session);
  const row = el("li", undefined, "session");
  row.dataset.sessionId = session.sessionId;
  const button = el("button", undefined, "open");
  button.type = "button";
  button.append(el("span", session.title || "Untitled session", "title"));
  const details = el("span", undefined, "details");
  details.append(el("span", session.cwd, "cwd"));
  if (info.agent) details.append(el("span", info.agent, "agent"));
  if (session.updatedAt) details.append(el("time", new Date(session.updatedAt).toLocaleString()));
  button.append(details);
  button.append(el("span", undefined, "chips"));
  button.addEventListener("click", () => open(session));
  row.append(button);
  showState(row, info);
  return row;
}

function showState(row, info) {
  const state = info.state || "idle";
  const chips = [el("span", state === "running" ? "running now" : state, "state state-" + state)];
  if (info.waiting) chips.push(el("span", "waiting for you", "waiting"));
  if (info.attached) chips.push(el("span", `${info.attached} watching`, "attached"));
  row.querySelector(".chips").replaceChildren(...chips);
}

// the list asks again while it is on screen and the tab is visible; rows are updated in place
function keepFresh(rpc, root) {
  const timer = setInterval(async () => {
    if (!root.isConnected) { clearInterval(timer); return; }
    if (document.hidden) return;
    const sessions = await listSessions(rpc).catch(() => []);
    for (const session of sessions) {
      const row = root.querySelector(`li.session[data-session-id="${CSS.escape(session.sessionId)}"]`);
      if (row) showState(row, meta(session));
    }
  }, REFRESH_MS);
}
