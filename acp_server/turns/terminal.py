"""Where a turn's commands run: the editor's terminal or local processes, by `--terminal`
(`auto`: the editor's when it offered `terminal`; `editor`: only there; `local`: never there).

In the editor, the command gets a `terminal/create`d terminal (shaped for the client's quirks)
that is embedded in its tool call, waited for (up to the timeout, then killed), read, and always
released, also when the turn is cancelled. Locally it runs through `processes.run_local`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from acp_server.protocol import methods
from acp_server.turns import background
from acp_server.turns.background import Leftover
from acp_server.turns.client import EditorChannel
from acp_server.turns.descendants import Descendants
from acp_server.turns.placement import TerminalChoice
from acp_server.turns.processes import OUTPUT_LIMIT, Left, Output, run_local
from acp_server.turns.quirks import Quirks
from adapters.base import CommandResult, ToolRefused, TurnCancelled
from adapters.events import RuntimeEvent, TerminalContent, TerminalExited, ToolCallUpdated
from adapters.frozen import frozen

log = logging.getLogger(__name__)

CLEANUP_TIMEOUT = 5.0  # seconds for terminal/kill and terminal/release once the turn is over
STOPPED = "[stopped by the client]"


@frozen(kw_only=True)
class CommandRunner:
    channel: EditorChannel
    choice: TerminalChoice
    advertised: bool  # the editor advertised `terminal`
    quirks: Quirks
    cwd: str
    emit: Callable[[RuntimeEvent], Awaitable[None]]

    async def run(self, command: str, tool_call_id: str | None, timeout: float | None) -> CommandResult:
        if self.choice == "local" or (self.choice == "auto" and not self.advertised):
            return await self._run_local(command, tool_call_id, timeout)
        if not self.advertised:
            raise ToolRefused(
                "Commands run only in the editor's terminal (--terminal editor), "
                "and this editor did not offer one (no `terminal` client capability)"
            )
        return await self._run_in_editor(command, tool_call_id, timeout)

    async def _run_local(self, command: str, tool_call_id: str | None, timeout: float | None) -> CommandResult:
        """A local command, which a client may stop by its tool call (`background`); what it
        leaves running is the session's background work until it ends."""
        session_id = self.channel.session_id

        def left(processes: Descendants) -> None:
            leftover = Leftover(session_id, background.new_terminal_id(), command, self.cwd, processes, tool_call_id)
            background.left_running(leftover)

        watchers = background.live_watchers(session_id)
        if tool_call_id is None or not watchers:
            return await self._stoppable(command, tool_call_id, timeout, left, None)
        terminal_id = f"term-{os.urandom(6).hex()}"
        for watcher in watchers:
            await watcher.started(session_id, terminal_id, tool_call_id, command, self.cwd)

        async def output(chunk: bytes) -> None:
            for watcher in watchers:
                await watcher.output(session_id, terminal_id, chunk)

        result = await self._stoppable(command, tool_call_id, timeout, left, output)
        for watcher in watchers:
            await watcher.exited(session_id, terminal_id, result.exit_code, result.signal)
        return result

    async def _stoppable(
        self, command: str, tool_call_id: str | None, timeout: float | None, left: Left, output: Output | None
    ) -> CommandResult:
        with background.stoppable(self.channel.session_id, tool_call_id) as scope:
            return await run_local(command, cwd=self.cwd, timeout=timeout, left=left, output=output)
        assert scope.cancelled_caught  # only a client's tool_call/cancel gets here
        return CommandResult(STOPPED, None, "SIGKILL", False, stopped=True)

    def create_params(self, command: str) -> dict[str, Any]:
        """`terminal/create` params: the spec's program and arguments, or what a quirk needs."""
        if self.quirks.has("terminal_shell_command_line"):
            shaped: dict[str, Any] = {"command": command}  # the client adds the shell itself
        else:
            shaped = {"command": "/bin/sh", "args": ["-c", command]}
        return {**shaped, "cwd": self.cwd, "outputByteLimit": OUTPUT_LIMIT}

    async def _run_in_editor(self, command: str, tool_call_id: str | None, timeout: float | None) -> CommandResult:
        from acp_server.protocol.answers import Acknowledged  # pydantic: with the first answer
        from acp_server.protocol.models import CreateTerminalResult, TerminalExit, TerminalOutputResult

        created = await self.channel.ask(methods.TERMINAL_CREATE, self.create_params(command), CreateTerminalResult)
        terminal_id = created.terminal_id
        ref = {"terminalId": terminal_id}
        try:
            if tool_call_id is not None:
                await self.emit(ToolCallUpdated(tool_call_id, content=(TerminalContent(terminal_id),)))
            exit_status: TerminalExit | None = None
            with anyio.move_on_after(timeout):
                exit_status = await self.channel.ask(methods.TERMINAL_WAIT_FOR_EXIT, ref, TerminalExit, timeout=None)
            if exit_status is None:
                await self.channel.ask(methods.TERMINAL_KILL, ref, Acknowledged)
            output = await self.channel.ask(methods.TERMINAL_OUTPUT, ref, TerminalOutputResult)
            status = exit_status or output.exit_status or TerminalExit()
            text = output.output if exit_status else output.output + f"\n[timed out after {timeout:g} s]"
            if tool_call_id is not None:  # journaled, so a replay can show what the terminal showed
                await self.emit(
                    TerminalExited(terminal_id, text, status.exit_code, status.signal, output.truncated, tool_call_id)
                )
            return CommandResult(text, status.exit_code, status.signal, output.truncated, terminal_id)
        except BaseException:
            await self._finally(methods.TERMINAL_KILL, ref)
            raise
        finally:
            await self._finally(methods.TERMINAL_RELEASE, ref)

    async def _finally(self, method: str, ref: dict[str, str]) -> None:
        from acp_server.protocol.answers import Acknowledged

        # Cleanup must neither be cancelled with the turn nor replace the error that ended it:
        # a refused or malformed answer here is logged, the command's result stands.
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLEANUP_TIMEOUT):
            try:
                await self.channel.ask(method, ref, Acknowledged)
            except (ToolRefused, TurnCancelled) as exc:
                log.warning("%s failed: %s", method, exc)
