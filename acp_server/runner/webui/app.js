// The workbench: takes the pairing token from the URL fragment (then keeps it in sessionStorage
// and removes it from the address bar), speaks ACP over the runner's /acp WebSocket, and switches
// between the sessions view and one session's view. Nothing reaches the runner except ACP.

import { Rpc } from "./rpc.js";
import { listSessions, sessionsView } from "./sessions.js";
import { Transcript } from "./transcript.js";
import { Composer, Questions } from "./controls.js";
import { Options } from "./options.js";

const READ_ONLY_REFUSED = -32003;
const TITLE = "acp-server workbench";
const view = document.getElementById("view");
const heading = document.getElementById("heading");
const status = document.getElementById("status");
const back = document.getElementById("back");
let rpc;
let readOnly = false;
let current = null;  // {sessionId, transcript, questions, composer}

function takeToken() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const token = fragment.get("token");
  if (token) {
    sessionStorage.setItem("acp-token", token);
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("acp-token");
}

function say(text, className = "") {
  status.textContent = text;
  status.className = className;
}

async function start() {
  const token = takeToken();
  if (!token) {
    say("no token: open the address `acp-server pair` prints", "error");
    return;
  }
  rpc = new Rpc(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/acp`, token);
  rpc.onNotification = notified;
  rpc.onRequest = asked;
  rpc.onClose = () => say("disconnected: reload to reconnect", "error");
  try {
    await rpc.open();
    await rpc.call("initialize", {
      protocolVersion: 1,
      clientCapabilities: {},
      clientInfo: { name: "acp-server-workbench", title: "acp-server workbench", version: "1" },
    });
    readOnly = await isReadOnly();
  } catch (error) {
    say(`could not connect: ${error.message}`, "error");
    return;
  }
  say(readOnly ? "read-only" : "connected", readOnly ? "read-only" : "ok");
  document.body.classList.toggle("read-only", readOnly);
  await showSessions();
}

// a read-only token is refused anything but watching (-32003); asking to change the mode of no
// session tells which this token is, and changes nothing either way
async function isReadOnly() {
  try {
    await rpc.call("session/set_mode", { sessionId: "", modeId: "" });
  } catch (error) {
    return error.code === READ_ONLY_REFUSED && Boolean(error.data && error.data.readOnly);
  }
  return false;
}

async function showSessions() {
  if (current && !readOnly) await rpc.call("session/close", { sessionId: current.sessionId }).catch(() => {});
  current = null;
  back.hidden = true;
  heading.textContent = "Sessions";
  document.title = TITLE;
  const sessions = await listSessions(rpc);
  view.replaceChildren(sessionsView(sessions, openSession, rpc));
}

async function openSession(session) {
  const info = (session._meta && session._meta["acp-server"]) || {};
  const transcript = new Transcript();
  const questions = new Questions();
  current = { sessionId: session.sessionId, transcript, questions, composer: null, options: null };
  heading.textContent = session.title || "Untitled session";
  transcript.onTitle = (title) => { heading.textContent = title; };
  questions.onOpen = questionOpened;
  back.hidden = false;
  const bar = document.createElement("div");
  bar.className = "session-bar";
  const where = document.createElement("span");
  where.className = "cwd";
  where.textContent = [session.cwd, info.agent].filter(Boolean).join(" · ");
  bar.append(where, transcript.usage);
  const parts = [bar, transcript.root, questions.root];
  if (!readOnly) {
    current.options = new Options(rpc, session.sessionId);
    current.options.onError = (error) => say(`could not change the option: ${error.message}`, "error");
    bar.append(current.options.root);
    current.composer = new Composer(rpc, session.sessionId);
    current.composer.onStart = (text) => transcript.userMessage(text);
    current.composer.onError = (error) => say(`prompt failed: ${error.message}`, "error");
    const composer = current.composer;
    transcript.onAsk = (text) => composer.suggest(text);
    parts.push(current.composer.root);
  }
  view.replaceChildren(...parts);
  view.dataset.sessionId = session.sessionId;
  try {
    const loaded = await rpc.call("session/load", { sessionId: session.sessionId, cwd: session.cwd, mcpServers: [] });
    transcript.loaded();
    view.dataset.drawnLater = String(transcript.waiting.size);  // text parts left for later (off screen)
    if (current && current.options) current.options.show(loaded.configOptions);
    view.dataset.loaded = "true";
  } catch (error) {
    say(`could not open the session: ${error.message}`, "error");
  }
}

function notified(method, params) {
  if (method === "session/update" && current && params.sessionId === current.sessionId) {
    if (params.update.sessionUpdate === "config_option_update" && current.options) {
      current.options.show(params.update.configOptions);
    }
    current.transcript.apply(params.update);
  } else if (method === "$/cancel_request" && current) {
    current.questions.withdraw(params.requestId);
  }
}

function asked(method, params, id) {
  if (method === "session/request_permission" && current && params.sessionId === current.sessionId && !readOnly) {
    return current.questions.ask(id, params);
  }
  return new Promise(() => {});  // a question about a session not on screen waits for a client showing it
}

function questionOpened(what) {
  if (document.hidden) {
    document.title = `waiting for you — ${TITLE}`;
    if ("Notification" in window && Notification.permission === "granted") {
      new Notification("The agent is waiting for you", { body: what });
    }
  }
}

document.addEventListener("visibilitychange", () => {
  if (!document.hidden) document.title = current ? `${heading.textContent} — ${TITLE}` : TITLE;
});

document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && current && current.composer) current.composer.cancel();
});

back.addEventListener("click", () => showSessions());

start();
