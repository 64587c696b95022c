"""Connections to MCP servers (stdio and streamable HTTP) with the official `mcp` package, shared
by the agents that offer MCP tools (openai, hermes); what a tool is called and how its result is
shaped stay with each agent.

One `Connections` holds a private event loop in a blocking portal (a daemon thread) and one
task per server holding its `Client` open until `close`, so connections outlive turns. Servers
are connected all at once; a call waits on its future while a `check` (the calling turn's
`Sink.check_cancelled`) may raise `TurnCancelled`, which cancels the call's task.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import importlib.util
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, AsyncExitStack
from typing import TYPE_CHECKING, Any, TypeVar, cast

from adapters.base import Sink, ToolRefused, TurnCancelled
from adapters.events import TextContent
from adapters.frozen import frozen

if TYPE_CHECKING:  # mcp is imported when a session first connects
    import anyio
    from anyio.from_thread import BlockingPortal
    from mcp import Client
    from mcp_types import CallToolResult
    from mcp_types import Tool as McpTool

CONNECT_TIMEOUT = 15.0
CALL_TIMEOUT = 600.0
POLL = 0.05
_T = TypeVar("_T")

Check = Callable[[], None]  # raises TurnCancelled when the waiting turn was cancelled
Failed = Callable[[str, str], None]  # (server name, reason): a server that did not connect


def mcp_available() -> bool:
    """Whether the `mcp` package is installed (without importing it)."""
    return importlib.util.find_spec("mcp") is not None


@frozen
class Server:
    """One connected server: its name, its open client and the tools it listed."""

    name: str
    client: Client
    tools: tuple[McpTool, ...]


@frozen
class CallResult:
    text: str
    is_error: bool  # the tool answered with an error (`isError`), as opposed to failing to answer


class Connections:
    """The connections to a set of MCP servers: `connect` once, `call` from any thread, `close`
    at the end (safe more than once, and from another thread while `connect` waits)."""

    def __init__(self, cwd: str | None) -> None:
        self._cwd = cwd  # stdio servers' working directory; None: the process's own
        self._lock = threading.Lock()
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None
        self._stop: anyio.Event | None = None
        self._tasks: list[concurrent.futures.Future[Any]] = []
        self._held: list[concurrent.futures.Future[Any]] = []  # tasks of connected servers
        self._closed = False

    @property
    def alive(self) -> bool:
        """Not closed, and no connected server has gone away since."""
        return not self._closed and not any(task.done() for task in self._held)

    def connect(self, servers: Sequence[Mapping[str, Any]], check: Check, failed: Failed) -> list[Server]:
        """Connect every server (ACP `McpServer` objects) at once; each that fails goes to `failed`.
        Raises TurnCancelled (after closing what it opened) when `check` does."""
        if not servers:
            return []
        try:
            import anyio.from_thread

            importlib.import_module("mcp")  # missing: say so once, not once per server
        except ImportError:
            failed("MCP servers", "they need the mcp package: pip install mcp")
            return []
        with self._lock:
            if self._closed:
                return []
            self._portal_cm = anyio.from_thread.start_blocking_portal(name="mcp-connections")
            self._portal = portal = self._portal_cm.__enter__()
        try:
            self._stop = portal.call(anyio.Event)  # created on the portal's loop, which awaits it
            started = [(str(server.get("name") or "mcp"), self._start(portal, server)) for server in servers]
            deadline = time.monotonic() + CONNECT_TIMEOUT
            connected: list[Server] = []
            for name, pair in started:
                if pair is not None and (server := self._ready(name, *pair, deadline, check, failed)) is not None:
                    connected.append(server)
            return connected
        except BaseException:
            self.close()
            raise

    def call(self, server: Server, tool: str, args: dict[str, Any], check: Check) -> CallResult:
        """Call one of the server's tools; raises ToolRefused (a message for the model) when the
        call fails, and TurnCancelled when `check` does."""
        portal = self._portal
        if portal is None:
            raise ToolRefused(f"The MCP tool {tool} is no longer connected")
        try:
            future = portal.start_task_soon(server.client.call_tool, tool, args)
        except RuntimeError:
            raise ToolRefused(f"The MCP tool {tool} is no longer connected") from None
        try:
            result = _wait(future, CALL_TIMEOUT, check)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolRefused(f"The MCP tool {tool} did not answer within {CALL_TIMEOUT:g} s") from None
        except TurnCancelled:
            future.cancel()
            raise
        except Exception as exc:
            raise ToolRefused(f"The MCP tool {tool} failed: {describe(exc)}") from None
        return CallResult(result_text(result), bool(result.is_error))

    def close(self) -> None:
        """Disconnect every server and stop the event loop."""
        with self._lock:
            self._closed = True
            portal, self._portal = self._portal, None
            portal_cm, self._portal_cm = self._portal_cm, None
        if portal is None:
            return
        try:
            if self._stop is not None:
                portal.call(self._stop.set)
            for task in self._tasks:
                if task not in self._held:
                    task.cancel()  # still connecting: it would not see the stop
            concurrent.futures.wait(self._tasks, timeout=CONNECT_TIMEOUT)
            portal.call(portal.stop, True)
        except RuntimeError:
            pass  # the event loop has already stopped
        assert portal_cm is not None
        portal_cm.__exit__(None, None, None)

    # --- connecting ----------------------------------------------------------------------

    def _start(
        self, portal: BlockingPortal, server: Mapping[str, Any]
    ) -> tuple[concurrent.futures.Future[Any], concurrent.futures.Future[tuple[Client, list[McpTool]]]] | None:
        ready: concurrent.futures.Future[tuple[Client, list[McpTool]]] = concurrent.futures.Future()
        try:
            task = portal.start_task_soon(self._hold, server, ready)
        except RuntimeError:
            return None  # closed from another thread meanwhile
        self._tasks.append(task)
        return task, ready

    def _ready(
        self,
        name: str,
        task: concurrent.futures.Future[Any],
        ready: concurrent.futures.Future[tuple[Client, list[McpTool]]],
        deadline: float,
        check: Check,
        failed: Failed,
    ) -> Server | None:
        try:
            client, listed = _wait(ready, max(deadline - time.monotonic(), 0.0), check)
        except concurrent.futures.TimeoutError:
            task.cancel()
            failed(name, f"no answer within {CONNECT_TIMEOUT:g} s")
            return None
        except TurnCancelled:
            raise  # `connect` closes everything
        except Exception as exc:
            failed(name, describe(exc))
            return None
        self._held.append(task)
        return Server(name, client, tuple(listed))

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


def report_failure(sink: Sink, name: str, reason: str) -> None:
    """A server that did not connect, shown as a failed tool call of the turn."""
    tid = sink.tool_call(f"Connect to MCP server {name}", kind="other", name=f"mcp:{name}")
    sink.tool_update(tid, status="failed", content=[TextContent(f"Not connected: {reason}")])


def describe(exc: BaseException) -> str:
    """The innermost useful message, digging through exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        exc = cast("BaseExceptionGroup[BaseException]", exc).exceptions[0]  # a group is never empty
    return str(exc) or type(exc).__name__


def result_text(result: CallToolResult) -> str:
    parts: list[str] = []
    for block in result.content:
        if block.type == "text":
            parts.append(block.text)
        else:
            parts.append(f"[{block.type} content not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    return "\n".join(parts)


def _wait(future: concurrent.futures.Future[_T], timeout: float, check: Check) -> _T:
    """The future's result, calling `check` (which may raise TurnCancelled) while waiting."""
    waited = 0.0
    while True:
        check()
        try:
            return future.result(timeout=POLL)
        except concurrent.futures.TimeoutError:
            waited += POLL
            if waited >= timeout:
                raise


async def _target(server: Mapping[str, Any], cwd: str | None, stack: AsyncExitStack) -> Any:
    """What `mcp.Client` connects to, from an ACP `McpServer` object; `stack` owns its resources."""
    pairs = _pairs(server.get("env") or server.get("headers"))
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


def _pairs(value: object) -> dict[str, str]:
    """ACP's `[{name, value}]` environment or headers as a mapping."""
    items = cast(list[Any], value) if isinstance(value, list) else []
    pairs = (cast(dict[str, Any], item) for item in items if isinstance(item, dict))
    return {str(item["name"]): str(item["value"]) for item in pairs}
