"""The runner's shared state and the handlers of each connection to it.

Per runner (`Hub`): the adapter, the journal, the sessions and their turn queues, the routes
that say which connection owns each session, the agent threads, and the task group the turns
run in. Per connection (`RunnerAgent`): the peer, the client's capabilities and `initialize`. A
turn runs in the hub's task group, so it outlives the connection whose `session/prompt` started
it; when that connection goes away its sessions detach (nothing is cancelled), and a later
`session/load` replays the journal (`session/resume`: only the turn still running) and then
streams the rest of the turn live.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from acp_server.acp.handlers import SEQUENTIAL, AcpAgent
from acp_server.acp.prompting import AgentOptions
from acp_server.acp.sessions import Session, SessionStore
from acp_server.protocol.opening import load_session_params
from acp_server.rpc.errors import INTERNAL_ERROR, PeerClosedError, RpcError
from acp_server.rpc.peer import Peer
from acp_server.runner.routes import Routes, current_cursor
from acp_server.turns.workers import Workers
from adapters.base import RuntimeAdapter
from adapters.events import Envelope
from journal.states import RunState
from journal.store import Journal

log = logging.getLogger(__name__)

STOP_GRACE = 5.0  # seconds `runner stop` gives cancelled turns to finish their records


class RunnerJournal(Journal):
    """The journal, telling the routes which event the update about to be sent came from."""

    async def append(self, envelope: Envelope, *, durable: bool = False, redacted: bool = False) -> None:
        current_cursor.set((envelope.run_id, envelope.seq))
        await super().append(envelope, durable=durable, redacted=redacted)


class Hub:
    """What outlives a connection; `agent()` makes the handlers of a new one."""

    def __init__(
        self, *, adapter: RuntimeAdapter, options: AgentOptions, journal: Journal, detached_wait: float
    ) -> None:
        self.adapter = adapter
        self.options = options
        self.journal = journal
        self.sessions = SessionStore(journal, adapter_name=adapter.name, launch=options.launch)
        self.workers = Workers(options.max_workers)  # `--max-workers` counts per runner
        self.routes = Routes(detached_wait=detached_wait)
        self.connections = 0
        self.live_turns = 0
        self.changed = anyio.Event()  # set (and replaced) whenever the counts above change
        self._tasks: TaskGroup | None = None

    async def run(self, ready: Callable[[], Awaitable[None]]) -> None:
        """Hold the turns' task group open while `ready` (the listener) runs."""
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            await ready()
            tasks.cancel_scope.cancel()

    def agent(self) -> RunnerAgent:
        return RunnerAgent(self)

    def touch(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def run_turn(self, prompt: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """Run `prompt` in the hub's task group and wait for its answer; if the waiting request
        is cancelled (its connection closed), the turn goes on without it."""
        assert self._tasks is not None, "the hub is not running"
        done = anyio.Event()
        outcome: list[dict[str, Any] | Exception] = []

        async def turn() -> None:
            self.live_turns += 1
            self.touch()
            try:
                outcome.append(await prompt())
            except Exception as exc:
                outcome.append(exc)
            finally:
                self.live_turns -= 1
                self.touch()
                done.set()

        self._tasks.start_soon(turn)
        await done.wait()
        if not outcome:
            raise RpcError(INTERNAL_ERROR, "the runner stopped during the turn")
        if isinstance(outcome[0], Exception):
            raise outcome[0]
        return outcome[0]

    async def stop_turns(self) -> None:
        """Cancel every running and queued turn, and give them a moment to record how they ended."""
        sessions = self.sessions.all_live()
        for session in sessions:
            session.queue.cancel_all()
        with anyio.move_on_after(STOP_GRACE):
            for session in sessions:
                await session.queue.drained()
            while self.live_turns:
                await self.changed.wait()


class RunnerAgent(AcpAgent):
    """One connection's handlers over the hub's sessions; the session it creates, loads,
    resumes or prompts is routed to it (the later connection takes a session over)."""

    def __init__(self, hub: Hub) -> None:
        super().__init__(
            hub.adapter,
            hub.options,
            journal=hub.journal,
            peer=Peer(sequential=SEQUENTIAL),
            sessions=hub.sessions,
            outbound=hub.routes,
            workers=hub.workers,
        )
        self.hub = hub
        self._closing = False

    async def on_close(self) -> None:
        """Detach, never cancel: the sessions' turns go on, journaled, until someone loads them."""
        self._closing = True
        detached = self.hub.routes.detach(self.peer)
        if detached:
            log.info("connection closed; %d session(s) detached", len(detached))

    async def handle_session_new(self, params: dict[str, Any]) -> dict[str, Any]:
        result = await super().handle_session_new(params)
        self.hub.routes.attach(result["sessionId"], self.peer)
        return result

    async def handle_session_prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        session_id = params.get("sessionId")
        if isinstance(session_id, str):
            self.hub.routes.attach(session_id, self.peer)  # prompting a session takes it over
        try:
            return await self.hub.run_turn(lambda: super(RunnerAgent, self).handle_session_prompt(params))
        except anyio.get_cancelled_exc_class():
            # `$/cancel_request` from a connected editor stops the turn, as without a runner; a
            # connection winding down cancels only its wait, and the turn goes on detached.
            session = self.hub.sessions.live(session_id) if isinstance(session_id, str) else None
            if not self._closing and session is not None:
                session.queue.cancel_all()
            raise

    async def handle_session_load(self, params: dict[str, Any]) -> dict[str, Any]:
        """The history (a turn still running included), the answer, then the turn's live rest."""
        session = await self._reattach(load_session_params(params))
        await self._take_over(session, history=True)
        return self._reopened(session)

    async def handle_session_resume(self, params: dict[str, Any]) -> dict[str, Any]:
        """No history; but a turn still running is shown from its start, then goes on live, so
        the editor never gets a tail without its beginning."""
        session = await self._reattach(load_session_params(params))
        await self._take_over(session, history=False)
        return self._reopened(session)

    async def _take_over(self, session: Session, *, history: bool) -> None:
        """Replay the history (or only the turn running now), then, after the answer, the live
        rest: updates made meanwhile are held, and those the replay did not include follow the
        answer (each event exactly once)."""
        routes = self.hub.routes
        routes.begin_load(session.id, self.peer)  # before the journal is read: a turn starting now is held
        seen: dict[str, int] = {}  # run id -> the last seq the replay showed
        try:
            run_id = None if history else await self._running_run(session.id)
            if history or run_id is not None:
                await self.replay(session, run_id=run_id, seen=seen)
        except BaseException:
            routes.abort_load(session.id, self.peer)
            raise
        try:
            self.peer.spawn(lambda: routes.finish_load(session.id, self.peer, seen))
        except PeerClosedError:
            routes.abort_load(session.id, self.peer)

    async def _running_run(self, session_id: str) -> str | None:
        """The session's run this runner is running now, if any (a run another process owns is
        not: its rest would never come live here)."""
        runs = await self.hub.journal.runs(session_id)
        ours = [run.id for run in runs if run.status is RunState.RUNNING and run.owner_pid == os.getpid()]
        return ours[-1] if ours else None
