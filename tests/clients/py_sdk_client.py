"""An ACP client built on the official Python SDK (PyPI `agent-client-protocol`, module `acp`), used by
tests/test_real_clients.py to drive a real `acp-server` over stdio.

Usage: python py_sdk_client.py CONFIG_JSON      (or @path/to/config.json)

The config and the printed JSON summary have the same shape as tests/clients/ts-client.mjs's (see
there). Everything the SDK or this client finds wrong with what the server sent (SDK log records of
WARNING and above, Python warnings, Pydantic validation failures of the SDK's own models, values those
models would silently drop, notifications that never reached the handler) lands in `problems`; the
process exits 0 whenever it could print a summary, and the test decides.

This file imports only the SDK (with its Pydantic) and the standard library, so it also runs from a venv
of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import time
import warnings
from importlib.metadata import version
from pathlib import Path
from typing import Any

import acp
from acp import schema
from acp.connection import StreamDirection, StreamEvent
from pydantic import BaseModel, ValidationError

problems: list[dict[str, Any]] = []


def problem(kind: str, detail: Any) -> None:
    problems.append({"kind": kind, "detail": detail})


class _ProblemHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += f": {type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
        problem(f"log.{record.levelname.lower()}", f"{record.name}: {text}")


logging.getLogger().addHandler(_ProblemHandler(level=logging.WARNING))
warnings.showwarning = lambda message, category, *_args, **_kw: problem("warning", f"{category.__name__}: {message}")

# --- raw-vs-parsed comparison ---------------------------------------------------------------------

NOTIFICATION_MODELS: dict[str, type[BaseModel]] = {"session/update": schema.SessionNotification}
REQUEST_MODELS: dict[str, type[BaseModel]] = {
    "session/request_permission": schema.RequestPermissionRequest,
    "fs/read_text_file": schema.ReadTextFileRequest,
    "fs/write_text_file": schema.WriteTextFileRequest,
}
RESPONSE_MODELS: dict[str, type[BaseModel]] = {
    "initialize": schema.InitializeResponse,
    "session/new": schema.NewSessionResponse,
    "session/load": schema.LoadSessionResponse,
    "session/prompt": schema.PromptResponse,
    "session/list": schema.ListSessionsResponse,
    "session/resume": schema.ResumeSessionResponse,
    "session/close": schema.CloseSessionResponse,
    "session/delete": schema.DeleteSessionResponse,
    "session/set_mode": schema.SetSessionModeResponse,
    "session/set_config_option": schema.SetSessionConfigOptionResponse,
}


def lost_in_parse(raw: Any, parsed: Any, path: str = "$") -> list[str]:
    """Paths where the model's view of `raw` lost or changed something (added defaults are fine)."""
    if isinstance(raw, list):
        if not isinstance(parsed, list):
            return [f"{path}: array became {parsed!r}"]
        if len(raw) != len(parsed):
            return [f"{path}: {len(raw)} items became {len(parsed)}"]
        return [lost for i, item in enumerate(raw) for lost in lost_in_parse(item, parsed[i], f"{path}[{i}]")]
    if isinstance(raw, dict):
        if not isinstance(parsed, dict):
            return [f"{path}: object became {parsed!r}"]
        return [
            lost
            for key, value in raw.items()
            for lost in (
                lost_in_parse(value, parsed[key], f"{path}.{key}")
                if key in parsed
                else [f"{path}.{key}: dropped by the SDK model"]
            )
        ]
    if raw != parsed or isinstance(raw, bool) != isinstance(parsed, bool):
        return [f"{path}: {raw!r} became {parsed!r}"]
    return []


def check(model: type[BaseModel], value: Any, where: str) -> None:
    try:
        parsed = model.model_validate(value if value is not None else {})
    except ValidationError as exc:
        problem("schema", {"where": where, "model": model.__name__, "errors": json.loads(exc.json()), "value": value})
        return
    dumped = parsed.model_dump(mode="json", by_alias=True, exclude_unset=True)
    lost = lost_in_parse(value if value is not None else {}, dumped)
    if lost:
        problem("normalized", {"where": where, "model": model.__name__, "lost": lost})


# --- one server process ---------------------------------------------------------------------------


class Recorder:
    """The SDK `Client`: answers the server's requests and records what it saw."""

    def __init__(self, summary: dict[str, Any], label: str, permission_kind: str) -> None:
        self.summary = summary
        self.label = label
        self.permission_kind = permission_kind
        self.updates: list[dict[str, Any]] = []  # {"sessionId", "update"} as the handler received them
        self.cancel_on_permission = None  # set by a turn with "cancelOn": "permission"
        self.turn_ended = asyncio.Event()
        self.answered = asyncio.Event()

    async def request_permission(self, options, session_id, tool_call, **kwargs):
        chosen = next((o for o in options if o.kind == self.permission_kind), None)
        asked = {
            "process": self.label,
            "toolCallId": tool_call.tool_call_id,
            "title": tool_call.title,
            "optionKinds": [o.kind for o in options],
            "chosen": chosen.option_id if chosen else None,
        }
        self.summary["permissionRequests"].append(asked)
        if self.cancel_on_permission is not None:
            # The user cancels the turn while the question is open: session/cancel, then answer the
            # question `cancelled` as ACP asks of clients, once the turn has ended (the TS client answers
            # when the server withdraws the question with $/cancel_request, which this SDK does not support).
            cancel, self.cancel_on_permission = self.cancel_on_permission, None
            await cancel()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.turn_ended.wait(), 1)
            asked["chosen"] = None
            chosen = None
            self.answered.set()
        if chosen is None:
            return schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=chosen.option_id)
        )

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(
            {"sessionId": session_id, "update": update.model_dump(mode="json", by_alias=True, exclude_unset=True)}
        )

    async def read_text_file(self, session_id, path, line=None, limit=None, **kwargs):
        self.summary["fsReads"].append({"process": self.label, "path": path, "line": line, "limit": limit})
        try:
            text = await asyncio.to_thread(Path(path).read_text, encoding="utf-8")
        except OSError:
            raise acp.RequestError.resource_not_found(path) from None
        if line is not None or limit is not None:
            start = max((line or 1) - 1, 0)
            lines = text.split("\n")
            text = "\n".join(lines[start : start + limit] if limit is not None else lines[start:])
        return schema.ReadTextFileResponse(content=text)

    async def write_text_file(self, session_id, path, content, **kwargs):
        self.summary["fsWrites"].append({"process": self.label, "path": path, "content": content})
        await asyncio.to_thread(Path(path).parent.mkdir, parents=True, exist_ok=True)
        await asyncio.to_thread(Path(path).write_text, content, encoding="utf-8")
        return schema.WriteTextFileResponse()


def describe_updates(notifications: list[dict[str, Any]]) -> dict[str, Any]:
    updates = [n["update"] for n in notifications]

    def text_of(kind: str) -> str:
        return "".join(
            u["content"]["text"]
            for u in updates
            if u["sessionUpdate"] == kind and u.get("content", {}).get("type") == "text"
        )

    calls: dict[str, dict[str, Any]] = {}
    for u in updates:
        if u["sessionUpdate"] not in ("tool_call", "tool_call_update"):
            continue
        call = calls.setdefault(
            u["toolCallId"], {"title": None, "kind": None, "statuses": [], "contentTypes": [], "rawOutput": None}
        )
        for key in ("title", "kind", "rawOutput"):
            if u.get(key) is not None:
                call[key] = u[key]
        if u.get("status") is not None:
            call["statuses"].append(u["status"])
        call["contentTypes"] += [c["type"] for c in u.get("content") or []]
    return {
        "kinds": [u["sessionUpdate"] for u in updates],
        "userText": text_of("user_message_chunk"),
        "agentText": text_of("agent_message_chunk"),
        "thoughtText": text_of("agent_thought_chunk"),
        "toolCalls": list(calls.values()),
        "sessionIds": sorted({n["sessionId"] for n in notifications}),
    }


class Server:
    """One `acp-server` process behind the SDK's `spawn_agent_process`."""

    def __init__(self, config: dict[str, Any], summary: dict[str, Any], label: str) -> None:
        self.config = config
        self.summary = summary
        self.label = label
        self.timeout = config.get("timeoutMs", 15000) / 1000
        self.client = Recorder(summary, label, config.get("permission", "allow_once"))
        self.proc: dict[str, Any] = {
            "label": label,
            "stderr": "",
            "exit": None,
            "rawIncoming": {},
            "outgoingErrors": [],
            "order": [],
            "sent": [],
        }
        summary["processes"].append(self.proc)
        self.methods_by_id: dict[Any, str] = {}  # our requests
        self.incoming_methods: dict[Any, str] = {}  # the server's requests
        self.raw_updates = 0
        self.on_update = None

    def frame_label(self, message: dict[str, Any]) -> str:
        """A short label per incoming frame, in arrival order: "session/update plan", "response session/new"."""
        if "method" not in message:
            return f"{'error' if 'error' in message else 'response'} {self.methods_by_id.get(message.get('id'))}"
        if message["method"] == "session/update":
            return f"session/update {(message.get('params') or {}).get('update', {}).get('sessionUpdate')}"
        return f"{'request' if 'id' in message else 'notification'} {message['method']}"

    def observe(self, event: StreamEvent) -> None:
        message = event.message
        if event.direction is StreamDirection.OUTGOING:
            if "method" in message and "id" in message:
                self.methods_by_id[message["id"]] = message["method"]
            self.proc["sent"].append(
                f"{'request' if 'id' in message else 'notification'} {message['method']}"
                if "method" in message
                else f"{'error' if 'error' in message else 'response'} {self.incoming_methods.get(message.get('id'))}"
            )
            if "error" in message:
                self.proc["outgoingErrors"].append(message)
                if message.get("id") is None:
                    problem("sdk-rejected-frame", message)
                elif message["error"].get("code") == -32601:
                    self.summary["unexpectedRequests"].append(
                        {"process": self.label, "method": self.incoming_methods.get(message["id"])}
                    )
            return
        if "method" in message and "id" in message:
            self.incoming_methods[message["id"]] = message["method"]
        key = message.get("method", "(response)")
        self.proc["rawIncoming"][key] = self.proc["rawIncoming"].get(key, 0) + 1
        self.proc["order"].append(self.frame_label(message))
        where = f"{self.label} {key}"
        if "method" in message:
            if key == "session/update":
                self.raw_updates += 1
            model = (REQUEST_MODELS if "id" in message else NOTIFICATION_MODELS).get(key)
            if model is not None:
                check(model, message.get("params"), where)
        else:
            method = self.methods_by_id.get(message.get("id"))
            error = message.get("error")
            if error is not None:
                if not isinstance(error.get("code"), int) or not isinstance(error.get("message"), str):
                    problem("bad-error-object", {"where": f"{self.label} {method}", "message": message})
            elif method in RESPONSE_MODELS:
                check(RESPONSE_MODELS[method], message.get("result"), f"{self.label} {method} response")

    async def __aenter__(self) -> Server:
        server = self.config["server"]
        self._stack = contextlib.AsyncExitStack()
        self.conn, self.process = await self._stack.enter_async_context(
            acp.spawn_agent_process(
                self.client,
                server["command"],
                *server.get("args", []),
                env={**os.environ, **server.get("env", {})},
                observers=[self.observe],
            )
        )
        self._stderr_task = asyncio.create_task(self._read_stderr())
        return self

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        while chunk := await self.process.stderr.read(4096):
            self.proc["stderr"] = (self.proc["stderr"] + chunk.decode("utf-8", "replace"))[-4000:]

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._stack.aclose()  # closes stdin, waits 2 s, then terminates
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._stderr_task, 5)
        self.proc["exit"] = {"code": self.process.returncode}
        self.proc["handledUpdates"] = len(self.client.updates)

    async def call(self, what: str, awaitable: Any) -> Any:
        return await asyncio.wait_for(awaitable, self.timeout)

    async def settle(self) -> None:
        """Wait until every session/update received so far reached the handler (or report it)."""
        # Generous: under a loaded CI machine the SDK's handler can lag by seconds; only a
        # notification that never arrives is reported, and that never ends the wait early.
        deadline = time.monotonic() + 30
        # raw_updates is counted by a synchronous observer in the SDK's receive loop; polling is simplest
        while len(self.client.updates) < self.raw_updates and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        missing = self.raw_updates - len(self.client.updates)
        if missing > 0:
            problem("undelivered", f"{self.label}: {missing} session/update notification(s) never reached the handler")
            self.raw_updates = len(self.client.updates)

    async def initialize(self) -> dict[str, Any]:
        response = await self.call(
            "initialize",
            self.conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=schema.ClientCapabilities(
                    fs=schema.FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=False
                ),
                client_info=schema.Implementation(
                    name="acp-server-py-sdk-test",
                    title="Python SDK test client",
                    version=version("agent-client-protocol"),
                ),
            ),
        )
        return response.model_dump(mode="json", by_alias=True, exclude_none=True)

    async def extra_call(self, call: dict[str, Any], session_id: str) -> dict[str, Any]:
        """One more request through the SDK's typed method for it (which validates the response)."""
        text = json.dumps(call.get("params", {}))
        params = json.loads(
            text.replace('"$SESSION"', json.dumps(session_id)).replace('"$CWD"', json.dumps(self.config["cwd"]))
        )
        conn = self.conn
        senders = {
            "session/list": lambda p: conn.list_sessions(cwd=p.get("cwd"), cursor=p.get("cursor")),
            "session/resume": lambda p: conn.resume_session(
                session_id=p["sessionId"], cwd=p["cwd"], mcp_servers=p.get("mcpServers")
            ),
            "session/close": lambda p: conn.close_session(session_id=p["sessionId"]),
            "session/set_mode": lambda p: conn.set_session_mode(session_id=p["sessionId"], mode_id=p["modeId"]),
            "session/set_config_option": lambda p: conn.set_config_option(
                config_id=p["configId"], session_id=p["sessionId"], value=p["value"]
            ),
        }
        try:
            result = await self.call(call["method"], senders[call["method"]](params))
        except acp.RequestError as exc:
            return {"method": call["method"], "error": {"code": exc.code, "message": str(exc)}}
        except ValidationError as exc:
            problem("schema", {"where": f"{self.label} {call['method']} response (SDK)", "errors": str(exc)})
            return {"method": call["method"], "error": {"code": None, "message": str(exc)}}
        dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True) if result is not None else {}
        return {"method": call["method"], "result": dumped}

    async def run_turn(self, session_id: str, turn: dict[str, Any]) -> dict[str, Any]:
        start = len(self.client.updates)
        record: dict[str, Any] = {
            "prompt": turn["prompt"],
            "stopReason": None,
            "error": None,
            "cancelled": False,
            "cancelToResponseMs": None,
        }
        cancel_on = turn.get("cancelOn")
        cancel_sent: list[float] = []

        async def cancel() -> None:
            if not cancel_sent:
                cancel_sent.append(time.monotonic())
                record["cancelled"] = True
                await self.conn.cancel(session_id=session_id)

        self.client.cancel_on_permission = cancel if cancel_on == "permission" else None
        self.client.turn_ended.clear()
        self.client.answered.clear()
        prompt = asyncio.create_task(
            self.call(
                "session/prompt",
                self.conn.prompt(
                    session_id=session_id, prompt=[schema.TextContentBlock(type="text", text=turn["prompt"])]
                ),
            )
        )
        if cancel_on and cancel_on != "permission":
            # Watch for the first update of that kind in this turn, then cancel.
            while not prompt.done():
                if any(n["update"]["sessionUpdate"] == cancel_on for n in self.client.updates[start:]):
                    await cancel()
                    break
                await asyncio.sleep(0.005)
        try:
            response = await prompt
            record["stopReason"] = response.stop_reason
        except acp.RequestError as exc:
            record["error"] = {"code": exc.code, "message": str(exc), "data": exc.data}
        if cancel_sent:
            record["cancelToResponseMs"] = round((time.monotonic() - cancel_sent[0]) * 1000)
        self.client.turn_ended.set()
        if cancel_on == "permission" and cancel_sent:
            await asyncio.wait_for(self.client.answered.wait(), 2)  # the late `cancelled` answer went out
        self.client.cancel_on_permission = None
        await self.settle()
        record.update(describe_updates(self.client.updates[start:]))
        return record


async def main(config: dict[str, Any], summary: dict[str, Any]) -> None:
    async with Server(config, summary, "first") as first:
        summary["initialize"] = await first.initialize()
        session = await first.call("session/new", first.conn.new_session(cwd=config["cwd"], mcp_servers=[]))
        summary["sessionId"] = session.session_id
        summary["newSession"] = session.model_dump(mode="json", by_alias=True, exclude_none=True)
        summary["turns"] = [await first.run_turn(session.session_id, turn) for turn in config.get("turns", [])]
    if config.get("restart") is not None:
        async with Server(config, summary, "second") as second:
            summary["reinitialize"] = await second.initialize()
            before = len(second.client.updates)
            response = await second.call(
                "session/load",
                second.conn.load_session(cwd=config["cwd"], session_id=summary["sessionId"], mcp_servers=[]),
            )
            await second.settle()
            summary["load"] = {
                "response": response.model_dump(mode="json", by_alias=True, exclude_none=True),
                **describe_updates(second.client.updates[before:]),
            }
            summary["afterRestart"] = [
                await second.run_turn(summary["sessionId"], turn) for turn in config["restart"].get("turns", [])
            ]
            summary["calls"] = [
                await second.extra_call(call, summary["sessionId"]) for call in config["restart"].get("calls", [])
            ]


def run() -> None:
    if len(sys.argv) != 2:
        sys.stderr.write("usage: py_sdk_client.py CONFIG_JSON | @config.json\n")
        sys.exit(2)
    raw = sys.argv[1]
    config = json.loads(Path(raw[1:]).read_text() if raw.startswith("@") else raw)
    if "server" not in config and os.environ.get("ACP_SERVER_COMMAND"):
        command, *args = json.loads(os.environ["ACP_SERVER_COMMAND"])
        config["server"] = {"command": command, "args": args}
    summary: dict[str, Any] = {
        "client": "agent-client-protocol",
        "sdkVersion": version("agent-client-protocol"),
        "permissionRequests": [],
        "fsReads": [],
        "fsWrites": [],
        "unexpectedRequests": [],
        "processes": [],
        "problems": problems,
    }
    try:
        asyncio.run(main(config, summary))
    except BaseException as exc:  # report, never crash without a summary
        problem("client-failure", f"{type(exc).__name__}: {exc}")
    sys.stdout.write(json.dumps(summary, default=str) + "\n")


if __name__ == "__main__":
    run()
