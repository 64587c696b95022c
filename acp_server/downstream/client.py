"""acp-server as an ACP client of the agent below: one `Peer` over the agent's pipes.

`AgentClient.connect` runs the peer in the caller's task group and does `initialize`; what the
agent answered is kept as `AgentInfo`. The agent's own requests and notifications arrive here
and go to the `Route` of the agent session they name (`routes`); a session nobody routes gets
a refusal (requests) or nothing (notifications). What the agent is told it may ask: files
(`fs/*`), form questions, terminals (`terminal/*`: its commands run as our own agents' do, under
the same policy, in the editor's terminal or locally, so we can always offer them).
acp-server says it can run terminal auth methods: `acp-server login` runs the agent's own.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import field
from typing import Any, Protocol, cast

import anyio
from anyio.abc import TaskGroup

import acp_server
from acp_server.downstream.link import unanswerable
from acp_server.downstream.process import AgentProcess
from acp_server.downstream.updates import ELICITATION_DONE
from acp_server.protocol import methods
from acp_server.rpc.dispatch import Dispatcher
from acp_server.rpc.errors import PeerClosedError
from acp_server.rpc.peer import JSON_DECODER, Peer
from acp_server.rpc.wire import Frame
from adapters.frozen import frozen

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
INITIALIZE_TIMEOUT = 60.0  # seconds an agent gets to answer initialize (npx may fetch the package first)
CLIENT_CAPABILITIES: dict[str, Any] = {
    "fs": {"readTextFile": True, "writeTextFile": True},
    "terminal": True,
    "elicitation": {"form": {}, "url": {}},  # a URL to an editor that shows them, else declined
    "auth": {"terminal": True},  # offered to the editor as ours, run by `acp-server login`
    # Passed on to an editor that advertised them, dropped for one that did not (`updates.apply`).
    "session": {"compaction": {}, "notices": {}, "configOptions": {"boolean": {}}},
}
# ACP unstable, offered with --unstable: plan operations, shown to an editor as it asked for them.
UNSTABLE_CAPABILITIES: dict[str, Any] = {"plan": {}}
# The agent's requests that a turn answers (session/update is a notification).
ASKS = (
    methods.REQUEST_PERMISSION,
    methods.FS_READ_TEXT_FILE,
    methods.FS_WRITE_TEXT_FILE,
    methods.ELICITATION_CREATE,
    methods.TERMINAL_CREATE,
    methods.TERMINAL_OUTPUT,
    methods.TERMINAL_WAIT_FOR_EXIT,
    methods.TERMINAL_KILL,
    methods.TERMINAL_RELEASE,
)
# What an agent sends about a session that is not routed yet, kept until it is (a few of them).
EARLY_UPDATES = frozenset({"available_commands_update", "current_mode_update", "config_option_update"})
EARLY_SESSIONS = 16
EARLY_UPDATES_KEPT = 16
ELICITATIONS_KEPT = 64  # URL elicitations awaiting `elicitation/complete` (the oldest forgotten first)

Json = dict[str, Any]


class Route(Protocol):
    """Where one agent session's traffic goes (its turn, or the session between turns)."""

    async def update(self, update: Json) -> None: ...
    async def ask(self, method: str, params: Json) -> Any: ...


@frozen
class AgentInfo:
    """What the agent said about itself in `initialize`, read tolerantly (bad parts are absent)."""

    name: str
    version: str
    load: bool
    resume: bool
    close: bool
    directories: bool
    image: bool
    audio: bool
    embedded_context: bool
    mcp_http: bool
    mcp_sse: bool
    logout: bool = False
    auth_methods: tuple[Json, ...] = field(default=())
    fork: bool = False  # session/fork (ACP unstable), offered on with --unstable
    system_prompt: bool = False  # systemPrompt in append mode (ACP unstable)
    system_prompt_override: bool = False

    @classmethod
    def from_wire(cls, result: Any) -> AgentInfo:
        answer = _object(result)
        caps, info = _object(answer.get("agentCapabilities")), _object(answer.get("agentInfo"))
        prompt, mcp = _object(caps.get("promptCapabilities")), _object(caps.get("mcpCapabilities"))
        sessions = _object(caps.get("sessionCapabilities"))
        methods_ = answer.get("authMethods")
        auth = tuple(_auth_method(m) for m in cast(list[Any], methods_)) if isinstance(methods_, list) else ()
        return cls(
            name=str(info.get("name") or "agent"),
            version=str(info.get("version") or ""),
            load=caps.get("loadSession") is True,
            resume=isinstance(sessions.get("resume"), dict),
            close=isinstance(sessions.get("close"), dict),
            directories=isinstance(sessions.get("additionalDirectories"), dict),
            image=prompt.get("image") is True,
            audio=prompt.get("audio") is True,
            embedded_context=prompt.get("embeddedContext") is True,
            mcp_http=mcp.get("http") is True,
            mcp_sse=mcp.get("sse") is True,
            logout=isinstance(_object(caps.get("auth")).get("logout"), dict),
            auth_methods=tuple(m for m in auth if m),
            fork=isinstance(sessions.get("fork"), dict),
            system_prompt=isinstance(sessions.get("systemPrompt"), dict),
            system_prompt_override=isinstance(
                _object(_object(sessions.get("systemPrompt")).get("mode")).get("override"), dict
            ),
        )


class AgentClient:
    """The connection to one agent process; `closed` is set once it has ended."""

    def __init__(self, process: AgentProcess, *, label: str, unstable: bool = False) -> None:
        self.process = process
        self.label = label
        self.unstable = unstable  # ACP unstable parts offered too: plan operations (updates.apply)
        self.peer = Peer()
        self.routes: dict[str, Route] = {}
        self._early: dict[str, list[Json]] = {}  # updates of sessions not routed yet
        self._elicitations: dict[str, str] = {}  # a URL elicitation's id -> its session, until complete
        self.info: AgentInfo | None = None
        self.closed = anyio.Event()

    async def connect(self, tasks: TaskGroup, on_close: Callable[[], Awaitable[None]]) -> AgentInfo:
        """Serve the connection in `tasks` and initialize it; `on_close` runs once it ends."""

        async def serve() -> None:
            try:
                await self.peer.run(self._intercepted(self.process.frames), self.process.writer, self._dispatcher())
            finally:
                self.closed.set()
                await on_close()

        tasks.start_soon(serve)
        tasks.start_soon(self.process.log_stderr, self.label)
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": CLIENT_CAPABILITIES | UNSTABLE_CAPABILITIES if self.unstable else CLIENT_CAPABILITIES,
            "clientInfo": {"name": "acp-server", "version": acp_server.__version__},
        }
        self.info = AgentInfo.from_wire(await self.request(methods.INITIALIZE, params, timeout=INITIALIZE_TIMEOUT))
        return self.info

    async def request(self, method: str, params: Json, *, timeout: float | None = None) -> Any:
        """The agent's answer; `RpcError` as it answered, `PeerClosedError` once it is gone."""
        if self.closed.is_set():
            raise PeerClosedError(f"{method}: the agent has exited")
        return await self.peer.request(method, params, timeout=timeout)

    async def notify(self, method: str, params: Json) -> None:
        if not self.closed.is_set():
            await self.peer.notify(method, params)

    def _dispatcher(self) -> Dispatcher:
        table: dict[str, Callable[[Json], Awaitable[Any]]] = {
            methods.SESSION_UPDATE: self._update,
            methods.ELICITATION_COMPLETE: self._completed,
        }
        table |= {method: self._asker(method) for method in ASKS}
        return Dispatcher(table)

    async def _intercepted(self, frames: AsyncIterator[Frame]) -> AsyncIterator[Frame]:
        """The agent's frames for the peer, less its `session/update` notifications, which are
        routed here as they are read: nearly all the agent sends (one per streamed delta), and
        the peer's way for a notification (envelope checks, an ordered queue, the dispatcher's
        binding of params) cost more CPU than the rest of a delta's way. Order holds: a frame is
        passed on only after the updates read before it are routed. Anything else, and an
        update that is not plainly one, goes to the peer as it came."""
        async for frame in frames:
            params = _update_params(frame) if isinstance(frame, bytes) and UPDATE_MARK in frame else None
            if params is None:
                yield frame
                continue
            try:
                await self._update(params)
            except Exception:
                log.exception("%s: routing a session/update failed", self.label)

    async def route(self, session_id: str, route: Route) -> None:
        """Send the agent session's traffic to `route`, beginning with what came before it."""
        self.routes[session_id] = route
        for update in self._early.pop(session_id, []):
            await route.update(update)

    async def _update(self, params: Json) -> None:
        session_id, update = str(params.get("sessionId")), params.get("update")
        if not isinstance(update, dict):
            return
        route = self.routes.get(session_id)
        if route is not None:
            await route.update(cast(Json, update))
        elif cast(Json, update).get("sessionUpdate") in EARLY_UPDATES:
            # Sent right after the session/new answer, before the route is in place (commands).
            early = self._early.setdefault(session_id, [])
            if len(self._early) <= EARLY_SESSIONS and len(early) < EARLY_UPDATES_KEPT:
                early.append(cast(Json, update))
        else:
            log.debug("%s: dropped an update for no open session", self.label)

    async def _completed(self, params: Json) -> None:
        """`elicitation/complete` names no session: it goes to the one its URL was asked in."""
        elicitation_id = params.get("elicitationId")
        session_id = self._elicitations.pop(elicitation_id, None) if isinstance(elicitation_id, str) else None
        route = self.routes.get(session_id) if session_id is not None else None
        if route is not None:
            await route.update({"sessionUpdate": ELICITATION_DONE, "elicitationId": elicitation_id})

    def _asker(self, method: str) -> Callable[[Json], Awaitable[Any]]:
        async def ask(params: Json) -> Any:
            elicitation_id = params.get("elicitationId")
            if method == methods.ELICITATION_CREATE and isinstance(elicitation_id, str):
                if len(self._elicitations) >= ELICITATIONS_KEPT:
                    self._elicitations.pop(next(iter(self._elicitations)))
                self._elicitations[elicitation_id] = str(params.get("sessionId"))
            route = self.routes.get(str(params.get("sessionId")))
            return await route.ask(method, params) if route is not None else unanswerable(method)

        return ask


def _update_params(frame: bytes) -> Json | None:
    """The params of a frame that is a well-formed `session/update` notification, else None."""
    try:
        message: Any = JSON_DECODER.decode(frame.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict):
        return None
    fields = cast(Json, message)
    params = fields.get("params")
    if fields.get("jsonrpc") != "2.0" or fields.get("method") != methods.SESSION_UPDATE or "id" in fields:
        return None
    return cast(Json, params) if isinstance(params, dict) else None


UPDATE_MARK = b'"session/update"'


def _object(value: Any) -> Json:
    return cast(Json, value) if isinstance(value, dict) else {}


def _auth_method(value: Any) -> Json:
    """An auth method as the editor may be shown it: `id` and `name` are required, a terminal
    method's `args` are strings and its `env` maps strings to strings; other types are dropped."""
    method = _object(value)
    if not isinstance(method.get("id"), str) or not isinstance(method.get("name"), str):
        return {}
    kind = method.get("type", "agent")
    if kind == "agent":
        return method
    if kind != "terminal":
        return {}
    args: Any = method.get("args") or []
    env: Any = method.get("env") or {}
    if not isinstance(args, list) or not all(isinstance(a, str) for a in cast(list[Any], args)):
        return {}
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in cast(Json, env).values()):
        return {}
    return {**method, "args": args, "env": env}
