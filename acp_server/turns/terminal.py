"""Where a turn's commands run: in the editor's terminal when it offered one, else locally.

In the editor, the command gets a `terminal/create`d terminal that is embedded in its tool
call, waited for (up to the timeout, then killed), read, and always released, also when the
turn is cancelled. Locally it runs through `processes.run_local`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from acp_server.protocol import methods
from acp_server.protocol.models import CreateTerminalResult, TerminalExit, TerminalOutputResult, parse
from acp_server.turns.client import EditorChannel
from acp_server.turns.processes import OUTPUT_LIMIT, run_local
from adapters.base import CommandResult, ToolRefused, TurnCancelled
from adapters.events import RuntimeEvent, TerminalContent, TerminalExited, ToolCallUpdated

log = logging.getLogger(__name__)

CLEANUP_TIMEOUT = 5.0  # seconds for terminal/kill and terminal/release once the turn is over


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandRunner:
    channel: EditorChannel
    in_editor: bool  # the editor advertised `terminal`
    cwd: str
    emit: Callable[[RuntimeEvent], Awaitable[None]]

    async def run(self, command: str, tool_call_id: str | None, timeout: float | None) -> CommandResult:
        if self.in_editor:
            return await self._run_in_editor(command, tool_call_id, timeout)
        return await run_local(command, cwd=self.cwd, timeout=timeout)

    async def _run_in_editor(self, command: str, tool_call_id: str | None, timeout: float | None) -> CommandResult:
        created = await self.channel.call(
            methods.TERMINAL_CREATE,
            {
                "command": "/bin/sh",
                "args": ["-c", command],
                "cwd": self.cwd,
                "outputByteLimit": OUTPUT_LIMIT,
            },
        )
        terminal_id = parse(CreateTerminalResult, created).terminal_id
        ref = {"terminalId": terminal_id}
        try:
            if tool_call_id is not None:
                await self.emit(ToolCallUpdated(tool_call_id, content=(TerminalContent(terminal_id),)))
            exit_status: TerminalExit | None = None
            with anyio.move_on_after(timeout):
                exit_status = parse(
                    TerminalExit, await self.channel.call(methods.TERMINAL_WAIT_FOR_EXIT, ref, timeout=None)
                )
            if exit_status is None:
                await self.channel.call(methods.TERMINAL_KILL, ref)
            output = parse(TerminalOutputResult, await self.channel.call(methods.TERMINAL_OUTPUT, ref))
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
        # Cleanup must neither be cancelled with the turn nor replace the error that ended it.
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLEANUP_TIMEOUT):
            try:
                await self.channel.call(method, ref)
            except (ToolRefused, TurnCancelled) as exc:
                log.warning("%s failed: %s", method, exc)
