"""The runner's shared state and the handlers of each connection to it.

Per runner (`Hub`): the agent runtimes (its own, and those the stored sessions were made with:
`runner.runtimes`), the journal, the sessions and their turn queues, the routes that say which
connections have each session open, the agent threads, and the task group the turns run in. Per
connection (`RunnerAgent`): the peer, the client's capabilities and `initialize`; a request about
a session made with another agent goes to that runtime's handlers, over the same peer. A
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
from acp_server.acp.v2 import V2Surface
from acp_server.protocol import methods
from acp_server.protocol.opening import load_session_params
from acp_server.rpc.dispatch import Handler
from acp_server.rpc.errors import INTERNAL_ERROR, PeerClosedError, RpcError
from acp_server.rpc.peer import Peer
from acp_server.runner.routes import Client, Routes, current_cursor, current_prompter
from acp_server.runner.runtimes import AdapterFactory, Runtime, Runtimes
from acp_server.runner.surface_v2 import RunnerV2Surface
from acp_server.runner.tokens import READ_ONLY_REFUSED
from acp_server.turns.supervisor import Ticket, entered
from acp_server.turns.workers import Workers
from adapters.base import RuntimeAdapter
from adapters.events import Envelope
from journal.states import RunState
from journal.store import Journal

log = logging.getLogger(__name__)

STOP_GRACE = 5.0  # seconds `runner stop` gives cancelled turns to finish their records
# Requests about one session, answered by the runtime of the agent that session was made with.
SESSION_ROUTED = frozenset(
    {
        methods.SESSION_LOAD,
        methods.SESSION_RESUME,
        methods.SESSION_PROMPT,
        methods.SESSION_CANCEL,
        methods.SESSION_SET_MODE,
        methods.SESSION_SET_CONFIG_OPTION,
        methods.SESSION_CLOSE,
        methods.SESSION_DELETE,
    }
)


class RunnerJournal(Journal):
    """The journal, telling the routes which event the update about to be sent came from."""

    async def append(self, envelope: Envelope, *, durable: bool = False, redacted: bool = False) -> None:
        current_cursor.set((envelope.run_id, envelope.seq))
        await super().append(envelope, durable=durable, redacted=redacted)


class Hub:
    """What outlives a connection; `agent()` makes the handlers of a new one."""

    def __init__(
        self,
        *,
        adapter: RuntimeAdapter,
        options: AgentOptions,
        journal: Journal,
        detached_wait: float,
        adapter_for: AdapterFactory | None = None,
    ) -> None:
        self.adapter = adapter
        self.options = options
        self.journal = journal
        self.runtimes = Runtimes(adapter=adapter, options=options, journal=journal, adapter_for=adapter_for)
        self.sessions: SessionStore = self.runtimes.primary.sessions  # new sessions: the runner's own agent
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

    def agent(self, *, read_only: bool = False) -> RunnerAgent:
        return RunnerAgent(self, read_only=read_only)

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

    def start_turn(self, turn: Callable[[], Awaitable[None]]) -> None:
        """Run `turn` in the hub's task group, counted live, without waiting for it (ACP v2
        answers a prompt as its turn starts); it goes on if its connection closes."""
        assert self._tasks is not None, "the hub is not running"

        async def counted() -> None:
            self.live_turns += 1
            self.touch()
            try:
                await turn()
            except Exception:
                log.exception("a turn failed")
            finally:
                self.live_turns -= 1
                self.touch()

        self._tasks.start_soon(counted)

    async def stop_turns(self) -> None:
        """Cancel every running and queued turn, and give them a moment to record how they ended."""
        sessions = self.runtimes.all_live()
        for session in sessions:
            session.queue.cancel_all()
        with anyio.move_on_after(STOP_GRACE):
            for session in sessions:
                await session.queue.drained()
            while self.live_turns:
                await self.changed.wait()


class RunnerAgent(AcpAgent):
    """One connection's handlers over the hub's sessions. Any number of connections may have a
    session open (docs/runner.md, "Sharing a session"); a `read_only` one watches: it may load,
    resume and list, and is never asked a question, but what would change a session is refused."""

    def __init__(
        self, hub: Hub, *, read_only: bool = False, runtime: Runtime | None = None, peer: Peer | None = None
    ) -> None:
        runtime = runtime if runtime is not None else hub.runtimes.primary
        super().__init__(
            runtime.adapter,
            runtime.options,
            journal=hub.journal,
            peer=peer if peer is not None else Peer(sequential=SEQUENTIAL),
            sessions=runtime.sessions,
            outbound=hub.routes,
            workers=hub.workers,
            echo=hub.routes.echo,
        )
        self.hub = hub
        self.runtime = runtime
        self.read_only = read_only
        self.v2 = True  # a runner connection speaks what its `initialize` asks for (runner.surface_v2)
        self.version = 1
        self.route = Client(
            self.peer, read_only=read_only, capabilities=lambda: self.client, version=lambda: self.version
        )
        self._closing = False
        self._others: dict[str, tuple[RunnerAgent, dict[str, Handler]]] = {}  # by runtime key

    def handlers(self) -> dict[str, Handler]:
        """The handlers; a request about a session made with another agent goes to that agent's."""
        table = super().handlers()
        for name in SESSION_ROUTED & table.keys():
            table[name] = self._routed(name, table[name])
        return table

    def _routed(self, name: str, own: Handler) -> Handler:
        async def routed(params: dict[str, Any]) -> Any:
            session_id = params.get("sessionId")
            if not self._initialized or not isinstance(session_id, str):
                return await own(params)  # its gate (or handler) answers: no agent is started for it
            runtime = await self.hub.runtimes.of(session_id)
            if runtime is self.runtime:
                return await own(params)
            return await self._other(runtime)[name](params)

        return routed

    def _other(self, runtime: Runtime) -> dict[str, Handler]:
        """The handlers of this connection for another runtime's sessions: the same peer, route
        and client; made on first use (after `initialize`, which the caller's gate checked)."""
        found = self._others.get(runtime.key)
        if found is None:
            other = RunnerAgent(self.hub, read_only=self.read_only, runtime=runtime, peer=self.peer)
            found = self._others[runtime.key] = (other, AcpAgent.handlers(other))
            if self.version == 2:
                other._table = other.v2_surface().table()
        other = found[0]
        other.client, other.route, other._initialized = self.client, self.route, True
        return found[1]

    def v2_surface(self) -> V2Surface:
        self.version = 2
        return RunnerV2Surface(self, start=self.hub.start_turn)

    async def on_close(self) -> None:
        """Detach, never cancel: the sessions' turns go on, journaled, until someone loads them."""
        self._closing = True
        for other, _table in self._others.values():
            other._closing = True  # its prompts' waits end as this connection's do: the turns go on
        detached = self.hub.routes.detach(self.peer)
        if detached:
            log.info("connection closed; %d session(s) detached", len(detached))

    def refuse_if_read_only(self, what: str) -> None:
        if self.read_only:
            # The same code as the remote transport's allowlist (tokens.READ_ONLY_METHODS), which
            # refuses first; this is the handlers' own guard, for every kind of connection.
            raise RpcError(READ_ONLY_REFUSED, f"This connection is read-only (it may not {what})", {"readOnly": True})

    async def handle_session_new(self, params: dict[str, Any]) -> dict[str, Any]:
        self.refuse_if_read_only("create sessions")
        result = await super().handle_session_new(params)
        self.hub.routes.attach(result["sessionId"], self.route)
        return result

    async def handle_session_fork(self, params: dict[str, Any]) -> dict[str, Any]:
        """A fork (ACP unstable) is a new session: this connection has it open, as after session/new."""
        self.refuse_if_read_only("fork sessions")
        result = await super().handle_session_fork(params)
        self.hub.routes.attach(result["sessionId"], self.route)
        return result

    async def handle_session_prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        """Queued behind the running turn (whoever sent it) and answered when its own turn ends;
        the turn's file and terminal requests go to this connection while it is attached."""
        self.refuse_if_read_only("prompt")
        await self.join(params)
        session_id = params.get("sessionId")
        current_prompter.set(self.peer)  # inherited by the turn's task, started below
        tickets: list[Ticket] = []
        entered.set(tickets)  # the queue names this prompt's ticket here
        try:
            return await self.hub.run_turn(lambda: super(RunnerAgent, self).handle_session_prompt(params))
        except anyio.get_cancelled_exc_class():
            # `$/cancel_request` from a connected editor withdraws its prompt still waiting, or
            # stops the turn running, as without a runner; a connection winding down cancels only
            # its wait, and the turn goes on detached.
            session = self.sessions.live(session_id) if isinstance(session_id, str) else None
            if self._closing or session is None:
                raise
            if tickets and tickets[0].waiting:
                tickets[0].cancel()
            else:
                session.queue.cancel_all()
            raise

    async def handle_session_cancel(self, params: dict[str, Any]) -> dict[str, Any]:
        """From any connection that has the session open, but a read-only one."""
        self.refuse_if_read_only("cancel turns")
        session_id = params.get("sessionId")
        if isinstance(session_id, str) and self.peer not in self.hub.routes.clients(session_id):
            log.info("session/cancel from a connection without the session open ignored")
            return {}
        if isinstance(session_id, str) and self.sessions.live(session_id) is not None:
            self.hub.routes.v2.cancelling(session_id)  # its open tool calls end `cancelled` in v2
        return await super().handle_session_cancel(params)

    async def handle_session_set_mode(self, params: dict[str, Any]) -> dict[str, Any]:
        """Every connection with the session open is told the new mode (this one opens it)."""
        self.refuse_if_read_only("change modes")
        await self.join(params)
        return await super().handle_session_set_mode(params)

    async def handle_session_set_config_option(self, params: dict[str, Any]) -> dict[str, Any]:
        self.refuse_if_read_only("change options")
        await self.join(params)
        return await super().handle_session_set_config_option(params)

    async def join(self, params: dict[str, Any]) -> None:
        """A connection that prompts or changes a session has it open from then on (an unknown
        session is the handler's -32002)."""
        session_id = params.get("sessionId")
        if isinstance(session_id, str):
            await self.hub.sessions.get(session_id)
            self.hub.routes.attach(session_id, self.route)

    async def handle_session_delete(self, params: dict[str, Any]) -> dict[str, Any]:
        self.refuse_if_read_only("delete sessions")
        return await super().handle_session_delete(params)

    async def handle_session_close(self, params: dict[str, Any]) -> dict[str, Any]:
        """This connection closes the session; it stays open (its turns running) for the others."""
        session_id = params.get("sessionId")
        if isinstance(session_id, str) and self.hub.routes.leave(session_id, self.peer):
            return {}
        return await super().handle_session_close(params)

    async def handle_session_list(self, params: dict[str, Any]) -> dict[str, Any]:
        """Every stored session, each with the agent it was made with and its state now."""
        result = await super().handle_session_list(params)
        for info in result["sessions"]:
            info["_meta"] = {"acp-server": await self._session_meta(info["sessionId"])}
        return result

    async def _session_meta(self, session_id: str) -> dict[str, Any]:
        """`state`: running (a turn runs or waits here), else how its last run ended, or idle;
        `waiting`: a question of its turn is open (asked, no one answered yet)."""
        record = await self.hub.journal.get_session(session_id)
        live = self.hub.runtimes.live(session_id)
        if live is not None and live.queue.busy():
            state = "running"
        else:
            runs = await self.hub.journal.runs(session_id)
            state = runs[-1].status.value if runs else "idle"
        meta: dict[str, Any] = {"state": state, "attached": len(self.hub.routes.clients(session_id))}
        meta["waiting"] = self.hub.routes.waiting(session_id)
        if record is not None and record.adapter:
            meta["agent"] = record.adapter
        return meta

    async def handle_session_load(self, params: dict[str, Any]) -> dict[str, Any]:
        """The history (a turn still running included), the answer, then the turn's live rest."""
        session = await self.reattach(load_session_params(params))
        await self.open_here(session, history=True)
        return self.reopened(session)

    async def handle_session_resume(self, params: dict[str, Any]) -> dict[str, Any]:
        """No history; but a turn still running is shown from its start, then goes on live, so
        the editor never gets a tail without its beginning."""
        session = await self.reattach(load_session_params(params))
        await self.open_here(session, history=False)
        return self.reopened(session)

    async def open_here(
        self, session: Session, *, history: bool, tail: bool = True, then: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """Replay the history (or only the turn running now, with `tail`), then `then`, then,
        after the answer, the live rest: updates made meanwhile are held, and those the replay
        did not include follow the answer (each event exactly once). Other connections keep the
        session open."""
        routes = self.hub.routes
        routes.begin_load(session.id, self.route)  # before the journal is read: a turn starting now is held
        seen: dict[str, int] = {}  # run id -> the last seq the replay showed
        try:
            run_id = None if history or not tail else await self._running_run(session.id)
            if history or run_id is not None:
                await self.replay(session, run_id=run_id, seen=seen)
            if then is not None:
                await then()
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
