"""What a turn's asks do on the editor side: permission, files, commands.

Files and commands go through the client when it advertised `fs.*` / `terminal`, otherwise
they run locally, confined to the session's roots (cwd plus additional directories): paths
that escape through `..`, symlinks or absolute paths are refused. Client errors, timeouts and
refusals become `ToolRefused` with a message the user can read.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from acp_server.protocol import methods
from acp_server.protocol.models import (
    CreateTerminalResult,
    ElicitationResult,
    PermissionResult,
    ReadTextFileResult,
    TerminalExit,
    TerminalOutputResult,
    parse,
)
from acp_server.rpc.errors import PeerClosedError, RequestTimeoutError, RpcError
from acp_server.rpc.peer import Peer
from acp_server.turns.mapping import tool_call_fields
from acp_server.turns.policy import PermissionMemory, always_key, decide
from adapters.base import CommandResult, PermissionDecision, ToolRefused, TurnCancelled
from adapters.events import (
    PermissionDecided,
    RuntimeEvent,
    TerminalContent,
    TextContent,
    ToolCallStarted,
    ToolCallUpdated,
)
from adapters.paths import confine

log = logging.getLogger(__name__)

Outcome = Literal["allowed", "rejected", "cancelled", "timed_out"]

CLIENT_TIMEOUT = 60.0
OUTPUT_LIMIT = 1 << 20
PR_SET_PDEATHSIG = 1

PERMISSION_OPTIONS = [
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject_always", "name": "Always reject", "kind": "reject_always"},
]


@dataclass(frozen=True, slots=True)
class ClientCapabilities:
    read_text_file: bool = False
    write_text_file: bool = False
    terminal: bool = False
    elicitation_form: bool = False

    @classmethod
    def from_wire(cls, caps: dict[str, Any]) -> ClientCapabilities:
        # Tolerant like the reference implementation: a malformed flag means "not offered".
        fs = caps.get("fs") if isinstance(caps.get("fs"), dict) else {}
        elicitation = caps.get("elicitation") if isinstance(caps.get("elicitation"), dict) else {}
        return cls(
            read_text_file=fs.get("readTextFile") is True,
            write_text_file=fs.get("writeTextFile") is True,
            terminal=caps.get("terminal") is True,
            elicitation_form=isinstance(elicitation.get("form"), dict),
        )


class ClientTools:
    """The `TurnServices` of one turn of one session."""

    def __init__(
        self,
        *,
        peer: Peer,
        client: ClientCapabilities,
        session_id: str,
        cwd: str,
        roots: tuple[str, ...],
        permissions: PermissionMemory,
        mode: Callable[[], str],
        emit: Callable[[RuntimeEvent], Awaitable[None]],
        permission_timeout: float | None = None,
        on_remember: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._peer = peer
        self._client = client
        self._session_id = session_id
        self._cwd = cwd
        self._roots = roots
        self._permissions = permissions
        self._mode = mode
        self._emit = emit
        self._permission_timeout = permission_timeout
        self._on_remember = on_remember

    async def _call(self, method: str, params: dict[str, Any], *, timeout: float | None = CLIENT_TIMEOUT) -> Any:
        try:
            return await self._peer.request(method, {"sessionId": self._session_id, **params}, timeout=timeout)
        except PeerClosedError:
            raise TurnCancelled("the client connection closed") from None
        except RequestTimeoutError as exc:
            raise ToolRefused(f"The editor did not answer in time ({exc})") from None
        except RpcError as exc:
            raise ToolRefused(f"The editor refused {method}: {exc.message}") from None

    def _absolute(self, path: str) -> str:
        return os.path.normpath(os.path.join(self._cwd, path))

    # --- permission ----------------------------------------------------------------------

    async def request_permission(self, tool: ToolCallStarted) -> PermissionDecision:
        """Decide by the policy; ask the user only when it says so. Every outcome is journaled."""
        verdict = decide(self._mode(), tool, self._permissions.decisions)
        if verdict != "ask":
            by = "remembered" if always_key(tool) in self._permissions.decisions else "policy"
            await self._emit(PermissionDecided(tool.tool_call_id, "allowed" if verdict == "allow" else "rejected", by))
            if verdict == "allow":
                return PermissionDecision(True)
            why = "an earlier \"always reject\"" if by == "remembered" else f"{self._mode()} mode"
            return PermissionDecision(False, reason=f"Refused by {why}")
        try:
            decision, outcome, option = await self._ask_user(tool)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._emit(PermissionDecided(tool.tool_call_id, "cancelled", "user"))
            raise
        await self._emit(PermissionDecided(tool.tool_call_id, outcome, "user", option))
        return decision

    async def _ask_user(self, tool: ToolCallStarted) -> tuple[PermissionDecision, Outcome, str | None]:
        fields = tool_call_fields(tool)
        fields.pop("status")
        params = {"sessionId": self._session_id, "toolCall": fields, "options": PERMISSION_OPTIONS}
        try:
            result = await self._peer.request(methods.REQUEST_PERMISSION, params, timeout=self._permission_timeout)
        except PeerClosedError:
            raise TurnCancelled("the client connection closed") from None
        except RequestTimeoutError:
            reason = f"No answer to the permission request within {self._permission_timeout:g} s, so it was denied"
            return PermissionDecision(False, reason=reason), "timed_out", None
        except RpcError as exc:
            reason = f"Denied: the editor refused to ask ({exc.message})"
            return PermissionDecision(False, reason=reason), "rejected", None
        answer = parse(PermissionResult, result).outcome
        if answer.outcome == "cancelled":
            cancelled = PermissionDecision(False, cancelled=True, reason="The permission request was cancelled")
            return cancelled, "cancelled", None
        option = answer.option_id
        if option not in {o["optionId"] for o in PERMISSION_OPTIONS}:
            log.warning("unknown permission option %r; treating it as a rejection", option)
            return PermissionDecision(False, reason="Denied: the editor chose an unknown option"), "rejected", option
        allowed = option.startswith("allow")
        if option.endswith("always"):
            self._permissions.decisions[always_key(tool)] = allowed
            if self._on_remember is not None:
                await self._on_remember()
        decision = PermissionDecision(allowed, remember=option.endswith("always"),
                                      reason=None if allowed else "Permission denied by the user")
        return decision, "allowed" if allowed else "rejected", option

    # --- questions -----------------------------------------------------------------------

    async def clarify(self, question: str, choices: tuple[str, ...], tool_call_id: str | None) -> str:
        """A form when the editor can show one, else the choices as permission options."""
        if self._client.elicitation_form:
            return await self._ask_form(question, choices, tool_call_id)
        if choices:
            return await self._ask_choices(question, choices, tool_call_id)
        raise ToolRefused("Cannot ask the user: this editor shows neither forms (elicitation) nor choices "
                          "for an open question")

    async def _ask_form(self, question: str, choices: tuple[str, ...], tool_call_id: str | None) -> str:
        answer: dict[str, Any] = {"type": "string", "title": "Answer"}
        if choices:
            answer["enum"] = list(choices)
        params: dict[str, Any] = {
            "message": question, "mode": "form",
            "requestedSchema": {"type": "object", "properties": {"answer": answer}, "required": ["answer"]},
        }
        if tool_call_id is not None:
            params["toolCallId"] = tool_call_id
        result = await self._call(methods.ELICITATION_CREATE, params, timeout=self._permission_timeout)
        reply = parse(ElicitationResult, result)
        if reply.action != "accept" or not isinstance((reply.content or {}).get("answer"), str):
            raise ToolRefused("The user declined to answer" if reply.action == "decline" else
                              "The question was dismissed without an answer")
        return str(reply.content["answer"])  # type: ignore[index]

    async def _ask_choices(self, question: str, choices: tuple[str, ...], tool_call_id: str | None) -> str:
        own_call = tool_call_id is None
        if own_call:
            tool_call_id = f"call_{uuid.uuid4().hex[:16]}"
            await self._emit(ToolCallStarted(tool_call_id, question, "think"))
        options = [{"optionId": f"choice_{n}", "name": choice, "kind": "allow_once"}
                   for n, choice in enumerate(choices)]
        options.append({"optionId": "skip", "name": "Skip", "kind": "reject_once"})
        params = {"toolCall": {"toolCallId": tool_call_id, "title": question, "kind": "think"}, "options": options}
        result = await self._call(methods.REQUEST_PERMISSION, params, timeout=self._permission_timeout)
        outcome = parse(PermissionResult, result).outcome
        picked = outcome.option_id if outcome.outcome == "selected" else None
        index = int(picked.removeprefix("choice_")) if picked and picked.startswith("choice_") else None
        if index is None or index >= len(choices):
            if own_call:
                await self._emit(ToolCallUpdated(tool_call_id, status="failed"))
            raise ToolRefused("The user skipped the question")
        if own_call:
            await self._emit(ToolCallUpdated(tool_call_id, status="completed",
                                             content=(TextContent(choices[index]),)))
        return choices[index]

    # --- files ---------------------------------------------------------------------------

    async def read_text_file(self, path: str, line: int | None, limit: int | None) -> str:
        if self._client.read_text_file:
            params: dict[str, Any] = {"path": self._absolute(path)}
            if line is not None:
                params["line"] = line
            if limit is not None:
                params["limit"] = limit
            return parse(ReadTextFileResult, await self._call(methods.FS_READ_TEXT_FILE, params)).content
        real = confine(path, cwd=self._cwd, roots=self._roots)
        text = await anyio.to_thread.run_sync(_read_local, real, path)
        if line is None and limit is None:
            return text
        lines = text.splitlines(keepends=True)
        start = max((line or 1) - 1, 0)
        return "".join(lines[start:start + limit] if limit is not None else lines[start:])

    def _refuse_in_read_only(self, what: str) -> None:
        # Whatever the agent asked or was told, read-only means no changes at all.
        if self._mode() == "read-only":
            raise ToolRefused(f"Refused: {what} is not allowed in read-only mode (change it with /mode)")

    async def write_text_file(self, path: str, content: str) -> str | None:
        self._refuse_in_read_only("writing files")
        old: str | None
        try:
            old = await self.read_text_file(path, None, None)
        except ToolRefused:
            old = None
        if self._client.write_text_file:
            await self._call(methods.FS_WRITE_TEXT_FILE, {"path": self._absolute(path), "content": content})
            return old
        real = confine(path, cwd=self._cwd, roots=self._roots)
        await anyio.to_thread.run_sync(_write_local, real, content)
        return old

    # --- commands ------------------------------------------------------------------------

    async def run_command(self, command: str, tool_call_id: str | None, timeout: float | None) -> CommandResult:
        self._refuse_in_read_only("running commands")
        if self._client.terminal:
            return await self._run_in_client_terminal(command, tool_call_id, timeout)
        return await _run_local(command, cwd=self._cwd, timeout=timeout)

    async def _run_in_client_terminal(self, command: str, tool_call_id: str | None,
                                      timeout: float | None) -> CommandResult:
        created = await self._call(methods.TERMINAL_CREATE, {
            "command": "/bin/sh", "args": ["-c", command], "cwd": self._cwd, "outputByteLimit": OUTPUT_LIMIT,
        })
        terminal_id = parse(CreateTerminalResult, created).terminal_id
        ref = {"terminalId": terminal_id}
        try:
            if tool_call_id is not None:
                await self._emit(ToolCallUpdated(tool_call_id, content=(TerminalContent(terminal_id),)))
            exit_status: TerminalExit | None = None
            with anyio.move_on_after(timeout):
                exit_status = parse(TerminalExit, await self._call(methods.TERMINAL_WAIT_FOR_EXIT, ref, timeout=None))
            if exit_status is None:
                await self._call(methods.TERMINAL_KILL, ref)
            output = parse(TerminalOutputResult, await self._call(methods.TERMINAL_OUTPUT, ref))
            status = exit_status or output.exit_status or TerminalExit()
            text = output.output if exit_status else output.output + f"\n[timed out after {timeout:g} s]"
            return CommandResult(text, status.exit_code, status.signal, output.truncated, terminal_id)
        except BaseException:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await self._call(methods.TERMINAL_KILL, ref)
            raise
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                try:
                    await self._call(methods.TERMINAL_RELEASE, ref)
                except (ToolRefused, TurnCancelled) as exc:
                    log.warning("terminal/release failed: %s", exc)


def _read_local(real: str, shown: str) -> str:
    try:
        with open(real, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        raise ToolRefused(f"No such file: {shown}") from None
    except IsADirectoryError:
        raise ToolRefused(f"{shown} is a directory") from None
    except OSError as exc:
        raise ToolRefused(f"Cannot read {shown}: {exc.strerror}") from None


def _write_local(real: str, content: str) -> None:
    try:
        os.makedirs(os.path.dirname(real), exist_ok=True)
        tmp = f"{real}.acp-{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(content)
        os.replace(tmp, real)
    except OSError as exc:
        raise ToolRefused(f"Cannot write {real}: {exc.strerror}") from None


async def _run_local(command: str, *, cwd: str, timeout: float | None) -> CommandResult:
    process = await asyncio.create_subprocess_shell(
        command, cwd=cwd, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent,
    )
    timed_out = False
    try:
        with anyio.move_on_after(timeout) as scope:
            output, _ = await process.communicate()
        timed_out = scope.cancelled_caught
    finally:
        if process.returncode is None:
            _kill_group(process.pid)
            with anyio.CancelScope(shield=True):
                output, _ = await process.communicate()
    truncated = len(output) > OUTPUT_LIMIT
    text = output[-OUTPUT_LIMIT:].decode("utf-8", errors="replace")
    if timed_out:
        text += f"\n[timed out after {timeout:g} s]"
    code = process.returncode
    sig = signal.Signals(-code).name if code is not None and code < 0 else None
    return CommandResult(text, None if sig else code, sig, truncated)


def _find_prctl() -> Any:
    try:
        return ctypes.CDLL(None).prctl
    except (OSError, AttributeError):
        return None  # not Linux: a command may outlive a server that was killed


_PRCTL = _find_prctl()


def _die_with_parent(parent: int = os.getpid()) -> None:
    """In the child between fork and exec, so as little as possible: a command must not
    outlive a server that was killed, or a crash could look like a tool that ran twice."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the server died before the line above took effect
            os._exit(137)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
