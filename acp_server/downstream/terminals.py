"""The terminals an agent below asks for (`terminal/*`), run as a built-in agent's commands are.

Each `terminal/create` is a tool call the editor shows, decided by our permission policy with
the same "always" rules (an agent that asked about the very command first is not asked about
twice), refused with a message the agent can read, then run through the sink: in the editor's
terminal or as a local process in the session's cwd, as `--terminal` says. The command line is
the one the user was asked about; a `cwd` outside the session's directories is refused. The sink
gives a command's output when it has ended: `terminal/output` says nothing yet before that.
`terminal/kill` (and `terminal/release` of a command still running) stops the command as a
cancelled turn would (its whole process group, or the editor's terminal killed and released).
"""

from __future__ import annotations

import logging
import os
import shlex
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from acp_server.downstream.updates import ToolCalls
from acp_server.protocol import methods
from acp_server.rpc.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND, RpcError
from adapters.base import CommandResult, Sink, ToolRefused, TurnCancelled
from adapters.events import TextContent
from adapters.paths import target

log = logging.getLogger(__name__)

Json = dict[str, Any]
SHELLS = frozenset({"sh", "bash", "zsh", "dash"})
TITLE_LIMIT = 80
KILLED = "Stopped by the agent (terminal/kill)"


@dataclass(slots=True)
class Terminal:
    """One command the agent started: its line, its tool call, and its result once it ended."""

    line: str
    tool_call_id: str
    limit: int | None
    ended: threading.Event = field(default_factory=threading.Event)
    result: CommandResult | None = None
    failure: BaseException | None = None
    stop: Callable[[], object] | None = None  # stops the command while it runs (from the sink)
    killed: bool = False

    def kill(self) -> None:
        self.killed = True
        if self.stop is not None and not self.ended.is_set():
            self.stop()


class Terminals:
    """The terminals of one turn, by the ids the agent was given."""

    def __init__(self, sink: Sink, tools: ToolCalls, *, roots: Sequence[str]) -> None:
        self._sink = sink
        self._tools = tools
        self._roots = tuple(roots)  # cwd first
        self._open: dict[str, Terminal] = {}
        self._lock = threading.Lock()

    def answer(self, method: str, params: Json) -> Json:
        if method == methods.TERMINAL_CREATE:
            return self.create(params)
        terminal = self._named(params)
        if method == methods.TERMINAL_OUTPUT:
            return _output(terminal)
        if method == methods.TERMINAL_WAIT_FOR_EXIT:
            terminal.ended.wait()
            return _exit_status(_ended(terminal))
        if not terminal.ended.is_set():  # terminal/kill, or a release of a command still running
            terminal.kill()
        if method == methods.TERMINAL_RELEASE:
            with self._lock:
                self._open.pop(str(params.get("terminalId")), None)
        return {}

    def create(self, params: Json) -> Json:
        """Decide on the command (blocks while the user is asked), start it, name its terminal."""
        line = self._line(params)
        tool_call_id = self._tools.allowed_command(line)
        if tool_call_id is None:
            title = line if len(line) <= TITLE_LIMIT else line[: TITLE_LIMIT - 3] + "..."
            raw = {"command": line}
            tool_call_id = self._sink.tool_call(f"`{title}`", kind="execute", name="terminal", raw_input=raw)
            decision = self._sink.request_permission(tool_call_id)
            if decision.cancelled:
                self._sink.tool_update(tool_call_id, status="failed")
                raise TurnCancelled("the permission question was cancelled")
            if not decision.allowed:
                why = decision.reason or "Permission denied by the user"
                self._sink.tool_update(tool_call_id, status="failed", content=(TextContent(why),))
                raise ToolRefused(f"Refused: the command `{line}` was not allowed ({why})")
            self._sink.tool_update(tool_call_id, status="in_progress")
        limit = params.get("outputByteLimit")
        terminal = Terminal(line, tool_call_id, limit if _count(limit) else None)
        terminal_id = f"terminal-{uuid.uuid4().hex[:12]}"
        with self._lock:
            self._open[terminal_id] = terminal
        threading.Thread(target=self._run, args=(terminal,), name="agent-terminal", daemon=True).start()
        return {"terminalId": terminal_id}

    def _run(self, terminal: Terminal) -> None:
        def stoppable(stop: Callable[[], object]) -> None:
            terminal.stop = stop
            if terminal.killed:  # killed before it started
                stop()

        try:
            result = self._sink.run_command(terminal.line, tool_call_id=terminal.tool_call_id, stoppable=stoppable)
        except TurnCancelled as exc:
            if not terminal.killed:
                terminal.failure = exc
                return
            terminal.result = CommandResult("", None, "SIGKILL")
            self._sink.tool_update(terminal.tool_call_id, status="failed", content=(TextContent(KILLED),))
        except BaseException as exc:
            terminal.failure = exc
            self._sink.tool_update(terminal.tool_call_id, status="failed", content=(TextContent(str(exc)),))
        else:
            terminal.result = result
            shown = () if result.terminal_id or not result.output.strip() else (TextContent(result.output),)
            self._sink.tool_update(
                terminal.tool_call_id,
                status="completed" if result.exit_code == 0 else "failed",
                content=shown or None,
                raw_output={"exitCode": result.exit_code, "signal": result.signal},
            )
        finally:
            terminal.ended.set()

    def _line(self, params: Json) -> str:
        """The command line to ask about and run: the agent's program and arguments (a shell's
        `-c` script as itself), entered into its `cwd` and given its `env` where it names them."""
        command, args = params.get("command"), cast(Any, params.get("args") or [])
        if not isinstance(command, str) or not command.strip():
            raise RpcError(INVALID_PARAMS, "Invalid params: command must be a non-empty string")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in cast(list[Any], args)):
            raise RpcError(INVALID_PARAMS, "Invalid params: args must be a list of strings")
        words = cast(list[str], args)
        if os.path.basename(command) in SHELLS and len(words) == 2 and words[0] in ("-c", "-lc"):
            line = words[1]
        else:
            line = shlex.join([command, *words]) if words else command
        env = _env(params.get("env"))
        if env:
            line = f"env {shlex.join(env)} {line}"
        where = self._where(params.get("cwd"))
        return line if where is None else f"cd {shlex.quote(where)} && {line}"

    def _where(self, cwd: Any) -> str | None:
        """The agent's `cwd` when it is not the session's own, refused outside the session's roots."""
        if cwd is None or not self._roots:
            return None
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            raise RpcError(INVALID_PARAMS, "Invalid params: cwd must be an absolute path")
        try:
            place = target(cwd, cwd=self._roots[0], roots=self._roots).path
        except ToolRefused:
            raise ToolRefused(f"Refused: {cwd} is outside the session's directories") from None
        return None if os.path.realpath(place) == os.path.realpath(self._roots[0]) else place

    def _named(self, params: Json) -> Terminal:
        with self._lock:
            terminal = self._open.get(str(params.get("terminalId")))
        if terminal is None:
            raise RpcError(RESOURCE_NOT_FOUND, "No such terminal (released, or of another turn)")
        return terminal


def _ended(terminal: Terminal) -> CommandResult:
    if terminal.failure is not None:
        if isinstance(terminal.failure, ToolRefused | TurnCancelled):
            raise terminal.failure
        raise ToolRefused(f"The command failed: {terminal.failure}")
    assert terminal.result is not None
    return terminal.result


def _output(terminal: Terminal) -> Json:
    if not terminal.ended.is_set():
        return {"output": "", "truncated": False}
    result = _ended(terminal)
    text, truncated = _tail(result.output, terminal.limit)
    return {"output": text, "truncated": truncated or result.truncated, "exitStatus": _exit_status(result)}


def _exit_status(result: CommandResult) -> Json:
    return {"exitCode": result.exit_code, "signal": result.signal}


def _tail(text: str, limit: int | None) -> tuple[str, bool]:
    """The last `limit` bytes of `text`, cut at a character boundary (the spec keeps the end)."""
    data = text.encode("utf-8")
    if limit is None or len(data) <= limit:
        return text, False
    return data[len(data) - limit :].decode("utf-8", errors="ignore"), True


def _env(value: Any) -> list[str]:
    pairs: list[str] = []
    for item in cast(list[Any], value) if isinstance(value, list) else []:
        entry = cast(Json, item) if isinstance(item, dict) else {}
        name, given = entry.get("name"), entry.get("value")
        if isinstance(name, str) and name.isidentifier() and isinstance(given, str):
            pairs.append(f"{name}={given}")
    return pairs


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
