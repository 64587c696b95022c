"""`ClientTools`: the bridge's `TurnServices` for one turn of one session, made of one part per
concern: `permission` (policy, then the user), `questions` (clarify), `files` (editor or local
disk) and `terminal` (editor terminal or local processes, as `--terminal` says). The session's
mode is read at each ask, and read-only refuses writes and commands before any of them runs; a
command for a tool call runs only as its permission allowed it (`PermissionFlow.check_command`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Any

from acp_server.rpc.peer import Peer
from acp_server.turns.client import ClientCapabilities, EditorChannel
from acp_server.turns.files import Files
from acp_server.turns.permission import PermissionFlow
from acp_server.turns.placement import TerminalChoice
from acp_server.turns.policy import PermissionMemory, refuse_in_read_only
from acp_server.turns.questions import Questions
from acp_server.turns.terminal import CommandRunner
from adapters.base import CommandResult, PermissionDecision
from adapters.events import RuntimeEvent, ToolCallStarted

__all__ = ["ClientCapabilities", "ClientTools"]  # the capabilities, for the handlers that build both


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
        terminal: TerminalChoice = "auto",
    ) -> None:
        channel = EditorChannel(peer, session_id)
        self._mode = mode
        self._permission = PermissionFlow(
            channel=channel,
            permissions=permissions,
            mode=mode,
            emit=emit,
            timeout=permission_timeout,
            on_remember=on_remember,
        )
        self._questions = Questions(
            channel=channel,
            forms=client.elicitation_form,
            urls=client.elicitation_url,
            emit=emit,
            timeout=permission_timeout,
        )
        self._files = Files(channel=channel, client=client, cwd=cwd, roots=roots)
        self._commands = CommandRunner(
            channel=channel, choice=terminal, advertised=client.terminal, quirks=client.quirks, cwd=cwd, emit=emit
        )

    async def request_permission(
        self, tool: ToolCallStarted, offered: Collection[str] | None = None
    ) -> PermissionDecision:
        return await self._permission.request(tool, offered)

    async def clarify(self, question: str, choices: tuple[str, ...], tool_call_id: str | None) -> str:
        return await self._questions.clarify(question, choices, tool_call_id)

    async def elicit(self, request: dict[str, Any]) -> dict[str, Any] | None:
        return await self._questions.elicit(request)

    async def elicitation_complete(self, elicitation_id: str) -> None:
        await self._questions.complete(elicitation_id)

    async def read_text_file(self, path: str, line: int | None, limit: int | None) -> str:
        return await self._files.read(path, line, limit)

    async def write_text_file(self, path: str, content: str) -> None:
        refuse_in_read_only(self._mode(), "writing files")
        await self._files.write(path, content)

    async def run_command(self, command: str, tool_call_id: str | None, timeout: float | None) -> CommandResult:
        refuse_in_read_only(self._mode(), "running commands")
        await self._permission.check_command(command, tool_call_id)
        return await self._commands.run(command, tool_call_id, timeout)
