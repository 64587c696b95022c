"""The MCP servers of a session (stdio and streamable HTTP), offered to the model as tools.

Connections use the official `mcp` package (an optional import) on a private event loop in
a blocking portal (a daemon thread), one task per server holding its `Client` open until
`close`, so a session's connections outlive its turns. Each MCP tool becomes a `Tool` named
`mcp__<server>__<tool>` that always asks permission; a call waits on its future while
checking the calling turn's sink for a cancel, which cancels the call's task.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import json
import re
import threading
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, AsyncExitStack
from typing import TYPE_CHECKING, Any, TypeVar, cast

from adapters.base import Sink, ToolRefused, TurnCancelled
from adapters.events import TextContent
from adapters.openai.jsonvalues import objects
from adapters.openai.tools import Action, Outcome, Tool, Workspace

if TYPE_CHECKING:  # mcp is an optional extra, imported when a session first connects
    import anyio
    from anyio.from_thread import BlockingPortal
    from mcp import Client
    from mcp_types import CallToolResult
    from mcp_types import Tool as McpTool

CONNECT_TIMEOUT = 15.0
CALL_TIMEOUT = 600.0
POLL = 0.05
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_T = TypeVar("_T")


def mcp_available() -> bool:
    """Whether the `mcp` package is installed (without importing it)."""
    return importlib.util.find_spec("mcp") is not None


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
        self._lock = threading.Lock()
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None
        self._stop: anyio.Event | None = None
        self._tasks: list[concurrent.futures.Future[Any]] = []
        self._held: list[concurrent.futures.Future[Any]] = []  # tasks of connected servers
        self._closed = False
        self.tools: list[Tool] = []

    def serves(self, servers: Sequence[Mapping[str, Any]], cwd: str) -> bool:
        """Whether these connections are for exactly these servers (and working directory)."""
        return cwd == self._cwd and [dict(server) for server in servers] == self._servers

    @property
    def alive(self) -> bool:
        """Not closed, and no connected server has gone away since."""
        return not self._closed and not any(task.done() for task in self._held)

    def connect(self, sink: Sink) -> None:
        """Connect every server, reporting each that fails to `sink`; raises TurnCancelled
        (after closing what it opened) when the turn is cancelled meanwhile."""
        if not self._servers:
            return
        try:
            import anyio.from_thread

            importlib.import_module("mcp")  # missing: say so once, not once per server
        except ImportError:
            _report_failure(sink, "MCP servers", "they need the mcp package: pip install mcp")
            return
        with self._lock:
            if self._closed:
                return
            self._portal_cm = anyio.from_thread.start_blocking_portal(name="mcp-connections")
            self._portal = portal = self._portal_cm.__enter__()
        try:
            self._stop = portal.call(anyio.Event)  # created on the portal's loop, which awaits it
            for server in self._servers:
                if self._closed:
                    break  # closed from another thread (the adapter is closing)
                self._connect(portal, server, sink)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Disconnect every server and stop the event loop; safe to call more than once."""
        with self._lock:
            self._closed = True
            portal, self._portal = self._portal, None
            portal_cm, self._portal_cm = self._portal_cm, None
        if portal is None:
            return
        try:
            if self._stop is not None:
                portal.call(self._stop.set)
            concurrent.futures.wait(self._tasks, timeout=CONNECT_TIMEOUT)
            portal.call(portal.stop, True)
        except RuntimeError:
            pass  # the event loop has already stopped
        assert portal_cm is not None
        portal_cm.__exit__(None, None, None)

    # --- connecting ----------------------------------------------------------------------

    def _connect(self, portal: BlockingPortal, server: Mapping[str, Any], sink: Sink) -> None:
        name = str(server.get("name") or "mcp")
        ready: concurrent.futures.Future[tuple[Client, list[McpTool]]] = concurrent.futures.Future()
        try:
            task = portal.start_task_soon(self._hold, server, ready)
        except RuntimeError:
            return  # closed from another thread meanwhile
        self._tasks.append(task)
        try:
            client, listed = _wait(ready, CONNECT_TIMEOUT, sink)
        except concurrent.futures.TimeoutError:
            task.cancel()
            _report_failure(sink, name, f"no answer within {CONNECT_TIMEOUT:g} s")
            return
        except TurnCancelled:
            task.cancel()
            raise
        except Exception as exc:
            _report_failure(sink, name, _describe(exc))
            return
        self._held.append(task)
        self.tools += [self._tool(name, client, entry) for entry in listed]

    async def _hold(
        self, server: Mapping[str, Any], ready: concurrent.futures.Future[tuple[Client, list[McpTool]]]
    ) -> None:
        from mcp import Client

        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(Client(await _target(server, self._cwd, stack)))
                listed = await client.list_tools()
                ready.set_result((client, list(listed.tools)))
                assert self._stop is not None  # set before any server is connected
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError("cancelled"))
            if not isinstance(exc, Exception):
                raise

    # --- calling -------------------------------------------------------------------------

    def _tool(self, server: str, client: Client, entry: McpTool) -> Tool:
        schema = entry.input_schema  # validated by mcp as a JSON object

        def build(args: Mapping[str, Any], ws: Workspace) -> Action:
            return Action(
                f"{server}: {entry.title or entry.name}",
                "other",
                lambda tid: self._call(client, entry.name, dict(args), ws.sink),
                ask=True,
            )

        description = f"[MCP server {server}] {entry.description or entry.name}"
        return Tool(tool_name(server, entry.name), description, schema, build)

    def _call(self, client: Client, name: str, args: dict[str, Any], sink: Sink) -> Outcome:
        portal = self._portal
        if portal is None:
            raise ToolRefused(f"The MCP tool {name} is no longer connected")
        try:
            future = portal.start_task_soon(client.call_tool, name, args)
        except RuntimeError:
            raise ToolRefused(f"The MCP tool {name} is no longer connected") from None
        try:
            result = _wait(future, CALL_TIMEOUT, sink)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolRefused(f"The MCP tool {name} did not answer within {CALL_TIMEOUT:g} s") from None
        except TurnCancelled:
            future.cancel()
            raise
        except Exception as exc:
            raise ToolRefused(f"The MCP tool {name} failed: {_describe(exc)}") from None
        text = _result_text(result)
        if result.is_error:
            return Outcome(f"Error: {text}", (TextContent(text),), "failed")
        return Outcome(text, (TextContent(text),) if text else ())


def _wait(future: concurrent.futures.Future[_T], timeout: float, sink: Sink) -> _T:
    """The future's result, checking the turn's sink for a cancel while waiting."""
    waited = 0.0
    while True:
        sink.check_cancelled()
        try:
            return future.result(timeout=POLL)
        except concurrent.futures.TimeoutError:
            waited += POLL
            if waited >= timeout:
                raise


def _report_failure(sink: Sink, name: str, reason: str) -> None:
    tid = sink.tool_call(f"Connect to MCP server {name}", kind="other", name=f"mcp:{name}")
    sink.tool_update(tid, status="failed", content=[TextContent(f"Not connected: {reason}")])


async def _target(server: Mapping[str, Any], cwd: str, stack: AsyncExitStack) -> Any:
    """What `mcp.Client` connects to, from an ACP `McpServer` object; `stack` owns its resources."""
    pairs: dict[str, str] = {
        item["name"]: item["value"] for item in objects(server.get("env") or server.get("headers"))
    }
    if server.get("type", "stdio") == "stdio":
        from mcp.client.stdio import StdioServerParameters

        return StdioServerParameters(
            command=server["command"], args=list(server.get("args") or []), env=pairs or None, cwd=cwd
        )
    if server.get("type") == "http":
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = await stack.enter_async_context(httpx2.AsyncClient(headers=pairs))
        return streamable_http_client(server["url"], http_client=http)
    raise ToolRefused(f"MCP transport {server.get('type')} is not supported")


def _result_text(result: CallToolResult) -> str:
    parts: list[str] = []
    for block in result.content:
        if block.type == "text":
            parts.append(block.text)
        else:
            parts.append(f"[{block.type} content not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    return "\n".join(parts)


def _describe(exc: BaseException) -> str:
    """The innermost useful message, digging through exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        exc = cast("BaseExceptionGroup[BaseException]", exc).exceptions[0]  # a group is never empty
    return str(exc) or type(exc).__name__
