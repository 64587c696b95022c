#!/usr/bin/env node
// An ACP v2 client on the official TypeScript SDK's `experimental/v2` API, connected to a runner's
// `/acp` over WebSocket (`experimental/ws-client`) or Streamable HTTP (`experimental/http-client`,
// with "transport": "http"); used by
// tests/test_v2_runner.py beside a v1 stdio front on the same session.
//
// Usage: node v2-remote-client.mjs CONFIG_JSON   (the token in ACP_TOKEN, never argv)
// CONFIG = {"url": "http://127.0.0.1:PORT/acp", "transport": "ws" | "http", "cwd": "/abs", "sessionId": "sess_…", "steps": [STEP, ...]}
// STEP = {"do": "resume", "replay": true|false}     session/resume of sessionId (replayFrom start or none)
//      | {"do": "waitIdle"}                         until a turn that ran since the last step ends idle
//      | {"do": "prompt", "text": "…"}              session/prompt (answered at acceptance), then until idle
// Permission questions are answered allow_once. Each step done is reported at once on stderr as
// `step DO`. Prints one JSON summary: every message received (in order), our requests' methods by
// id, each step's result, the updates, and problems (SDK console errors, rejections, timeouts).

import { format } from "node:util";

import * as acp from "@agentclientprotocol/sdk/experimental/v2";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";

const problems = [];
for (const level of ["error", "warn"]) {
  console[level] = (...args) => problems.push({ kind: `console.${level}`, detail: format(...args) });
}
process.on("unhandledRejection", (reason) => problems.push({ kind: "unhandledRejection", detail: String(reason) }));

const config = JSON.parse(process.argv[2]);
const timeoutMs = config.timeoutMs ?? 60000;
const sessionId = config.sessionId;
const bearer = process.env.ACP_TOKEN ?? "";
const base =
  config.transport === "http"
    ? createHttpStream(config.url, { headers: { Authorization: `Bearer ${bearer}` } })
    : createWebSocketStream(config.url.replace(/^http/, "ws"), { protocols: ["acp", `acp.bearer.${bearer}`] });

const received = [];
const sent = {};
const readable = base.readable.pipeThrough(
  new TransformStream({
    transform(message, controller) {
      received.push(message);
      controller.enqueue(message);
    },
  }),
);
const outgoing = new TransformStream({
  transform(message, controller) {
    if ("method" in message && "id" in message) sent[String(message.id)] = message.method;
    controller.enqueue(message);
  },
});
// The SDK aborts the pipe as the connection ends (when we close it): that abort is no problem.
let closing = false;
const piped = outgoing.readable
  .pipeTo(base.writable)
  .catch((error) => closing && error?.name === "AbortError" || problems.push({ kind: "write", detail: String(error) }));

function withTimeout(promise, what) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), timeoutMs);
    }),
  ]);
}

const updates = [];
let onUpdate = () => {};
const app = acp
  .client({ name: "acp-server v2 remote test" })
  .onNotification("session/update", ({ params }) => {
    updates.push(params.update);
    onUpdate();
  })
  .onRequest("session/request_permission", async ({ params }) => {
    const option = params.options.find((o) => o.kind === "allow_once") ?? params.options[0];
    return { outcome: { outcome: "selected", optionId: option.optionId } };
  });

// Until an idle state_update that follows a `running` one shown after update number `mark`.
function idleAfter(mark, what) {
  return withTimeout(
    new Promise((resolve) => {
      onUpdate = () => {
        const since = updates.slice(mark);
        const ran = since.findIndex((u) => u.sessionUpdate === "state_update" && u.state === "running");
        if (ran >= 0 && since.slice(ran).some((u) => u.sessionUpdate === "state_update" && u.state === "idle")) resolve();
      };
      onUpdate();
    }),
    what,
  );
}

const results = [];
async function run(ctx) {
  results.push({ do: "initialize", result: await ctx.request("initialize", { protocolVersion: 2, info: { name: "v2-remote", version: "0" }, capabilities: {} }) });
  let mark = 0;
  for (const step of config.steps) {
    const got = { do: step.do };
    if (step.do === "resume") {
      const params = { sessionId, cwd: config.cwd, mcpServers: [] };
      if (step.replay) params.replayFrom = { type: "start" };
      got.result = await withTimeout(ctx.request("session/resume", params), "resume");
    } else if (step.do === "waitIdle") {
      await idleAfter(mark, "idle");
    } else if (step.do === "prompt") {
      const ended = idleAfter(updates.length, "prompt idle");
      got.result = await withTimeout(ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text: step.text }] }), "prompt");
      await ended;
    }
    mark = updates.length;
    results.push(got);
    process.stderr.write(`step ${step.do}\n`);
  }
}

let release;
const done = new Promise((resolve) => {
  release = resolve;
});
await app
  .connectWith({ readable, writable: outgoing.writable }, async (ctx) => {
    try {
      await run(ctx);
    } catch (error) {
      problems.push({ kind: "step", detail: String(error?.stack ?? error) });
    }
    closing = true; // our steps are done: the connection ends now
    release();
  })
  .catch((error) => problems.push({ kind: "connect", detail: String(error?.stack ?? error) }));
await done;
await outgoing.writable.close().catch(() => {});
await withTimeout(piped, "close").catch((error) => problems.push({ kind: "close", detail: String(error) }));
process.stdout.write(JSON.stringify({ received, sent, results, updates, problems }) + "\n");
process.exit(0);
