"""The MCP servers of a session (stdio and streamable HTTP), offered to the model as tools.

The connections are `adapters.mcp_client.Connections` (shared with the hermes agent), held
from the session's first turn until `close`, so they outlive its turns. Each MCP tool becomes
a `Tool` named `mcp__<server>__<tool>` that always asks permission; a call checks the calling
turn's sink for a cancel while it waits.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from adapters.base import Sink
from adapters.events import TextContent
from adapters.mcp_client import Connections, Server, report_failure
from adapters.openai.tools import Action, Outcome, Tool, Workspace

if TYPE_CHECKING:
    from mcp_types import Tool as McpTool

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """A name the Chat Completions API accepts (letters, digits, _ and -, at most 64)."""
    return f"mcp__{_UNSAFE.sub('_', server)}__{_UNSAFE.sub('_', tool)}"[:64]


class McpTools:
    """The connections to one session's MCP servers: `connect(sink)` once (failures are reported
    to that turn's sink), then `tools` in every turn that `serves` the same servers, `close` at
    the end of the session. Tool calls report to the sink of the turn that makes them."""

    def __init__(self, servers: Sequence[Mapping[str, Any]], cwd: str) -> None:
        self._servers = [dict(server) for server in servers]
        self._cwd = cwd
        self._connections = Connections(cwd)
        self.tools: list[Tool] = []

    def serves(self, servers: Sequence[Mapping[str, Any]], cwd: str) -> bool:
        """Whether these connections are for exactly these servers (and working directory)."""
        return cwd == self._cwd and [dict(server) for server in servers] == self._servers

    @property
    def alive(self) -> bool:
        """Not closed, and no connected server has gone away since."""
        return self._connections.alive

    def connect(self, sink: Sink) -> None:
        """Connect every server, reporting each that fails to `sink`; raises TurnCancelled
        (after closing what it opened) when the turn is cancelled meanwhile."""
        connected = self._connections.connect(
            self._servers, sink.check_cancelled, lambda name, reason: report_failure(sink, name, reason)
        )
        self.tools += [self._tool(server, entry) for server in connected for entry in server.tools]

    def close(self) -> None:
        """Disconnect every server and stop the event loop; safe to call more than once."""
        self._connections.close()

    def _tool(self, server: Server, entry: McpTool) -> Tool:
        schema = entry.input_schema  # validated by mcp as a JSON object

        def build(args: Mapping[str, Any], ws: Workspace) -> Action:
            return Action(
                f"{server.name}: {entry.title or entry.name}",
                "other",
                lambda tid: self._call(server, entry.name, dict(args), ws.sink),
                ask=True,
            )

        description = f"[MCP server {server.name}] {entry.description or entry.name}"
        return Tool(tool_name(server.name, entry.name), description, schema, build)

    def _call(self, server: Server, name: str, args: dict[str, Any], sink: Sink) -> Outcome:
        result = self._connections.call(server, name, args, sink.check_cancelled)
        if result.is_error:
            return Outcome(f"Error: {result.text}", (TextContent(result.text),), "failed")
        return Outcome(result.text, (TextContent(result.text),) if result.text else ())
