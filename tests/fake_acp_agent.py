"""A small ACP agent for the tests of agents below acp-server: real JSON-RPC over stdio, its
sessions kept in a file (so a restarted agent can load them), and the misbehaviours of
released agents switched on by flags (see `main`). It answers every prompt with what it
remembers of the session, so a test can tell whether a restored session kept its memory.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

MODES = {
    "currentModeId": "default",
    "availableModes": [
        {"id": "default", "name": "Default", "description": "Asks before edits"},
        {"id": "plan", "name": "Plan", "description": "Plans, changes nothing"},
    ],
}


def config_options(model: str, fast: bool | None = None) -> list[dict[str, Any]]:
    boolean = [] if fast is None else [{"id": "fast", "name": "Fast mode", "type": "boolean", "currentValue": fast}]
    return [
        *boolean,
        {
            "id": "mode",
            "name": "Mode",
            "category": "mode",
            "type": "select",
            "currentValue": "default",
            "options": [{"value": "default", "name": "Default"}, {"value": "plan", "name": "Plan"}],
        },
        {
            "id": "model",
            "name": "Model",
            "category": "model",
            "type": "select",
            "currentValue": model,
            "options": [
                {"group": "fast", "name": "Fast", "options": [{"value": "small", "name": "Small"}]},
                {"value": "large", "name": "Large"},
            ],
        },
    ]


COMMANDS = [
    {"name": "compact", "description": "Compact the conversation"},
    {"name": "review", "description": "Review changes", "input": {"hint": "path"}},
]
# With --leaky: a mode and a command that carry secrets (redacted before the editor sees them).
LEAKY_KEY = "sk-proj-" + "L3akyModeK3y0123456789"
LEAKY_MODES = [
    {"id": LEAKY_KEY, "name": "Leaky", "description": "a mode named by a key"},
    {"id": "careful", "name": "Careful", "description": "uses password=hunter22 for the db"},
]
LEAKY_COMMAND = {"name": "deploy", "description": "deploy with ghp_" + "D3pl0yT0k3nAbCdEfGh1234", "input": {}}


def modes(leaky: bool) -> dict[str, Any]:
    listed = [*MODES["availableModes"], *LEAKY_MODES] if leaky else MODES["availableModes"]
    return {**MODES, "availableModes": listed}


class Agent:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.store = Path(args.store)
        self.sessions: dict[str, list[str]] = json.loads(self.store.read_text()) if self.store.exists() else {}
        self.lock = threading.Lock()
        self.cancels: dict[str, threading.Event] = {}
        self.cancelled_last: set[str] = set()
        self.stale: set[str] = set()  # sessions whose cancelled turn left its end behind
        self.authed = False
        self.model = "large"
        self.fast = False if args.boolean else None  # --boolean: a boolean option too
        self.next_id = 1000
        self.answers: dict[int, threading.Event] = {}
        self.results: dict[int, Any] = {}
        self.replayed = threading.Event()
        self.replayed.set()
        self.client_capabilities: dict[str, Any] = {}
        self.full_results: dict[int, dict[str, Any]] = {}  # answers with their errors (`ask_full`)
        self.instructions: dict[str, str] = {}  # session -> its systemPrompt, as "mode: text"

    def send(self, message: dict[str, Any]) -> None:
        with self.lock:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    def notify(self, sid: str, update: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}})

    def ask(self, method: str, params: dict[str, Any]) -> Any:
        return self.results.pop(self.asked(method, params), None)

    def ask_full(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The answer as a result or an error: {"result": ...} or {"error": ...}."""
        return self.full_results.pop(self.asked(method, params), {})

    def asked(self, method: str, params: dict[str, Any]) -> int:
        """Send a request and wait for its answer (up to 60 s); its id."""
        with self.lock:
            self.next_id += 1
            rid = self.next_id
            self.answers[rid] = threading.Event()
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        self.answers[rid].wait(60)
        return rid

    def save(self) -> None:
        self.store.write_text(json.dumps(self.sessions))

    def state(self) -> dict[str, Any]:
        if not self.args.modes:
            return {}
        return {"modes": modes(self.args.leaky), "configOptions": config_options(self.model, self.fast)}

    # --- methods -------------------------------------------------------------------------

    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        self.client_capabilities = params.get("clientCapabilities") or {}
        caps: dict[str, Any] = {"loadSession": not self.args.no_load, "promptCapabilities": {"image": True}}
        if self.args.resume:
            caps["sessionCapabilities"] = {"resume": {}, "close": {}}
        if self.args.fork:  # ACP unstable, as claude-agent-acp and codex-acp offer it
            caps["sessionCapabilities"] = {**caps.get("sessionCapabilities", {}), "fork": {}}
        if self.args.system_prompt:  # ACP unstable: append only
            caps["sessionCapabilities"] = {**caps.get("sessionCapabilities", {}), "systemPrompt": {}}
        result: dict[str, Any] = {
            "protocolVersion": 1,
            "agentCapabilities": caps,
            "agentInfo": {"name": self.args.name, "version": "1.0"},
        }
        if self.args.auth:
            result["authMethods"] = [{"id": "login", "name": "Log in", "description": "Opens a browser"}]
        if self.args.terminal_auth:  # as claude-agent-acp offers its `claude /login`
            result["authMethods"] = [*result.get("authMethods", []), TERMINAL_METHOD]
        if self.args.auth or self.args.terminal_auth:
            caps["auth"] = {"logout": {}}
        return result

    def authenticate(self, params: dict[str, Any]) -> dict[str, Any]:
        self.authed = params.get("methodId") == "login"
        return {}

    def logout(self, params: dict[str, Any]) -> dict[str, Any]:
        self.authed = False
        login_file(self.args.store).unlink(missing_ok=True)
        return {}

    def check_auth(self) -> None:
        """-32000 until authenticated (or logged in in a terminal, `--login`), as released agents do."""
        if (self.args.auth or self.args.terminal_auth) and not (self.authed or login_file(self.args.store).exists()):
            raise Failure(-32000, "Authentication required: log in first")

    def session_new(self, params: dict[str, Any]) -> Any:
        self.check_auth()
        sid = f"fake-{uuid.uuid4().hex[:8]}"
        self.sessions[sid] = []
        self.save()
        self.keep_system_prompt(sid, params)
        return {"sessionId": sid, **self.state()}

    def session_fork(self, params: dict[str, Any]) -> Any:
        """A new session remembering what the forked one did (its prompts so far)."""
        parent = params["sessionId"]
        if parent not in self.sessions:
            raise Failure(-32002, "Session not found")
        sid = f"fork-{uuid.uuid4().hex[:8]}"
        self.sessions[sid] = list(self.sessions[parent])
        self.save()
        self.keep_system_prompt(sid, params)
        return {"sessionId": sid, **self.state()}

    def keep_system_prompt(self, sid: str, params: dict[str, Any]) -> None:
        prompt = params.get("systemPrompt")
        if prompt is not None:
            text = "".join(block["text"] for block in prompt["content"])
            self.instructions[sid] = f"{prompt['mode']}: {text}"

    def session_load(self, params: dict[str, Any], *, replay: bool = True) -> Any:
        self.check_auth()
        sid = params["sessionId"]
        if sid not in self.sessions:
            raise Failure(-32002, "Session not found")
        if replay and not self.args.late_replay:
            self.replay(sid)
        return {**self.state()}

    def replay(self, sid: str) -> None:
        for prompt in self.sessions[sid]:
            self.notify(sid, {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": prompt}})
            self.notify(
                sid,
                {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"(replayed {prompt})"}},
            )

    def prompt(self, rid: int, params: dict[str, Any]) -> None:
        sid = params["sessionId"]
        text = "".join(block.get("text", "") for block in params["prompt"])
        try:
            self.check_auth()
        except Failure as exc:
            self.send({"jsonrpc": "2.0", "id": rid, "error": {"code": exc.code, "message": exc.message}})
            return
        if self.args.fail_after_cancel and sid in self.cancelled_last:
            self.cancelled_last.discard(sid)
            self.send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": "Internal error"}})
            return
        if sid in self.stale:  # as claude-agent-acp 0.23 does: the cancelled turn's end answers this one
            self.stale.discard(sid)
            self.send({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})
            return
        cancel = self.cancels.setdefault(sid, threading.Event())
        cancel.clear()
        self.replayed.wait(10)
        remembered = ", ".join(self.sessions.get(sid, [])) or "nothing"
        told = f" I was told to {self.instructions[sid]}." if sid in self.instructions else ""
        said: dict[str, Any] = {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": f"You said {text}; I remember {remembered}.{told}"},
        }
        self.notify(sid, said | ({"messageId": f"their-{len(self.sessions.get(sid, []))}"} if self.args.v1 else {}))
        if self.args.v1:
            self.newest_v1(sid)
        if text == "plan":
            self.plans(sid)
        if text.startswith(("fs/read_text_file ", "fs/write_text_file ")):
            self.files(sid, text)
        elif text.startswith("terminal "):
            self.terminal(sid, json.loads(text.split(" ", 1)[1]))
        elif text == "vendor fields":
            self.vendor_fields(sid)
        elif text.startswith("elicit "):
            self.elicit(sid, json.loads(text.split(" ", 1)[1]))
        elif "ask" in text:
            self.notify(
                sid,
                {
                    "sessionUpdate": "tool_call",
                    "toolCallId": "t1",
                    "title": "Run ls",
                    "kind": "execute",
                    "status": "pending",
                    "rawInput": {},
                },
            )
            answer = self.ask(
                "session/request_permission",
                {
                    "sessionId": sid,
                    "toolCall": {"toolCallId": "t1", "rawInput": {"command": "ls -la"}, "title": "Run ls -la"},
                    "options": [
                        {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
                        {"optionId": "always", "name": "Always", "kind": "allow_always"},
                        {"optionId": "no", "name": "No", "kind": "reject_once"},
                    ][1 if "no once" in text else 0 :],  # "ask, no once": an agent with no allow-once
                },
            )
            self.notify(
                sid,
                {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": f" answer={json.dumps(answer)}"},
                },
            )
            if " then terminal " in text:  # as fast-agent runs its execute call once allowed
                self.terminal(sid, json.loads(text.split(" then terminal ", 1)[1]))
        stop = "end_turn"
        if "slow" in text:
            self.notify(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": " working"}})
            if cancel.wait(60):
                stop = "cancelled"
                self.cancelled_last.add(sid)
                if self.args.stale_end_after_cancel:
                    self.stale.add(sid)
                if "late question" in text:  # a question after the cancel: someone must still answer it
                    answer = self.ask(
                        "session/request_permission",
                        {
                            "sessionId": sid,
                            "toolCall": {"toolCallId": "late", "title": "Late"},
                            "options": [{"optionId": "yes", "name": "Yes", "kind": "allow_once"}],
                        },
                    )
                    text += f" ({json.dumps(answer)})"
        self.sessions.setdefault(sid, []).append(text)
        self.save()
        self.send({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": stop}})

    def plans(self, sid: str) -> None:
        """A plan made and dropped: as plan operations to a client that takes them (ACP unstable),
        else as stable `plan`s."""
        entries = [{"content": "Look", "status": "in_progress", "priority": "high"}]
        if "plan" not in self.client_capabilities:
            self.notify(sid, {"sessionUpdate": "plan", "entries": entries})
            self.notify(sid, {"sessionUpdate": "plan", "entries": []})
            return
        plan = {"type": "items", "planId": "their-plan", "entries": entries}
        self.notify(sid, {"sessionUpdate": "plan_update", "plan": plan})
        markdown = {"type": "markdown", "planId": "their-notes", "content": "# Notes"}
        self.notify(sid, {"sessionUpdate": "plan_update", "plan": markdown})
        self.notify(sid, {"sessionUpdate": "plan_removed", "planId": "their-plan"})

    def newest_v1(self, sid: str) -> None:
        """ACP v1's newest stable fields, as an agent that has them sends them (`--v1`)."""
        thought = {"type": "text", "text": "Thinking."}
        self.notify(sid, {"sessionUpdate": "agent_thought_chunk", "content": thought, "messageId": "their-thought"})
        call = {"toolCallId": "v1", "title": "List files", "kind": "search", "status": "pending", "name": "list_dir"}
        self.notify(sid, {"sessionUpdate": "tool_call"} | call)
        self.notify(sid, {"sessionUpdate": "tool_call_update", "toolCallId": "v1", "status": "completed"})
        usage = {"used": 5000, "size": 200_000, "cost": {"amount": 0.5, "currency": "USD"}}
        self.notify(sid, {"sessionUpdate": "usage_update"} | usage)
        session = self.client_capabilities.get("session") or {}
        if "notices" in session:  # ACP: only to a client that advertised them
            self.notify(sid, {"sessionUpdate": "notice", "severity": "warning", "title": "Rate limit near"})
        if "compaction" in session:
            self.notify(sid, {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "in_progress"})
            piece = {"type": "text", "text": "Earlier: a greeting."}
            self.notify(sid, {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c1", "content": piece})
            done = {"compactionId": "c1", "status": "completed", "summary": [piece]}
            self.notify(sid, {"sessionUpdate": "compaction_update"} | done)

    def files(self, sid: str, text: str) -> None:
        """A prompt `fs/read_text_file PATH` or `fs/write_text_file PATH CONTENT`: a tool call
        naming PATH (and its diff), then the request with PATH exactly as given, and its answer
        (null for an error) told as text."""
        method, path, *content = text.split(" ", 2)
        call: dict[str, Any] = {"sessionUpdate": "tool_call", "toolCallId": f"fs-{uuid.uuid4().hex[:6]}"}
        call |= {"title": method, "kind": "edit" if content else "read", "locations": [{"path": path}]}
        if content:
            call["content"] = [{"type": "diff", "path": path, "oldText": None, "newText": content[0]}]
        self.notify(sid, call)
        params = {"sessionId": sid, "path": path} | ({"content": content[0]} if content else {})
        answer = self.ask(method, params)
        self.notify(
            sid,
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f" fs={json.dumps(answer)}"}},
        )

    def terminal(self, sid: str, spec: dict[str, Any]) -> None:
        """A prompt `terminal {"create": PARAMS, "then": [METHODS]}`: terminal/create with
        PARAMS (the session's id added), then each method on the terminal it named (default:
        wait_for_exit, output, release); every answer told as a line ` METHOD=ANSWER`."""
        created = self.ask_full("terminal/create", {"sessionId": sid, **spec["create"]})
        said = [f" terminal/create={json.dumps(created)}"]
        terminal_id = (created.get("result") or {}).get("terminalId")
        for method in spec.get("then", ["wait_for_exit", "output", "release"]) if terminal_id else []:
            answer = self.ask_full(f"terminal/{method}", {"sessionId": sid, "terminalId": terminal_id})
            said.append(f" terminal/{method}={json.dumps(answer)}")
        text = "\n" + "\n".join(said)
        self.notify(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})

    def vendor_fields(self, sid: str) -> None:
        """A tool call, its update and a plan carrying `_meta` keys and a vendor field of their own
        (`VENDOR`), and a `_meta` the schema does not allow (a string: never passed on)."""
        call = {"toolCallId": "v", "title": "Index", "kind": "search", "status": "pending"}
        self.notify(sid, {"sessionUpdate": "tool_call", **call, **VENDOR})
        done = {"toolCallId": "v", "status": "completed", "_meta": {"vendor.example/ms": 12, "key": LEAKY_KEY}}
        self.notify(sid, {"sessionUpdate": "tool_call_update", **done, "vendorNote": "cached"})
        entry = {"content": "Index the repo", "status": "completed", "priority": "high"}
        self.notify(sid, {"sessionUpdate": "plan", "entries": [entry], **VENDOR})
        self.notify(sid, {"sessionUpdate": "plan", "entries": [entry], "_meta": "not an object"})

    def elicit(self, sid: str, request: dict[str, Any]) -> None:
        """A prompt `elicit REQUEST`: elicitation/create with REQUEST (the session's id added), its
        answer told as ` elicitation=ANSWER`; for a URL, `elicitation/complete` after the answer."""
        answer = self.ask_full("elicitation/create", {"sessionId": sid, **request})
        if request.get("mode") == "url":
            self.send({"jsonrpc": "2.0", "method": "elicitation/complete", "params": {"elicitationId": "e-1"}})
        said = {"type": "text", "text": f" elicitation={json.dumps(answer)}"}
        self.notify(sid, {"sessionUpdate": "agent_message_chunk", "content": said})

    def close(self, params: dict[str, Any]) -> Any:
        self.stale.discard(params["sessionId"])
        return {}

    def set_mode(self, params: dict[str, Any]) -> Any:
        self.notify(params["sessionId"], {"sessionUpdate": "current_mode_update", "currentModeId": params["modeId"]})
        return {}

    def set_option(self, params: dict[str, Any]) -> Any:
        if params["configId"] == "model":
            self.model = params["value"]
        if params["configId"] == "fast" and params.get("type") == "boolean" and isinstance(params["value"], bool):
            self.fast = params["value"]
        return {"configOptions": config_options(self.model, self.fast)}

    # --- the loop ------------------------------------------------------------------------

    def serve(self) -> None:
        handlers = {
            "initialize": self.initialize,
            "authenticate": self.authenticate,
            "logout": self.logout,
            "session/new": self.session_new,
            "session/load": self.session_load,
            "session/set_mode": self.set_mode,
            "session/set_config_option": self.set_option,
            "session/resume": lambda p: self.session_load(p, replay=False),
            "session/close": self.close,
            "session/fork": self.session_fork,
        }
        for line in sys.stdin:
            message = json.loads(line)
            method, rid = message.get("method"), message.get("id")
            if self.args.calls and method is not None:
                with open(self.args.calls, "a") as calls:
                    calls.write(json.dumps({"method": method, "params": message.get("params")}) + "\n")
            if method is None:
                self.full_results[rid] = {k: v for k, v in message.items() if k in ("result", "error")}
                self.results[rid] = message.get("result")
                self.answers.get(rid, threading.Event()).set()
            elif method == "session/cancel":
                self.cancels.setdefault(message["params"]["sessionId"], threading.Event()).set()
            elif method == "session/prompt":
                threading.Thread(target=self.prompt, args=(rid, message["params"]), daemon=True).start()
            elif method in handlers:
                self.answer(rid, method, handlers[method], message.get("params", {}))
            elif rid is not None:
                self.send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})

    def answer(self, rid: Any, method: str, handler: Any, params: dict[str, Any]) -> None:
        try:
            result = handler(params)
        except Failure as exc:
            self.send({"jsonrpc": "2.0", "id": rid, "error": {"code": exc.code, "message": exc.message}})
            return
        self.send({"jsonrpc": "2.0", "id": rid, "result": result})
        if method == "session/new" and self.args.modes:
            self.notify(
                result["sessionId"],
                {
                    "sessionUpdate": "available_commands_update",
                    "availableCommands": [*COMMANDS, LEAKY_COMMAND] if self.args.leaky else COMMANDS,
                },
            )
        if method == "session/load" and self.args.late_replay:
            # As Gemini does: most of the replay comes after the answer, a little later. A prompt
            # waits until it is out, so a client that does not wait for it sees it in the turn.
            self.replayed.clear()
            threading.Timer(0.1, self.late_replay, args=(params["sessionId"],)).start()

    def late_replay(self, sid: str) -> None:
        self.replay(sid)
        self.replayed.set()


VENDOR = {"_meta": {"vendor.example/trace": {"span": "abc", "depth": 2}}, "vendorHint": {"lane": "fast"}}

TERMINAL_METHOD = {
    "id": "fake-login",
    "name": "Log in in a terminal",
    "description": "Runs the fake agent's own login",
    "type": "terminal",
    "args": ["--login"],
    "env": {"FAKE_LOGIN_WHO": "terminal"},
}


def login_file(store: str) -> Path:
    """Where a terminal login (`--login`) leaves its mark for the agent run after it."""
    return Path(f"{store}.login")


def login(args: argparse.Namespace) -> None:
    """The terminal method: a line on the terminal, the mark (who, from the method's env), exit 0."""
    who = os.environ.get("FAKE_LOGIN_WHO", "nobody")
    login_file(args.store).write_text(json.dumps({"who": who, "argv": sys.argv[1:]}))
    print(f"Logged in as {who}.")


class Failure(Exception):
    def __init__(self, code: int, message: str) -> None:
        self.code, self.message = code, message


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True, help="file that keeps the sessions")
    parser.add_argument("--name", default="fake-agent", help="agentInfo.name")
    parser.add_argument("--pidfile", help="write this process's pid (and its orphan's) here")
    parser.add_argument("--linger", action="store_true", help="keep running after stdin EOF, ignore SIGTERM")
    parser.add_argument("--orphan", action="store_true", help="start a child in a session of its own")
    parser.add_argument("--no-load", action="store_true", help="offer no session/load")
    parser.add_argument("--resume", action="store_true", help="offer session/resume")
    parser.add_argument("--fork", action="store_true", help="offer session/fork (ACP unstable)")
    parser.add_argument("--system-prompt", action="store_true", help="offer systemPrompt, append mode (ACP unstable)")
    parser.add_argument("--late-replay", action="store_true", help="replay a load after answering it")
    parser.add_argument("--fail-after-cancel", action="store_true", help="fail the prompt after a cancel")
    parser.add_argument("--stale-end-after-cancel", action="store_true", help="end the prompt after a cancel at once")
    parser.add_argument("--calls", help="append each request and notification received to this file")
    parser.add_argument("--modes", action="store_true", help="offer modes, config options and commands")
    parser.add_argument("--boolean", action="store_true", help="with --modes: a boolean option (fast) too")
    parser.add_argument("--v1", action="store_true", help="send message ids, tool names and usage (newest v1)")
    parser.add_argument("--auth", action="store_true", help="require authenticate before session/new")
    parser.add_argument("--terminal-auth", action="store_true", help="require a terminal login (`--login`) first")
    parser.add_argument("--login", action="store_true", help="log in (the terminal method) and exit")
    parser.add_argument("--leaky", action="store_true", help="with --modes: a mode and a command carrying secrets")
    args = parser.parse_args()
    if args.login:
        login(args)
        return
    pids = [os.getpid()]
    if args.orphan:
        pids.append(subprocess.Popen(["sleep", "1000"], start_new_session=True).pid)
    if args.pidfile:
        Path(args.pidfile).write_text(" ".join(map(str, pids)))
    if args.linger:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    Agent(args).serve()
    if args.linger:
        threading.Event().wait()


if __name__ == "__main__":
    main()
