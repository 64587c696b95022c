"""The MCP servers of a turn (stdio and streamable HTTP), offered to the model as tools.

Connections use the official `mcp` package (an optional import) on a private event loop in
a blocking portal, one task per server holding its `Client` open for the turn. Each MCP tool
becomes a `Tool` named `mcp__<server>__<tool>` that always asks permission; a call waits on
its future while checking for a cancel, which cancels the call's task.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import json
import re
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, AsyncExitStack
from typing import Any

from adapters.base import Sink, ToolRefused, TurnCancelled
from adapters.events import TextContent
from adapters.openai.tools import Action, Outcome, Tool, Workspace

CONNECT_TIMEOUT = 15.0
CALL_TIMEOUT = 600.0
POLL = 0.05
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def mcp_available() -> bool:
    """Whether the `mcp` package is installed (without importing it)."""
    return importlib.util.find_spec("mcp") is not None


def tool_name(server: str, tool: str) -> str:
    """A name the Chat Completions API accepts (letters, digits, _ and -, at most 64)."""
    return f"mcp__{_UNSAFE.sub('_', server)}__{_UNSAFE.sub('_', tool)}"[:64]


class McpTools:
    """Use as `with McpTools(servers, sink, cwd) as mcp:`; `tools` then lists what they offer."""

    def __init__(self, servers: Sequence[Mapping[str, Any]], sink: Sink, cwd: str) -> None:
        self._servers = list(servers)
        self._sink = sink
        self._cwd = cwd
        self._portal_cm: AbstractContextManager[Any] | None = None
        self._portal: Any = None
        self._stop: Any = None
        self._tasks: list[concurrent.futures.Future[Any]] = []
        self.tools: list[Tool] = []

    def __enter__(self) -> McpTools:
        if not self._servers:
            return self
        try:
            import anyio.from_thread
            import mcp  # noqa: F401
        except ImportError:
            self._report_failure("MCP servers", "they need the mcp package: pip install 'acp-server[openai]'")
            return self
        self._portal_cm = anyio.from_thread.start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        try:
            self._stop = self._portal.call(anyio.Event)
            for server in self._servers:
                self._connect(server)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._portal is None:
            return
        if self._stop is not None:
            self._portal.call(self._stop.set)
        concurrent.futures.wait(self._tasks, timeout=CONNECT_TIMEOUT)
        self._portal.call(self._portal.stop, True)
        assert self._portal_cm is not None
        self._portal_cm.__exit__(None, None, None)
        self._portal = None

    # --- connecting ----------------------------------------------------------------------

    def _connect(self, server: Mapping[str, Any]) -> None:
        name = str(server.get("name") or "mcp")
        ready: concurrent.futures.Future[tuple[Any, list[Any]]] = concurrent.futures.Future()
        task = self._portal.start_task_soon(self._hold, server, ready)
        self._tasks.append(task)
        try:
            client, listed = self._wait(ready, CONNECT_TIMEOUT)
        except concurrent.futures.TimeoutError:
            task.cancel()
            self._report_failure(name, f"no answer within {CONNECT_TIMEOUT:g} s")
            return
        except TurnCancelled:
            task.cancel()
            raise
        except Exception as exc:
            self._report_failure(name, _describe(exc))
            return
        self.tools += [self._tool(name, client, entry) for entry in listed]

    async def _hold(self, server: Mapping[str, Any], ready: concurrent.futures.Future[Any]) -> None:
        from mcp import Client

        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(Client(await _target(server, self._cwd, stack)))
                listed = await client.list_tools()
                ready.set_result((client, list(listed.tools)))
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError("cancelled"))
            if not isinstance(exc, Exception):
                raise

    def _wait(self, future: concurrent.futures.Future[Any], timeout: float) -> Any:
        """The future's result, checking for a cancel while waiting."""
        waited = 0.0
        while True:
            self._sink.check_cancelled()
            try:
                return future.result(timeout=POLL)
            except concurrent.futures.TimeoutError:
                waited += POLL
                if waited >= timeout:
                    raise

    def _report_failure(self, name: str, reason: str) -> None:
        tid = self._sink.tool_call(f"Connect to MCP server {name}", kind="other", name=f"mcp:{name}")
        self._sink.tool_update(tid, status="failed", content=[TextContent(f"Not connected: {reason}")])

    # --- calling -------------------------------------------------------------------------

    def _tool(self, server: str, client: Any, entry: Any) -> Tool:
        schema = entry.input_schema if isinstance(entry.input_schema, dict) else {"type": "object"}

        def build(args: Mapping[str, Any], ws: Workspace) -> Action:
            return Action(f"{server}: {entry.title or entry.name}", "other",
                          lambda tid: self._call(client, entry.name, dict(args)), ask=True)

        description = f"[MCP server {server}] {entry.description or entry.name}"
        return Tool(tool_name(server, entry.name), description, schema, build)

    def _call(self, client: Any, name: str, args: dict[str, Any]) -> Outcome:
        future = self._portal.start_task_soon(client.call_tool, name, args)
        try:
            result = self._wait(future, CALL_TIMEOUT)
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


async def _target(server: Mapping[str, Any], cwd: str, stack: AsyncExitStack) -> Any:
    """What `mcp.Client` connects to, from an ACP `McpServer` object; `stack` owns its resources."""
    pairs = {item["name"]: item["value"] for item in server.get("env") or server.get("headers") or []}
    if server.get("type", "stdio") == "stdio":
        from mcp.client.stdio import StdioServerParameters

        return StdioServerParameters(command=server["command"], args=list(server.get("args") or []),
                                     env=pairs or None, cwd=cwd)
    if server.get("type") == "http":
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = await stack.enter_async_context(httpx2.AsyncClient(headers=pairs))
        return streamable_http_client(server["url"], http_client=http)
    raise ToolRefused(f"MCP transport {server.get('type')} is not supported")


def _result_text(result: Any) -> str:
    parts: list[str] = []
    for block in result.content or []:
        if getattr(block, "type", None) == "text":
            parts.append(block.text)
        else:
            parts.append(f"[{getattr(block, 'type', 'unknown')} content not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    return "\n".join(parts)


def _describe(exc: BaseException) -> str:
    """The innermost useful message, digging through exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__
