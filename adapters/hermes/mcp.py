"""MCP servers for Hermes through acp-server's own MCP client (`adapters/mcp_client.py`).

Hermes 0.19's client is written for `mcp` 1.x (it pins 1.26); with the 2.x acp-server needs it
lists tools without parameter schemas and fails every call, so it is never used: nothing on our
path calls Hermes' `discover_mcp_tools` (AIAgent construction does not). Instead each server's
tools go into Hermes' process-wide tool registry under Hermes' own names (`mcp__<server>__<tool>`,
toolset `mcp-<server>`, parameters through Hermes' schema repairs), with one handler per name
that finds the CALLING session's connection by the task id Hermes passes (our session id), so
two sessions with a same-named server each reach their own. A call checks that session's
running turn for a cancel while it waits.

The editor's servers belong to one session (connected when its AIAgent is built, closed with
the session); config.yaml's `mcp_servers` are connected once per adapter and shared by all its
sessions, as Hermes shares them.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from adapters.base import Sink, ToolRefused, TurnCancelled
from adapters.frozen import frozen
from adapters.hermes.routing import gate_of, owner_of
from adapters.hermes.setup import hermes
from adapters.mcp_client import Connections, Server, report_failure

if TYPE_CHECKING:
    from mcp_types import Tool as McpTool

log = logging.getLogger(__name__)

_lock = threading.Lock()
_sessions: dict[str, Session] = {}  # session id -> the tools its calls reach
_building = threading.Lock()  # registration and AIAgent construction, one session at a time


@frozen
class _Route:
    """Where one registered name leads, and what the model is told about it."""

    connections: Connections
    server: Server
    tool: str  # the MCP tool's own name
    schema: dict[str, Any]


@dataclass(slots=True)
class Servers:
    """Connected MCP servers and the registry names of their tools."""

    connections: Connections
    names: list[str] = field(default_factory=list[str])  # the servers that connected
    routes: dict[str, _Route] = field(default_factory=dict[str, _Route])
    failures: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])  # (server, reason)

    @classmethod
    def connect(
        cls, servers: Sequence[Mapping[str, Any]], cwd: str | None, keep: Mapping[str, Callable[[str], bool]]
    ) -> Servers:
        """Connect `servers` (ACP `McpServer` objects), keeping the tools `keep` allows per server."""
        connected = cls(Connections(cwd))
        for server in connected.connections.connect(servers, _never_cancelled, connected.failed):
            connected.names.append(server.name)
            allowed = keep.get(server.name, _everything)
            for entry in server.tools:
                if allowed(entry.name) and (route := connected.route(server, entry)) is not None:
                    connected.routes[route.schema["name"]] = route
        return connected

    def failed(self, name: str, reason: str) -> None:
        log.warning("MCP server %s is not connected: %s", name, reason)
        self.failures.append((name, reason))

    def route(self, server: Server, entry: McpTool) -> _Route | None:
        mcp_tool = hermes("tools.mcp_tool")
        name = str(mcp_tool.mcp_prefixed_tool_name(server.name, entry.name))
        taken = hermes("tools.registry").registry.get_toolset_for_tool(name)
        if taken and not str(taken).startswith("mcp-"):
            log.warning("MCP tool %s of server %s is not offered: %s is a Hermes tool", entry.name, server.name, name)
            return None
        schema = {
            "name": name,
            "description": entry.description or f"MCP tool {entry.name} from {server.name}",
            # Hermes' own repairs (refs, nullable unions, object shapes), as its users get them.
            "parameters": mcp_tool._normalize_mcp_input_schema(entry.input_schema),
        }
        return _Route(self.connections, server, entry.name, schema)


class Session:
    """One session's MCP tools: its editor's servers first, then the config servers it shares."""

    def __init__(self, own: Servers, shared: Servers | None) -> None:
        self._parts = (own, shared) if shared is not None else (own,)
        self._own = own
        self._pending = [failure for part in self._parts for failure in part.failures]

    @property
    def servers(self) -> tuple[str, ...]:
        """The connected servers' names (their toolsets are `mcp-<name>`)."""
        return tuple(dict.fromkeys(name for part in self._parts for name in part.names))

    def route(self, name: str) -> _Route | None:
        return next((part.routes[name] for part in self._parts if name in part.routes), None)

    @contextmanager
    def registered(self) -> Generator[None]:
        """This session's schemas in the registry while its AIAgent is built (Hermes copies them
        then): another session's same-named tool may have replaced one since it registered."""
        if not any(part.routes for part in self._parts):
            yield  # nothing to register: no need to wait for another session's build
            return
        registry = hermes("tools.registry").registry
        with _building:
            for part in reversed(self._parts):  # the editor's servers win over config.yaml's
                for name, route in part.routes.items():
                    registry.register(
                        name=name,
                        toolset=f"mcp-{route.server.name}",
                        schema=route.schema,
                        handler=functools.partial(_call, name),
                        description=route.schema["description"],
                    )
            yield

    def fit(self, agent: Any) -> None:
        """Only this session's MCP tools: a toolset in the registry also holds the tools that
        same-named servers of other sessions listed."""
        if not agent.tools:
            return
        registry = hermes("tools.registry").registry
        names = {str(tool["function"]["name"]) for tool in agent.tools}
        foreign = {
            name
            for name in names
            if self.route(name) is None and str(registry.get_toolset_for_tool(name) or "").startswith("mcp-")
        }
        if foreign:
            agent.tools = [tool for tool in agent.tools if tool["function"]["name"] not in foreign]
            agent.valid_tool_names = set(agent.valid_tool_names) - foreign

    def report(self, sink: Sink) -> None:
        """Servers that did not connect, as failed tool calls of the session's first turn."""
        pending, self._pending = self._pending, []
        for name, reason in pending:
            with suppress(TurnCancelled):
                report_failure(sink, name, reason)

    def close(self) -> None:
        self._own.connections.close()


def open_session(session_id: str, servers: Sequence[Mapping[str, Any]], cwd: str, shared: Servers | None) -> Session:
    """Connect the session's own (the editor's) servers; its tool calls reach them from now on."""
    session = Session(Servers.connect(servers, cwd, {}), shared)
    with _lock:
        replaced, _sessions[session_id] = _sessions.get(session_id), session
    if replaced is not None:
        replaced.close()  # a build that failed after connecting, retried
    return session


def close_session(session_id: str) -> None:
    with _lock:
        session = _sessions.pop(session_id, None)
    if session is not None:
        session.close()


def report(session_id: str, sink: Sink) -> None:
    with _lock:
        session = _sessions.get(session_id)
    if session is not None:
        session.report(sink)


def configured(names: Sequence[str]) -> Servers | None:
    """config.yaml's enabled `mcp_servers`, loaded as Hermes loads them (`${VAR}` expanded,
    HERMES_SAFE_MODE, suspicious entries dropped) and connected; None when there are none."""
    if not names:
        return None  # without any, Hermes' MCP module (and `mcp`) need not be imported
    mcp_tool = hermes("tools.mcp_tool")
    loaded = cast(dict[str, Any], mcp_tool._load_mcp_config())  # no public loader
    enabled: dict[str, dict[str, Any]] = {}
    for name, config in loaded.items():
        entry = cast(dict[str, Any], config) if isinstance(config, dict) else {}
        if name in names and entry and mcp_tool._parse_boolish(entry.get("enabled"), default=True):
            enabled[name] = entry
    if not enabled:
        return None
    servers = [_server(name, config) for name, config in enabled.items()]
    return Servers.connect(servers, None, {name: _filter(config) for name, config in enabled.items()})


# --- the registry's handler ---------------------------------------------------------------


def _call(name: str, args: dict[str, Any], task_id: str | None = None, **_: Any) -> str:
    """Hermes' registry calls this (after our middleware asked permission) with its task id."""
    results = hermes("tools.registry")
    owner = owner_of(task_id or "") or task_id or ""  # a subagent uses its session's connections
    with _lock:
        session = _sessions.get(owner)
    route = session.route(name) if session is not None else None
    if route is None:
        return str(results.tool_error(f"{name} is not connected in this session"))
    gate = gate_of(owner)
    try:
        result = route.connections.call(
            route.server, route.tool, args, gate.sink.check_cancelled if gate else _never_cancelled
        )
    except TurnCancelled:
        return str(results.tool_error("cancelled by the user"))
    except ToolRefused as exc:
        return str(results.tool_error(str(exc)))
    if result.is_error:
        return str(results.tool_error(result.text or "MCP tool returned an error"))
    return str(results.tool_result(result=result.text))


# --- config.yaml ------------------------------------------------------------------------------


def _server(name: str, config: dict[str, Any]) -> dict[str, Any]:
    """An ACP `McpServer` object from a config.yaml entry: {command, args, env} or {url, headers}."""
    if "url" in config:
        kind = "sse" if str(config.get("transport", "")).lower() == "sse" else "http"
        return {"type": kind, "name": name, "url": str(config["url"]), "headers": _pairs(config.get("headers"))}
    args = cast(list[Any], config.get("args") or [])
    return {
        "name": name,
        "command": str(config.get("command") or ""),
        "args": [str(a) for a in args],
        "env": _pairs(config.get("env")),
    }


def _pairs(value: Any) -> list[dict[str, str]]:
    mapping = cast(dict[Any, Any], value) if isinstance(value, dict) else {}
    return [{"name": str(k), "value": str(v)} for k, v in mapping.items()]


def _filter(config: dict[str, Any]) -> Callable[[str], bool]:
    """`tools: {include: [...]}` keeps only those; otherwise `exclude: [...]` drops those."""
    tools = cast(dict[str, Any], config.get("tools")) if isinstance(config.get("tools"), dict) else {}
    include, exclude = _names(tools.get("include")), _names(tools.get("exclude"))
    return (lambda tool: tool in include) if include else (lambda tool: tool not in exclude)


def _names(value: Any) -> frozenset[str]:
    if isinstance(value, str):
        return frozenset((value,))
    return frozenset(str(v) for v in cast(list[Any], value)) if isinstance(value, list) else frozenset()


def _everything(_: str) -> bool:
    return True


def _never_cancelled() -> None:
    """Connecting at open_session has no turn to cancel it (it is bounded by CONNECT_TIMEOUT)."""
