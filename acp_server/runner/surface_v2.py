"""ACP v2 on a runner connection: v2's handlers (`acp.v2.V2Surface`) over the hub's shared
sessions, as `RunnerAgent` gives v1's.

The prompting connection is answered at acceptance and told its turn's start and end itself;
the turn runs in the hub (it outlives the connection) and streams to every connection that has
the session open, each in its own version (`routes`). `session/resume` opens the session here
as a load does: updates made while it replays are held and follow its answer, each once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from acp_server.acp.v2 import ServedAgent, V2Surface, as_object
from acp_server.protocol import methods
from acp_server.protocol.opening import load_session_params
from acp_server.rpc.errors import FieldProblem, PeerClosedError, invalid_params
from acp_server.runner.routes import current_prompter
from acp_server.turns import mapping_v2

if TYPE_CHECKING:
    from acp_server.acp.sessions import Session

log = logging.getLogger(__name__)
Turn = Callable[[], Awaitable[None]]


class RunnerSide(ServedAgent, Protocol):
    """What v2 uses of a runner connection's agent (runner.hub.RunnerAgent) beyond v1's parts."""

    def refuse_if_read_only(self, what: str) -> None: ...
    async def join(self, params: dict[str, Any]) -> None: ...
    async def open_here(
        self, session: Session, *, history: bool, tail: bool = True, then: Turn | None = None
    ) -> None: ...


class RunnerV2Surface(V2Surface):
    """The v2 handlers of one runner connection."""

    def __init__(self, agent: RunnerSide, *, start: Callable[[Turn], None]) -> None:
        super().__init__(agent)
        self.runner = agent
        self._start = start  # the hub's: the turn outlives this connection

    async def handle_session_prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        """The connection has the session open from now on; its turn's questions ask it first."""
        self.runner.refuse_if_read_only("prompt")
        await self.runner.join(params)
        current_prompter.set(self.runner.peer)  # inherited by the turn, started in the hub
        return await super().handle_session_prompt(params)

    def follow(self, session_id: str) -> None:
        """Background work is not reported on the runner's connections (their state updates are
        the hub's, shared by every v2 connection, and carry no list: v2's "not reported")."""

    def start(self, turn: Turn) -> None:
        self._start(turn)

    async def _notify(self, session_id: str, update: dict[str, Any]) -> None:
        """The turn's start and end, to the connection that prompted (the routes tell the others)."""
        try:
            await self.runner.peer.notify(methods.SESSION_UPDATE, {"sessionId": session_id, "update": update})
        except PeerClosedError:
            log.info("the client left before a state of session %s was shown", session_id)

    async def handle_session_resume(self, params: dict[str, Any]) -> dict[str, Any]:
        """With `replayFrom: {type: start}` the history first, else nothing; then the state, the
        answer, and the live updates made meanwhile that the replay did not show."""
        replay_from: Any = params.get("replayFrom")
        if replay_from is not None and as_object(replay_from).get("type") != "start":
            raise invalid_params(FieldProblem("replayFrom.type", "is not supported"), message="replayFrom: only start")
        runner = self.runner
        session = await runner.reattach(load_session_params(params))

        async def current() -> None:
            await runner.peer.notify(
                methods.SESSION_UPDATE, {"sessionId": session.id, "update": await self._current(session)}
            )

        await runner.open_here(session, history=replay_from is not None, tail=False, then=current)
        result = runner.reopened(session)
        return {"configOptions": mapping_v2.config_options(result["configOptions"])}
