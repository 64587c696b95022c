"""ACP v2 on one connection: its `initialize` answer, its handler table and its dialect.

A client that asks for protocol version 2 gets this table in place of v1's: a prompt answered
when its turn starts (`{messageId}`), the turn's lifecycle as `state_update`s, `session/resume`
replaying from the journal on `replayFrom`, `auth/login`/`auth/logout`. What turns send goes
through `V2Dialect`, which rewrites the v1 mapper's updates with `turns.mapping_v2`; the
handlers reuse v1's, and nothing below this module knows which version a client speaks.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

import anyio

import acp_server
from acp_server.acp.v2_background import Background
from acp_server.protocol import methods
from acp_server.protocol.opening import load_session_params, prompt_params
from acp_server.rpc.errors import (
    INTERNAL_ERROR,
    REQUEST_CANCELLED,
    FieldProblem,
    PeerClosedError,
    RpcError,
    invalid_params,
)
from acp_server.turns import mapping_v2
from acp_server.turns.mapping import prompt_message_id

if TYPE_CHECKING:
    from acp_server.acp.prompting import Prompts
    from acp_server.acp.sessions import Session, SessionStore
    from acp_server.protocol.opening import LoadSessionRequest
    from acp_server.rpc.peer import Peer
    from adapters.base import AdapterCapabilities, RuntimeAdapter
    from journal.store import Journal

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 2
Handler = Callable[[dict[str, Any]], Awaitable[Any]]
Notice = tuple[str, dict[str, Any]]


class V2Dialect:
    """What a v2 connection is sent: every update through `mapping_v2`, permission requests in
    v2's shape, and `requires_action` while one waits (running again once none does)."""

    def __init__(self, busy: Callable[[str], bool], peer: Peer | None = None) -> None:
        self._asking: dict[str, int] = {}  # session -> permission questions open
        self._cancelling: set[str] = set()  # sessions whose turn this client cancelled, until idle
        self._busy = busy
        # Background work is reported on a connection's own peer; without one (the runner's
        # shared fan-out) it is not reported at all (v2: an omitted list means "not reported").
        self.background = Background(peer, self.state_now) if peer is not None else None

    def state_now(self, session_id: str) -> str:
        """The session's foreground state as this client was last told it."""
        if self._asking.get(session_id):
            return "requires_action"
        return "running" if self._busy(session_id) else "idle"

    def cancelling(self, session_id: str) -> None:
        """The client cancelled the session's turn: the tool calls it leaves open end `cancelled`."""
        self._cancelling.add(session_id)

    def notification(self, method: str, params: dict[str, Any]) -> list[Notice]:
        if method != methods.SESSION_UPDATE:
            return [(method, params)]
        shown = mapping_v2.update(params["update"])
        if shown is None:
            return []
        session_id = params["sessionId"]
        if session_id in self._cancelling:
            shown = mapping_v2.cancelled(shown)
            if shown.get("sessionUpdate") == "state_update" and shown.get("state") == "idle":
                self._cancelling.discard(session_id)
        if self.background is None:
            return [(method, {**params, "update": shown})]
        if shown.get("sessionUpdate") == "tool_call_update":
            shown = self.background.tool_call(session_id, shown)
        if shown.get("sessionUpdate") == "state_update":
            return [(name, {**params, **notice}) for name, notice in self.background.state(session_id, shown)]
        return [(method, {**params, "update": shown})]

    def request(self, method: str, params: dict[str, Any]) -> tuple[list[Notice], dict[str, Any]]:
        if method != methods.REQUEST_PERMISSION:
            return [], params
        session_id = params["sessionId"]
        self._asking[session_id] = self._asking.get(session_id, 0) + 1
        before = [] if self._asking[session_id] > 1 else self._state(session_id, "requires_action")
        return before, mapping_v2.permission_request(params)

    def answered(self, method: str, params: dict[str, Any]) -> list[Notice]:
        if method != methods.REQUEST_PERMISSION:
            return []
        session_id = params["sessionId"]
        left = self._asking.pop(session_id, 1) - 1
        if left:
            self._asking[session_id] = left
            return []
        return self._state(session_id, "running")

    def _state(self, session_id: str, state: str) -> list[Notice]:
        update = mapping_v2.state_update(state)
        if self.background is None:
            return [(methods.SESSION_UPDATE, {"sessionId": session_id, "update": update})]
        return self.background.state(session_id, update)


class ServedAgent(Protocol):
    """What v2 uses of the connection's agent (acp.handlers.AcpAgent): its v1 handlers and parts."""

    adapter: RuntimeAdapter
    capabilities: AdapterCapabilities
    journal: Journal | None
    peer: Peer
    prompts: Prompts
    sessions: SessionStore

    async def handle_initialize(self, params: dict[str, Any]) -> dict[str, Any]: ...
    async def handle_authenticate(self, params: dict[str, Any]) -> dict[str, Any]: ...
    async def handle_logout(self, params: dict[str, Any]) -> dict[str, Any]: ...
    async def handle_session_new(self, params: dict[str, Any]) -> dict[str, Any]: ...
    async def handle_session_cancel(self, params: dict[str, Any]) -> dict[str, Any]: ...
    async def handle_session_set_config_option(self, params: dict[str, Any]) -> dict[str, Any]: ...
    async def handle_session_list(self, params: dict[str, Any]) -> dict[str, Any]: ...
    async def handle_session_close(self, params: dict[str, Any]) -> dict[str, Any]: ...
    async def handle_session_delete(self, params: dict[str, Any]) -> dict[str, Any]: ...
    async def reattach(self, request: LoadSessionRequest) -> Session: ...
    async def replay(self, session: Session) -> None: ...
    def reopened(self, session: Session) -> dict[str, Any]: ...
    def check_prompt_content(self, blocks: tuple[dict[str, Any], ...]) -> None: ...


class V2Surface:
    """The v2 handlers of one connection, over `agent`'s sessions, journal and turns."""

    def __init__(self, agent: ServedAgent) -> None:
        self.agent = agent
        self.dialect = V2Dialect(self._busy, agent.peer)
        assert self.dialect.background is not None  # a connection's own dialect reports it
        self.background = self.dialect.background

    def _busy(self, session_id: str) -> bool:
        session = self.agent.sessions.live(session_id)
        return session is not None and session.queue.busy()

    def table(self) -> dict[str, Handler]:
        agent = self.agent
        table: dict[str, Handler] = {
            methods.INITIALIZE: agent.handle_initialize,
            methods.AUTH_LOGIN: agent.handle_authenticate,
            methods.AUTH_LOGOUT: agent.handle_logout,
            methods.SESSION_NEW: self.handle_session_new,
            methods.SESSION_PROMPT: self.handle_session_prompt,
            methods.SESSION_CANCEL: self.handle_session_cancel,
            methods.SESSION_SET_CONFIG_OPTION: self.handle_session_set_config_option,
            methods.TERMINAL_CANCEL: self.background.cancel_terminal,
            methods.TOOL_CALL_CANCEL: self.background.cancel_tool_call,
        }
        if agent.journal is not None:
            table |= {
                methods.SESSION_RESUME: self.handle_session_resume,
                methods.SESSION_LIST: agent.handle_session_list,
                methods.SESSION_CLOSE: agent.handle_session_close,
                methods.SESSION_DELETE: agent.handle_session_delete,
            }
        return table

    def initialize_result(self) -> dict[str, Any]:
        caps = self.agent.capabilities
        prompt: dict[str, Any] = {name: {} for name, ok in (("image", caps.image), ("audio", caps.audio)) if ok}
        if caps.embedded_context:
            prompt["embeddedContext"] = {}
        session: dict[str, Any] = {
            "prompt": prompt,
            "mcp": {"stdio": {}} | ({"http": {}} if caps.mcp_http else {}),
            "additionalDirectories": {},
        }
        if self.agent.journal is not None:
            session["delete"] = {}
        capabilities: dict[str, Any] = {"session": session}
        if caps.auth_methods or caps.logout:
            capabilities["auth"] = {}
        name = self.agent.adapter.name
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "info": {"name": "acp-server", "title": f"acp-server ({name})", "version": acp_server.__version__},
            "capabilities": capabilities,
            "authMethods": [
                {"type": "agent", "methodId": m.id, "name": m.name} for m in caps.auth_methods if m.kind != "terminal"
            ],
        }

    def follow(self, session_id: str) -> None:
        """Report the session's background work to this connection from now on."""
        self.background.follow(session_id)

    async def handle_session_new(self, params: dict[str, Any]) -> dict[str, Any]:
        result = await self.agent.handle_session_new(params)
        self.follow(result["sessionId"])
        return {"sessionId": result["sessionId"], "configOptions": mapping_v2.config_options(result["configOptions"])}

    async def handle_session_set_config_option(self, params: dict[str, Any]) -> dict[str, Any]:
        kind = params.get("type", "id")
        if kind != "id":
            raise invalid_params(FieldProblem("type", "is not supported"), message=f"no {kind} config options here")
        result = await self.agent.handle_session_set_config_option({k: v for k, v in params.items() if k != "type"})
        return {"configOptions": mapping_v2.config_options(result["configOptions"])}

    async def handle_session_cancel(self, params: dict[str, Any]) -> dict[str, Any]:
        session_id = as_object(params).get("sessionId")
        if isinstance(session_id, str) and self.agent.sessions.live(session_id) is not None:
            self.dialect.cancelling(session_id)
        return await self.agent.handle_session_cancel(params)

    async def handle_session_resume(self, params: dict[str, Any]) -> dict[str, Any]:
        """With `replayFrom: {type: start}` the journal's history first (the ids shown live, final
        states, nothing run again); in any case the session's current state, then the answer."""
        replay_from: Any = params.get("replayFrom")
        if replay_from is not None and as_object(replay_from).get("type") != "start":
            raise invalid_params(FieldProblem("replayFrom.type", "is not supported"), message="replayFrom: only start")
        session = await self.agent.reattach(load_session_params(params))
        self.follow(session.id)
        if replay_from is not None:
            await self.agent.replay(session)
        await self.agent.peer.notify(
            methods.SESSION_UPDATE, {"sessionId": session.id, "update": await self._current(session)}
        )
        result = self.agent.reopened(session)
        return {"configOptions": mapping_v2.config_options(result["configOptions"])}

    async def _current(self, session: Session) -> dict[str, Any]:
        """Running while a turn runs or waits; else idle, with how the last turn ended."""
        if session.queue.busy():
            return mapping_v2.state_update("running")
        assert self.agent.journal is not None
        runs = await self.agent.journal.runs(session.id)
        stop_reason = (runs[-1].stop_reason if runs else None) or "end_turn"
        if stop_reason != "error":
            return mapping_v2.state_update("idle", stop_reason=stop_reason)
        error = {"code": INTERNAL_ERROR, "message": runs[-1].error or "The agent failed"}
        return mapping_v2.state_update("idle", stop_reason="error", error=error)

    async def handle_session_prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        """Answered when the turn starts (a prompt sent while another runs waits its place), with
        the prompt's message id; the turn streams on and ends in an idle `state_update`."""
        request = prompt_params(params)
        session = await self.agent.sessions.get(request.session_id)
        blocks = request.prompt
        self.agent.check_prompt_content(blocks)
        started: list[str] = []
        settled = anyio.Event()

        async def on_start(run_id: str) -> None:
            started.append(run_id)
            await self._notify(session.id, mapping_v2.state_update("running"))
            message = {"sessionUpdate": "user_message", "messageId": prompt_message_id(run_id), "content": list(blocks)}
            await self._notify(session.id, message)
            settled.set()

        async def turn() -> None:
            try:
                await self._turn(session, blocks, on_start, started)
            finally:
                settled.set()

        self.start(turn)
        await settled.wait()
        if not started:
            raise RpcError(REQUEST_CANCELLED, "The prompt was cancelled before its turn started")
        return {"messageId": prompt_message_id(started[0])}

    def start(self, turn: Callable[[], Awaitable[None]]) -> None:
        """Run a turn beside its prompt's answer (on this connection: it ends with it)."""
        self.agent.peer.spawn(turn)

    async def _turn(
        self, session: Session, blocks: tuple[dict[str, Any], ...], on_start: OnStart, started: list[str]
    ) -> None:
        try:
            result = await self.agent.prompts.prompt(session, blocks, started=on_start)
        except RpcError as exc:
            error = {"code": exc.code, "message": exc.message}
            idle = mapping_v2.state_update("idle", stop_reason="error", error=error)
        else:
            if not started:
                return  # a held prompt withdrawn by a cancel: the turn it waited behind says idle
            idle = mapping_v2.state_update("idle", stop_reason=result.stop_reason)
        await self._notify(session.id, idle)

    async def _notify(self, session_id: str, update: dict[str, Any]) -> None:
        try:
            await self.agent.prompts.peer.notify(methods.SESSION_UPDATE, {"sessionId": session_id, "update": update})
        except PeerClosedError:
            log.info("the client left before a state of session %s was shown", session_id)


OnStart = Callable[[str], Awaitable[None]]


def as_object(value: object) -> dict[str, Any]:
    """A JSON object as sent, or an empty one for anything else (v2 tolerates malformed fields)."""
    return cast("dict[str, Any]", value) if isinstance(value, dict) else {}
