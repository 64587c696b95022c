#!/usr/bin/env node
// An ACP v2 client on the official TypeScript SDK's `experimental/v2` API, used by tests/test_v2.py
// to drive a real `acp-server` over stdio.
//
// Usage: node v2-client.mjs @path/to/config.json
//
// CONFIG = {
//   "server": {"command": "/path/python", "args": ["-m", "acp_server", ...], "env": {...}},
//   "cwd": "/absolute/workspace",
//   "session": "sess_…",            // optional: resume this session instead of creating one
//   "steps": [STEP, ...],
//   "timeoutMs": 15000
// }
// STEP = {"do": "new"}                                          session/new
//      | {"do": "prompt", "text": "…", "cancelOn": "permission" | "agent_message_chunk",
//         "permission": "allow_once" | "reject_once" | "cancelled"}   prompt, then read until idle
//      | {"do": "held", "text": "…", "then": "…"}                 prompt, then (once it streams) a second
//                                                              prompt held behind it, then session/cancel
//      | {"do": "sdkPrompt", "text": "…"}                        ActiveSession.prompt + readTextUntilIdle
//      | {"do": "resume", "replay": true|false}                  session/resume (replayFrom start or none)
//      | {"do": "request", "method": "…", "params": {…}}        any request ("$SESSION", "$CWD" replaced)
//      | {"do": "cancelTerminal"}                              terminal/cancel of the first terminal the
//                                                              last state listed, then read until a state
//                                                              without it (`alive`: its pid before/after)
//      | {"do": "backgroundEnds"}                              read until a state listing no background work
//      | {"do": "cancelToolCall", "text": "…"}                 prompt; once a tool call offers cancel,
//                                                              tool_call/cancel it, then read until idle
//      | {"do": "restart"}                                       a new server process (same arguments)
//
// It prints one JSON summary: every frame either side wrote (per process, for the schema check in
// pytest), what each step got, and `problems` (SDK console errors, rejections, timeouts).

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { format } from "node:util";

import * as acp from "@agentclientprotocol/sdk/experimental/v2";

const problems = [];
const problem = (kind, detail) => problems.push({ kind, detail });
for (const level of ["error", "warn"]) {
  console[level] = (...args) => problem(`console.${level}`, format(...args));
}
process.on("unhandledRejection", (reason) => problem("unhandledRejection", String(reason?.stack ?? reason)));

let raw = process.argv[2];
if (raw.startsWith("@")) raw = readFileSync(raw.slice(1), "utf8");
const config = JSON.parse(raw);
const timeoutMs = config.timeoutMs ?? 15000;
const summary = { processes: [], steps: [], problems };
let sessionId = config.session ?? null;

function tap(stream, onMessage) {
  return stream.pipeThrough(
    new TransformStream({
      transform(message, controller) {
        onMessage(message);
        controller.enqueue(message);
      },
    }),
  );
}

function withTimeout(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timeout: ${what}`)), timeoutMs);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function substitute(value) {
  return JSON.parse(JSON.stringify(value).replaceAll("$SESSION", sessionId ?? "").replaceAll("$CWD", config.cwd));
}

// One server process and one v2 connection to it, until `close`.
function connect(label) {
  const { command, args = [], env = {} } = config.server;
  const child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, ...env } });
  const proc = { label, frames: [], stderr: "" };
  summary.processes.push(proc);
  child.stderr.on("data", (chunk) => {
    proc.stderr = (proc.stderr + chunk.toString("utf8")).slice(-4000);
  });
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const base = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const outgoing = new TransformStream({
    transform(message, controller) {
      proc.frames.push({ from: "client", frame: message });
      controller.enqueue(message);
    },
  });
  outgoing.readable.pipeTo(base.writable).catch(() => {});
  const readable = tap(base.readable, (message) => proc.frames.push({ from: "server", frame: message }));

  const state = { updates: [], waiters: [], asked: [], permission: "allow_once", onAsk: null };
  const app = acp
    .client({ name: "acp-server v2 test" })
    .onNotification("session/update", ({ params }) => {
      state.updates.push(params.update);
      for (const waiter of [...state.waiters]) waiter(params.update);
    })
    .onRequest("session/request_permission", async ({ params }) => {
      state.asked.push(params);
      state.onAsk?.(params);
      if (state.permission === "cancelled") return { outcome: { outcome: "cancelled" } };
      const option = params.options.find((o) => o.kind === state.permission) ?? params.options[0];
      return { outcome: { outcome: "selected", optionId: option.optionId } };
    });
  let release;
  const done = new Promise((resolve) => {
    release = resolve;
  });
  const ready = new Promise((resolve, reject) => {
    app
      .connectWith({ readable, writable: outgoing.writable }, async (ctx) => {
        resolve(ctx);
        await done;
      })
      .catch(reject);
  });
  const until = (test, what) =>
    withTimeout(
      new Promise((resolve) => {
        const waiter = (update) => {
          if (test(update)) {
            state.waiters.splice(state.waiters.indexOf(waiter), 1);
            resolve(update);
          }
        };
        state.waiters.push(waiter);
      }),
      what,
    );
  const close = async () => {
    release();
    child.stdin.end();
    await withTimeout(exited, "server exit").catch((e) => problem("exit", String(e)));
  };
  return { ready, state, until, close };
}

const idle = (update) => update.sessionUpdate === "state_update" && update.state === "idle";
const isState = (update) => update.sessionUpdate === "state_update";

// The pid a command printed (`… & echo $!`) in a tool call's text content.
function printedPid(updates) {
  for (const u of updates) {
    for (const item of u.sessionUpdate === "tool_call_update" ? (u.content ?? []) : []) {
      const match = /^(\d+)$/m.exec(item?.content?.text ?? "");
      if (match) return Number(match[1]);
    }
  }
  return null;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function runStep(conn, ctx, step) {
  const { state, until } = conn;
  const mark = state.updates.length;
  const got = { do: step.do };
  if (step.do === "new") {
    const result = await ctx.request("session/new", { cwd: config.cwd, mcpServers: [] });
    sessionId = result.sessionId;
    got.result = result;
  } else if (step.do === "prompt") {
    state.permission = step.permission ?? "allow_once";
    state.onAsk = null;
    if (step.cancelOn === "permission") {
      state.onAsk = () => ctx.notify("session/cancel", { sessionId });
    } else if (step.cancelOn) {
      until((u) => u.sessionUpdate === step.cancelOn, "cancelOn").then(() =>
        ctx.notify("session/cancel", { sessionId }),
      );
    }
    const ended = until(idle, `idle after ${step.text}`);
    got.result = await withTimeout(
      ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text: step.text }] }),
      "prompt answer",
    );
    await ended;
  } else if (step.do === "held") {
    const prompt = (text) => ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
    const streaming = until((u) => u.sessionUpdate === "agent_message_chunk", "first turn streams");
    const first = prompt(step.text);
    await streaming;
    const second = prompt(step.then).then(
      (result) => ({ result }),
      (error) => ({ error: { code: error.code, message: error.message } }),
    );
    const ended = until(idle, "idle after the cancel");
    await ctx.notify("session/cancel", { sessionId });
    got.result = await withTimeout(first, "first prompt answer");
    got.held = await withTimeout(second, "held prompt answer");
    await ended;
    got.idles = state.updates.slice(mark).filter(idle).length;
  } else if (step.do === "sdkPrompt") {
    const session = await ctx.buildSession(config.cwd).start();
    sessionId = session.sessionId;
    got.result = await session.prompt(step.text);
    got.text = await withTimeout(session.readTextUntilIdle(), "readTextUntilIdle");
    session.dispose();
  } else if (step.do === "resume") {
    const params = { sessionId, cwd: config.cwd, mcpServers: [] };
    if (step.replay) params.replayFrom = { type: "start" };
    got.result = await ctx.request("session/resume", params);
  } else if (step.do === "cancelTerminal") {
    const listed = state.updates.filter(isState).at(-1)?.background ?? [];
    const terminalId = listed[0]?.terminalId;
    const pid = printedPid(state.updates);
    got.terminalId = terminalId;
    got.alive = { before: alive(pid) };
    const gone = until(
      (u) => isState(u) && Array.isArray(u.background) && !u.background.some((b) => b.terminalId === terminalId),
      "a state without the cancelled terminal",
    );
    got.result = await ctx.request("terminal/cancel", { sessionId, terminalId });
    await gone;
    got.alive.after = alive(pid);
    got.pid = pid;
  } else if (step.do === "backgroundEnds") {
    const listed = state.updates.filter(isState).at(-1)?.background ?? [];
    if (listed.length) await until((u) => isState(u) && u.background?.length === 0, "background work ends");
    got.pid = printedPid(state.updates);
  } else if (step.do === "cancelToolCall") {
    const offered = until((u) => u.sessionUpdate === "tool_call_update" && u.capabilities?.cancel, "cancel offered");
    const ended = until(idle, `idle after ${step.text}`);
    got.result = await ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text: step.text }] });
    const call = await offered;
    got.cancel = await ctx.request("tool_call/cancel", { sessionId, toolCallId: call.toolCallId });
    await ended;
  } else if (step.do === "request") {
    try {
      got.result = await ctx.request(step.method, substitute(step.params ?? {}));
    } catch (error) {
      got.error = { code: error.code, message: error.message };
    }
  }
  got.updates = state.updates.slice(mark);
  got.asked = state.asked.splice(0);
  return got;
}

async function main() {
  let conn = connect("first");
  let ctx = await conn.ready;
  summary.initialize = await ctx.request("initialize", {
    protocolVersion: 2,
    info: { name: "acp-server-v2-test", version: "0" },
    capabilities: {},
  });
  for (const step of config.steps) {
    if (step.do === "restart") {
      await conn.close();
      conn = connect("restarted");
      ctx = await conn.ready;
      await ctx.request("initialize", { protocolVersion: 2, info: { name: "t", version: "0" }, capabilities: {} });
      summary.steps.push({ do: "restart" });
      continue;
    }
    try {
      summary.steps.push(await runStep(conn, ctx, step));
    } catch (error) {
      problem("step", { step, error: String(error?.stack ?? error), code: error?.code });
      summary.steps.push({ do: step.do, failed: String(error) });
    }
  }
  summary.sessionId = sessionId;
  await conn.close();
}

await main().catch((error) => problem("main", String(error?.stack ?? error)));
process.stdout.write(`${JSON.stringify(summary)}\n`);
process.exit(0);
