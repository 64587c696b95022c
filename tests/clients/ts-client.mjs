#!/usr/bin/env node
// An ACP client built on the official TypeScript SDK (@agentclientprotocol/sdk), used by
// tests/test_real_clients.py to drive a real `acp-server` over stdio.
//
// Usage: node ts-client.mjs CONFIG_JSON      (or @path/to/config.json)
//
// CONFIG = {
//   "server": {"command": "/path/python", "args": ["-m", "acp_server", ...], "env": {...}},
//   "cwd": "/absolute/workspace",                 // the session's cwd
//   "permission": "allow_once",                   // the option kind chosen for every permission request
//   "turns": [TURN, ...],                         // prompts on the first server process
//   "restart": {"turns": [TURN, ...],             // optional: new process on the same --db, loadSession, then these
//               "calls": [{"method": "session/list", "params": {"cwd": "$CWD"}}, ...]},  // then these requests
//                                                 // ("$SESSION" and "$CWD" stand for the session id and cwd)
//   "timeoutMs": 15000                            // per request
// }
// TURN = {"prompt": "text", "cancelOn": "agent_message_chunk"}   // cancelOn: send session/cancel after the
//                                                                   // first update of that kind in this turn, or
//                                                                   // "permission": when a permission question
//                                                                   // comes (which is then answered `cancelled`)
// The server command can also come from the environment: ACP_SERVER_COMMAND='["python", "-m", "acp_server", ...]'.
//
// It prints one JSON summary on stdout. Everything the SDK or this client finds wrong with what the
// server sent (SDK console errors and warnings, zod validation failures of the SDK's own schemas, also
// applied to responses, values those schemas would silently replace, skip or drop, frames the SDK
// rejected) lands in `problems`; error responses sent to the server are listed per process in
// `outgoingErrors`. The process exits 0 whenever it could print a summary, and the test decides.

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { Readable, Writable } from "node:stream";
import { format } from "node:util";

import * as acp from "@agentclientprotocol/sdk";

// The SDK's own generated zod schemas, used to check responses too (the SDK itself only parses
// incoming requests and notifications). Not in the package's exports map, hence the file URL.
const zodUrl = new URL("./node_modules/@agentclientprotocol/sdk/dist/v1/schema/zod.gen.js", import.meta.url);
const validate = await import(zodUrl.href);
const sdkVersion = JSON.parse(
  readFileSync(new URL("./node_modules/@agentclientprotocol/sdk/package.json", import.meta.url), "utf8"),
).version;

// --- problems: everything that must fail the test ---------------------------------------------

const problems = [];
const problem = (kind, detail) => problems.push({ kind, detail });
for (const level of ["error", "warn"]) {
  console[level] = (...args) => problem(`console.${level}`, format(...args));
}
process.on("unhandledRejection", (reason) => problem("unhandledRejection", String(reason?.stack ?? reason)));

// --- config -----------------------------------------------------------------------------------

let rawConfig = process.argv[2];
if (!rawConfig) {
  process.stderr.write("usage: ts-client.mjs CONFIG_JSON | @config.json\n");
  process.exit(2);
}
if (rawConfig.startsWith("@")) rawConfig = readFileSync(rawConfig.slice(1), "utf8");
const config = JSON.parse(rawConfig);
if (!config.server && process.env.ACP_SERVER_COMMAND) {
  const [command, ...args] = JSON.parse(process.env.ACP_SERVER_COMMAND);
  config.server = { command, args };
}
const timeoutMs = config.timeoutMs ?? 15000;
const permissionKind = config.permission ?? "allow_once";

// --- raw-vs-parsed comparison -----------------------------------------------------------------

// Paths where the SDK's parse of `raw` lost or changed something the server sent. Keys the parse
// adds (defaults) are fine; keys it drops, array items it skips and values it replaces are not.
function lostInParse(raw, parsed, path = "$") {
  if (raw === undefined) return [];
  if (Array.isArray(raw)) {
    if (!Array.isArray(parsed)) return [`${path}: array became ${JSON.stringify(parsed)}`];
    if (raw.length !== parsed.length) return [`${path}: ${raw.length} items became ${parsed.length}`];
    return raw.flatMap((item, i) => lostInParse(item, parsed[i], `${path}[${i}]`));
  }
  if (raw !== null && typeof raw === "object") {
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
      return [`${path}: object became ${JSON.stringify(parsed)}`];
    }
    return Object.keys(raw).flatMap((key) =>
      key in parsed ? lostInParse(raw[key], parsed[key], `${path}.${key}`) : [`${path}.${key}: dropped by the SDK schema`],
    );
  }
  if (raw !== parsed) return [`${path}: ${JSON.stringify(raw)} became ${JSON.stringify(parsed)}`];
  return [];
}

function check(schemaName, value, where) {
  const schema = validate[schemaName];
  const result = schema.safeParse(value);
  if (!result.success) {
    problem("schema", { where, schema: schemaName, issues: result.error.issues, value });
    return;
  }
  const lost = lostInParse(value, result.data);
  if (lost.length) problem("normalized", { where, schema: schemaName, lost });
}

const notificationSchemas = { "session/update": "zSessionNotification" };
const requestSchemas = {
  "session/request_permission": "zRequestPermissionRequest",
  "fs/read_text_file": "zReadTextFileRequest",
  "fs/write_text_file": "zWriteTextFileRequest",
};
const responseSchemas = {
  initialize: "zInitializeResponse",
  "session/new": "zNewSessionResponse",
  "session/load": "zLoadSessionResponse",
  "session/prompt": "zPromptResponse",
  "session/list": "zListSessionsResponse",
  "session/resume": "zResumeSessionResponse",
  "session/close": "zCloseSessionResponse",
  "session/delete": "zDeleteSessionResponse",
  "session/set_mode": "zSetSessionModeResponse",
  "session/set_config_option": "zSetSessionConfigOptionResponse",
};

// --- one server process -----------------------------------------------------------------------

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
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms: ${what}`)), timeoutMs);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const summary = {
  client: "@agentclientprotocol/sdk",
  sdkVersion,
  permissionRequests: [],
  fsReads: [],
  fsWrites: [],
  unexpectedRequests: [],
  processes: [],
  problems,
};

// A short label for each incoming frame, in arrival order: "session/update plan", "response session/new", ...
function frameLabel(message, methodsById) {
  if (!("method" in message)) return `${"error" in message ? "error" : "response"} ${methodsById.get(message.id)}`;
  if (message.method === "session/update") return `session/update ${message.params?.update?.sessionUpdate}`;
  return `${"id" in message ? "request" : "notification"} ${message.method}`;
}

function startServer(label) {
  const { command, args = [], env = {} } = config.server;
  const child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, ...env } });
  const proc = { label, stderr: "", exit: null, rawIncoming: {}, outgoingErrors: [], order: [], sent: [] };
  summary.processes.push(proc);
  child.stderr.on("data", (chunk) => {
    proc.stderr = (proc.stderr + chunk.toString("utf8")).slice(-4000);
  });
  const exited = new Promise((resolve) => {
    child.on("exit", (code, signal) => {
      proc.exit = { code, signal };
      resolve(proc.exit);
    });
  });
  child.on("error", (error) => problem("spawn", String(error)));

  const methodsById = new Map(); // our outgoing request ids -> method
  const base = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const incomingMethods = new Map(); // the server's request ids -> method
  const outgoing = new TransformStream({
    transform(message, controller) {
      if ("method" in message && "id" in message) methodsById.set(message.id, message.method);
      proc.sent.push(
        "method" in message
          ? `${"id" in message ? "request" : "notification"} ${message.method}`
          : `${"error" in message ? "error" : "response"} ${incomingMethods.get(message.id)}`,
      );
      if ("error" in message) {
        // The SDK (or our handlers) answered a server request with an error, or rejected a frame.
        proc.outgoingErrors.push(message);
        if (message.id === null) problem("sdk-rejected-frame", message);
      }
      controller.enqueue(message);
    },
  });
  outgoing.readable.pipeTo(base.writable).catch(() => {});
  const readable = tap(base.readable, (message) => {
    const key = "method" in message ? message.method : "(response)";
    proc.rawIncoming[key] = (proc.rawIncoming[key] ?? 0) + 1;
    proc.order.push(frameLabel(message, methodsById));
    if ("method" in message && "id" in message) incomingMethods.set(message.id, message.method);
    if ("method" in message) {
      const schema = ("id" in message ? requestSchemas : notificationSchemas)[message.method];
      if (schema) check(schema, message.params, `${label} ${message.method}`);
    } else {
      const method = methodsById.get(message.id);
      if ("error" in message) {
        if (!Number.isInteger(message.error?.code) || typeof message.error?.message !== "string") {
          problem("bad-error-object", { where: `${label} ${method}`, message });
        }
      } else if (responseSchemas[method]) {
        check(responseSchemas[method], message.result, `${label} ${method} response`);
      }
    }
  });

  const state = { updates: [], handled: 0 };
  const app = acp
    .client({ name: "acp-server real-client test (TypeScript SDK)" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      state.handled += 1;
      state.updates.push(params);
      state.onUpdate?.(params);
    })
    .onRequest(acp.methods.client.session.requestPermission, async ({ params, signal }) => {
      const option = params.options.find((o) => o.kind === permissionKind);
      const asked = {
        process: label,
        toolCallId: params.toolCall.toolCallId,
        title: params.toolCall.title ?? null,
        optionKinds: params.options.map((o) => o.kind),
        chosen: option?.optionId ?? null,
      };
      summary.permissionRequests.push(asked);
      if (state.cancelOnPermission) {
        // The user cancels the turn while the question is open: send session/cancel, and answer the
        // question `cancelled` as ACP asks of clients (after a moment, to see whether the server
        // withdraws it with $/cancel_request first, which aborts `signal`).
        state.cancelOnPermission();
        await new Promise((resolve) => {
          const timer = setTimeout(resolve, 300);
          signal.addEventListener("abort", () => {
            clearTimeout(timer);
            resolve();
          });
        });
        asked.chosen = null;
        asked.withdrawnByServer = signal.aborted;
        return { outcome: { outcome: "cancelled" } };
      }
      if (!option) return { outcome: { outcome: "cancelled" } };
      return { outcome: { outcome: "selected", optionId: option.optionId } };
    })
    .onRequest(acp.methods.client.fs.readTextFile, async ({ params }) => {
      summary.fsReads.push({ process: label, path: params.path, line: params.line ?? null, limit: params.limit ?? null });
      let text;
      try {
        text = await readFile(params.path, "utf8");
      } catch {
        throw acp.RequestError.resourceNotFound(params.path);
      }
      if (params.line != null || params.limit != null) {
        const start = Math.max((params.line ?? 1) - 1, 0);
        const lines = text.split("\n");
        text = lines.slice(start, params.limit != null ? start + params.limit : undefined).join("\n");
      }
      return { content: text };
    })
    .onRequest(acp.methods.client.fs.writeTextFile, async ({ params }) => {
      summary.fsWrites.push({ process: label, path: params.path, content: params.content });
      await mkdir(dirname(params.path), { recursive: true });
      await writeFile(params.path, params.content, "utf8");
      return {};
    })
    .onRequest("*", ({ method }) => {
      summary.unexpectedRequests.push({ process: label, method });
      throw acp.RequestError.methodNotFound(method);
    });

  const connection = app.connect({ readable, writable: outgoing.writable });
  const agent = connection.agent;

  async function request(method, params) {
    return withTimeout(agent.request(method, params), `${label} ${method}`);
  }

  async function initialize() {
    const response = await request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: false },
      clientInfo: { name: "acp-server-ts-sdk-test", title: "TS SDK test client", version: sdkVersion },
    });
    return response;
  }

  async function runTurn(sessionId, turn) {
    const start = state.updates.length;
    const record = { prompt: turn.prompt, stopReason: null, error: null, cancelled: false, cancelToResponseMs: null };
    let cancelSentAt = null;
    const cancel = () => {
      if (cancelSentAt !== null) return;
      cancelSentAt = Date.now();
      record.cancelled = true;
      agent.notify(acp.methods.agent.session.cancel, { sessionId }).catch((e) => problem("cancel", String(e)));
    };
    state.onUpdate = (params) => {
      if (turn.cancelOn && params.update.sessionUpdate === turn.cancelOn) cancel();
    };
    state.cancelOnPermission = turn.cancelOn === "permission" ? cancel : undefined;
    try {
      const response = await request(acp.methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text: turn.prompt }],
      });
      record.stopReason = response.stopReason;
    } catch (error) {
      record.error = { code: error.code ?? null, message: String(error.message ?? error), data: error.data ?? null };
    }
    if (cancelSentAt !== null) record.cancelToResponseMs = Date.now() - cancelSentAt;
    await settle();
    state.onUpdate = undefined;
    state.cancelOnPermission = undefined;
    Object.assign(record, describeUpdates(state.updates.slice(start)));
    return record;
  }

  async function close() {
    connection.close();
    child.stdin.end();
    const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
    await exited;
    clearTimeout(timer);
    proc.handledUpdates = state.handled;
  }

  return { proc, state, agent, request, initialize, runTurn, close };
}

// Let notification handlers that started before a response finish before reading what they recorded.
const settle = () => new Promise((resolve) => setImmediate(resolve));

function describeUpdates(notifications) {
  const updates = notifications.map((n) => n.update);
  const textOf = (kind) =>
    updates
      .filter((u) => u.sessionUpdate === kind && u.content?.type === "text")
      .map((u) => u.content.text)
      .join("");
  const toolCalls = {};
  for (const u of updates) {
    if (u.sessionUpdate !== "tool_call" && u.sessionUpdate !== "tool_call_update") continue;
    const call = (toolCalls[u.toolCallId] ??= { title: null, kind: null, statuses: [], contentTypes: [], rawOutput: null });
    if (u.title != null) call.title = u.title;
    if (u.kind != null) call.kind = u.kind;
    if (u.status != null) call.statuses.push(u.status);
    for (const c of u.content ?? []) call.contentTypes.push(c.type);
    if (u.rawOutput != null) call.rawOutput = u.rawOutput;
  }
  return {
    kinds: updates.map((u) => u.sessionUpdate),
    userText: textOf("user_message_chunk"),
    agentText: textOf("agent_message_chunk"),
    thoughtText: textOf("agent_thought_chunk"),
    toolCalls: Object.values(toolCalls),
    sessionIds: [...new Set(notifications.map((n) => n.sessionId))],
  };
}

// --- the scenario -----------------------------------------------------------------------------

async function main() {
  const first = startServer("first");
  try {
    summary.initialize = await first.initialize();
    const session = await first.request(acp.methods.agent.session.new, { cwd: config.cwd, mcpServers: [] });
    summary.sessionId = session.sessionId;
    summary.newSession = session;
    summary.turns = [];
    for (const turn of config.turns ?? []) summary.turns.push(await first.runTurn(session.sessionId, turn));
  } finally {
    await first.close();
  }

  if (config.restart) {
    const second = startServer("second");
    try {
      summary.reinitialize = await second.initialize();
      const before = second.state.updates.length;
      const response = await second.request(acp.methods.agent.session.load, {
        sessionId: summary.sessionId,
        cwd: config.cwd,
        mcpServers: [],
      });
      await settle();
      summary.load = { response, ...describeUpdates(second.state.updates.slice(before)) };
      summary.afterRestart = [];
      for (const turn of config.restart.turns ?? []) {
        summary.afterRestart.push(await second.runTurn(summary.sessionId, turn));
      }
      summary.calls = [];
      for (const call of config.restart.calls ?? []) {
        const params = JSON.parse(
          JSON.stringify(call.params ?? {}).replaceAll('"$SESSION"', JSON.stringify(summary.sessionId)).replaceAll(
            '"$CWD"',
            JSON.stringify(config.cwd),
          ),
        );
        try {
          summary.calls.push({ method: call.method, result: await second.request(call.method, params) });
        } catch (error) {
          summary.calls.push({ method: call.method, error: { code: error.code ?? null, message: String(error.message) } });
        }
      }
    } finally {
      await second.close();
    }
  }
}

try {
  await main();
} catch (error) {
  problem("client-failure", String(error?.stack ?? error));
}
process.stdout.write(JSON.stringify(summary) + "\n", () => process.exit(0));
