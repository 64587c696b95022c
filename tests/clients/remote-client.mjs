#!/usr/bin/env node
// A remote ACP client on the official TypeScript SDK's experimental transports
// (`@agentclientprotocol/sdk/experimental/ws-client` and `.../http-client`), used by
// tests/test_remote_endpoint.py to drive a runner's `/acp` endpoint over real sockets.
//
// Usage: node remote-client.mjs CONFIG_JSON
// CONFIG = {
//   "transport": "ws" | "http",
//   "url": "http://127.0.0.1:PORT/acp",          // ws:// is derived for "ws"
//   "cwd": "/absolute/workspace",
//   "steps": [STEP, ...]                         // run in order
// }
// STEP = {"call": "session/new" | "session/prompt" | "session/list" | "session/load" | METHOD,
//         "params": {...}}                       // "$SESSION" in a string stands for the last session id,
//                                                // "$CWD" for cwd
//      | {"waitText": "..."}                     // until the agent text shown so far ends with this
// The token comes from the environment (ACP_TOKEN), never argv. Over WebSocket it is offered as the
// subprotocol `acp.bearer.<token>` beside `acp`, as a browser must (Node's WebSocket, like a
// browser's, cannot set headers); over HTTP it is `Authorization: Bearer`.
//
// Each finished step is also reported at once, as a line `step CALL` on stderr (so a test can act
// while this client is still attached, e.g. once its session/load is answered).
//
// Prints one JSON summary: every message received (raw, in order), our requests' methods by id,
// each step's result or error, and problems (SDK console errors, unhandled rejections).

import { format } from "node:util";

import * as acp from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";

const problems = [];
for (const level of ["error", "warn"]) {
  console[level] = (...args) => problems.push({ kind: `console.${level}`, detail: format(...args) });
}
process.on("unhandledRejection", (reason) => problems.push({ kind: "unhandledRejection", detail: String(reason) }));

const config = JSON.parse(process.argv[2]);
const token = process.env.ACP_TOKEN ?? "";
const timeoutMs = config.timeoutMs ?? 15000;

function open() {
  if (config.transport === "ws") {
    const url = config.url.replace(/^http/, "ws");
    return createWebSocketStream(url, { protocols: ["acp", `acp.bearer.${token}`] });
  }
  return createHttpStream(config.url, { headers: { Authorization: `Bearer ${token}` } });
}

const received = [];
const sent = {};
const base = open();
const readable = base.readable.pipeThrough(
  new TransformStream({
    transform(message, controller) {
      received.push(message);
      controller.enqueue(message);
    },
  }),
);
let outgoingController;
const outgoing = new TransformStream({
  start(controller) {
    outgoingController = controller;
  },
  transform(message, controller) {
    if ("method" in message && "id" in message) sent[String(message.id)] = message.method;
    controller.enqueue(message);
  },
});
// Ending `outgoing` closes the transport's writable: the WebSocket closes, the HTTP client sends DELETE.
const piped = outgoing.readable
  .pipeTo(base.writable)
  .catch((error) => problems.push({ kind: "write", detail: String(error) }));

const updates = [];
let onUpdate = () => {};
const shownText = () =>
  updates
    .filter((u) => u.update.sessionUpdate === "agent_message_chunk" && u.update.content?.type === "text")
    .map((u) => u.update.content.text)
    .join("");
const app = acp
  .client({ name: "acp-server remote endpoint test" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    updates.push(params);
    onUpdate();
  })
  .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
    const option = params.options.find((o) => o.kind === "allow_once");
    return option ? { outcome: { outcome: "selected", optionId: option.optionId } } : { outcome: { outcome: "cancelled" } };
  });
const connection = app.connect({ readable, writable: outgoing.writable });
const agent = connection.agent;

function withTimeout(promise, what) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), timeoutMs);
    }),
  ]);
}

let sessionId = null;
const substitute = (value) =>
  JSON.parse(JSON.stringify(value ?? {}).replaceAll("$SESSION", sessionId ?? "").replaceAll("$CWD", config.cwd));

const results = [];
const steps = [
  {
    call: "initialize",
    params: { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {}, clientInfo: { name: "remote-test", version: "0" } },
  },
  ...config.steps,
];
// {"waitText": "..."}: until the agent text shown so far ends with it. Over Streamable HTTP a
// session/load's answer comes on the connection's stream and its replay on the session's (the
// RFD's routing), so the answer can overtake the replay.
async function waitText(text) {
  await withTimeout(
    new Promise((resolve) => {
      onUpdate = () => shownText().endsWith(text) && resolve();
      onUpdate();
    }),
    `text ${JSON.stringify(text)}`,
  );
}

for (const step of steps) {
  if (step.waitText !== undefined) {
    await waitText(step.waitText).catch((error) => problems.push({ kind: "waitText", detail: String(error) }));
    continue;
  }
  try {
    const result = await withTimeout(agent.request(step.call, substitute(step.params)), step.call);
    if (result && typeof result.sessionId === "string") sessionId = result.sessionId;
    results.push({ call: step.call, result });
    process.stderr.write(`step ${step.call}\n`);
  } catch (error) {
    results.push({ call: step.call, error: { code: error?.code ?? null, message: String(error?.message ?? error), data: error?.data ?? null } });
  }
}
if (!config.keepOpen) {
  outgoingController.terminate();
  await withTimeout(piped, "close").catch((error) => problems.push({ kind: "close", detail: String(error) }));
}
process.stdout.write(JSON.stringify({ received, sent, results, updates, sessionId, problems }) + "\n");
process.exit(0);
