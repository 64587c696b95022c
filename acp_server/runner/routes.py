"""Where a session's outbound traffic goes, in the runner: every connection that has it open.

A turn in the runner talks to "the editors of its session", not to the connection it started on.
`Routes` stands in for that peer. Updates go to every attached connection, in journal order (or
nowhere while none is: they are in the journal already). A question the user answers (permission,
form) goes to every attached connection able to answer, the first answer wins and the other copies
are withdrawn (`$/cancel_request`); a file or terminal request goes to one connection that offers
it: the one whose prompt runs the turn when it is attached, else the earliest attached. Each update is
encoded once per ACP version its connections speak (v2's rewritten by `fanout`); a question goes
through each connection's own peer, which asks it in its version. With no connection to ask,
a request waits for one, up to `detached_wait` seconds. A connection loading (or resuming) the
session holds its live updates until its replay has answered, then gets those the replay did not
cover, and is asked nothing until then.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio

from acp_server.protocol import methods
from acp_server.rpc.errors import INTERNAL_ERROR, PeerClosedError, RequestTimeoutError, RpcError
from acp_server.rpc.outbox import encode
from acp_server.rpc.peer import Peer
from acp_server.runner.fanout import FanOut
from acp_server.turns.client import ClientCapabilities
from acp_server.turns.mapping import PLAN_OPERATIONS, stable_plan
from adapters.frozen import frozen

log = logging.getLogger(__name__)

Cursor = tuple[str, int]  # run_id, seq: the envelope of the event an update was made from
# Set by the runner's journal as it appends an event; read by `notify` right after, in the same
# task (`Prompts.publish` journals, then notifies), so each live update knows its cursor.
current_cursor: contextvars.ContextVar[Cursor | None] = contextvars.ContextVar("current_cursor", default=None)
# The connection whose `session/prompt` the running turn answers: set by its handler before the
# turn's task starts, so the turn's tasks (and the asks they serve) inherit it.
current_prompter: contextvars.ContextVar[Peer | None] = contextvars.ContextVar("current_prompter", default=None)

# Questions for the user: every connection able to answer is asked, the first answer wins.
SHARED_ASKS = frozenset({methods.REQUEST_PERMISSION, methods.ELICITATION_CREATE})

Held = tuple[Cursor | None, str, dict[str, Any]]


def _plan_operation(params: dict[str, Any]) -> dict[str, Any] | None:
    """`params` when its update is a plan operation (ACP unstable), which a connection that did
    not opt in is shown in stable form; else None (the common case: sent to all alike)."""
    update = params.get("update")
    if isinstance(update, dict) and update.get("sessionUpdate") in PLAN_OPERATIONS:  # pyright: ignore[reportUnknownMemberType]
        return params
    return None


def _stable_form(params: dict[str, Any]) -> dict[str, Any] | None:
    """A plan operation as a connection that did not opt in is shown it (None: not at all)."""
    update = stable_plan(params["update"])
    return None if update is None else {**params, "update": update}


@frozen
class Client:
    """What the routes know of one connection: how to reach it and what it may answer."""

    peer: Peer
    read_only: bool = False
    capabilities: Callable[[], ClientCapabilities] = ClientCapabilities
    version: Callable[[], int] = lambda: 1  # the ACP version its `initialize` chose

    def can_answer(self, method: str, params: dict[str, Any] | None = None) -> bool:
        """Whether to ask it `method`: never a watcher (its answers never count), and a form,
        a URL, a file or a terminal only of one that advertised it."""
        if self.read_only:
            return False
        offered = self.capabilities()
        if method == methods.ELICITATION_CREATE:
            return offered.elicitation_url if (params or {}).get("mode") == "url" else offered.elicitation_form
        if method == methods.FS_READ_TEXT_FILE:
            return offered.read_text_file
        if method == methods.FS_WRITE_TEXT_FILE:
            return offered.write_text_file
        return offered.terminal if method.startswith("terminal/") else True


@dataclass(slots=True)
class _Member:
    client: Client
    buffer: list[Held] | None = None  # a list while its load or resume replays: updates held


class Routes(Peer):
    """The outbound side of a peer (`notify`, `request`) routed by `sessionId`; never `run`."""

    def __init__(self, *, detached_wait: float) -> None:
        super().__init__()
        self.detached_wait = detached_wait
        self._members: dict[str, dict[Peer, _Member]] = {}  # session -> its connections, oldest first
        self._changed: dict[str, anyio.Event] = {}
        self._asking: dict[str, int] = {}  # session -> questions open (asked, not yet answered)
        self.v2 = FanOut()  # what v2 connections are sent, rewritten once for all of them

    def clients(self, session_id: str) -> list[Peer]:
        return list(self._members.get(session_id, {}))

    def waiting(self, session_id: str) -> bool:
        """Whether a question of the session is open: its turn waits for someone to answer."""
        return self._asking.get(session_id, 0) > 0

    def attached(self) -> int:
        """Sessions with at least one connection attached."""
        return sum(1 for members in self._members.values() if members)

    # --- membership ----------------------------------------------------------------------

    def attach(self, session_id: str, client: Client) -> None:
        """`client` has the session open from now on (already attached or loading: unchanged)."""
        members = self._members.setdefault(session_id, {})
        if client.peer not in members:
            members[client.peer] = _Member(client)
            self.signal(session_id)

    def begin_load(self, session_id: str, client: Client) -> None:
        """A load or resume by `client` starts: its live updates are held until `finish_load`."""
        members = self._members.setdefault(session_id, {})
        members.pop(client.peer, None)  # a reload starts over, at the end of the order
        members[client.peer] = _Member(client, buffer=[])

    async def finish_load(self, session_id: str, peer: Peer, seen: dict[str, int]) -> None:
        """After the load's answer: send the held updates the replay did not include (`seen` is
        the last seq it replayed of each run); from then on it gets them live and may be asked."""
        member = self._members.get(session_id, {}).get(peer)
        if member is None or member.buffer is None:
            return  # it left meanwhile
        while member.buffer:
            cursor, method, params = member.buffer.pop(0)
            if cursor is not None and cursor[1] <= seen.get(cursor[0], -1):
                continue  # the replay showed it already
            try:
                for frame in self._encoded(member.client.version(), method, params):
                    await peer.notify_encoded(frame)
            except PeerClosedError:
                break
        member.buffer = None
        self.signal(session_id)

    def abort_load(self, session_id: str, peer: Peer) -> None:
        members = self._members.get(session_id, {})
        member = members.get(peer)
        if member is not None and member.buffer is not None:
            del members[peer]

    def leave(self, session_id: str, peer: Peer) -> bool:
        """`peer` closed the session; whether another connection still has it open."""
        members = self._members.get(session_id, {})
        if members.pop(peer, None) is not None:
            self.signal(session_id)
        return bool(members)

    def detach(self, peer: Peer) -> list[str]:
        """The connection of `peer` went away: it leaves every session it had open."""
        gone = [sid for sid, members in self._members.items() if peer in members]
        for session_id in gone:
            self.leave(session_id, peer)
        return gone

    def signal(self, session_id: str) -> None:
        event = self._changed.pop(session_id, None)
        if event is not None:
            event.set()

    def changed(self, session_id: str) -> anyio.Event:
        return self._changed.setdefault(session_id, anyio.Event())

    def live(self, session_id: str) -> list[Client]:
        return [m.client for m in self._members.get(session_id, {}).values() if m.buffer is None]

    # --- outbound ------------------------------------------------------------------------

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self._send(method, params, skip=None)

    async def echo(self, method: str, params: dict[str, Any]) -> None:
        """An update the prompting connection made itself (its own prompt shown, its turn's end):
        to every other connection."""
        await self._send(method, params, skip=current_prompter.get())

    async def _send(self, method: str, params: dict[str, Any], *, skip: Peer | None) -> None:
        session_id = params.get("sessionId")
        if not isinstance(session_id, str):
            return
        cursor = current_cursor.get()
        planned = _plan_operation(params)
        stable = None if planned is None else _stable_form(planned)
        # Each form (ACP version, plan operations or not) encoded once, for every connection it goes to.
        frames: dict[tuple[int, bool], list[bytes]] = {}
        for peer, member in list(self._members.get(session_id, {}).items()):
            as_sent = planned is None or member.client.capabilities().plan
            shown = params if as_sent else stable
            if peer is skip or shown is None:
                continue
            if member.buffer is not None:
                member.buffer.append((cursor, method, shown))
                continue
            form = (member.client.version(), as_sent)
            if form not in frames:
                frames[form] = self._encoded(form[0], method, shown)
            try:
                for frame in frames[form]:
                    await peer.notify_encoded(frame)
            except PeerClosedError:
                log.info("an update for session %s met a closing connection", session_id)

    def _encoded(self, version: int, method: str, params: dict[str, Any]) -> list[bytes]:
        """The frames a connection speaking `version` is sent for one notification."""
        sent = [(method, params)] if version == 1 else self.v2.notification(method, params)
        return [encode({"jsonrpc": "2.0", "method": name, "params": shown}) for name, shown in sent]

    async def request(self, method: str, params: dict[str, Any], *, timeout: float | None = None) -> Any:
        """A question goes to every connection able to answer it; any other request to one."""
        session_id = params.get("sessionId")
        if not isinstance(session_id, str):
            raise RpcError(INTERNAL_ERROR, f"{method}: no session to route it by")
        if method in SHARED_ASKS:
            self._asking[session_id] = self._asking.get(session_id, 0) + 1
            try:
                return await _SharedAsk(self, session_id, method, params, timeout).run()
            finally:
                if (left := self._asking.pop(session_id) - 1) > 0:
                    self._asking[session_id] = left
        return await self._ask_one(session_id, method, params, timeout)

    async def _ask_one(self, session_id: str, method: str, params: dict[str, Any], timeout: float | None) -> Any:
        """Ask the prompting connection, else the earliest attached; ask the next one when it
        leaves; wait for one while there is none (at most `detached_wait` seconds in all)."""
        waited = 0.0
        while True:
            target = self._one(session_id, method)
            if target is None:
                waited += await self.wait_for_client(session_id, method, self.detached_wait - waited)
                continue
            try:
                return await target.request(method, params, timeout=timeout)
            except PeerClosedError:
                log.info("%s for session %s: the editor left; asking the next one", method, session_id)
                self.leave(session_id, target)

    def _one(self, session_id: str, method: str) -> Peer | None:
        able = [client.peer for client in self.live(session_id) if client.can_answer(method)]
        prompter = current_prompter.get()
        return prompter if prompter in able else next(iter(able), None)

    async def wait_for_client(self, session_id: str, method: str, budget: float) -> float:
        """Seconds waited until the session's connections changed; RpcError when `budget` runs out."""
        event = self.changed(session_id)
        started = anyio.current_time()
        with anyio.move_on_after(max(budget, 0.0)):
            await event.wait()
            return anyio.current_time() - started
        raise RpcError(
            INTERNAL_ERROR,
            f"no editor answered: no editor was attached to session {session_id} for {self.detached_wait:g} s",
        )


class _SharedAsk:
    """One question asked of every connection able to answer, as they attach; the first answer
    (or error answer) wins, and leaving the task group withdraws the other copies."""

    def __init__(
        self, routes: Routes, session_id: str, method: str, params: dict[str, Any], timeout: float | None
    ) -> None:
        self.routes, self.session_id, self.method, self.params = routes, session_id, method, params
        self.deadline = None if timeout is None else anyio.current_time() + timeout
        self.asked: set[Peer] = set()
        self.in_flight = 0
        self.outcome: list[tuple[bool, Any]] = []
        self.settled = anyio.Event()

    async def run(self) -> Any:
        waited = 0.0
        routes = self.routes
        async with anyio.create_task_group() as tasks:
            while not self.settled.is_set():
                changed = routes.changed(self.session_id)
                for client in routes.live(self.session_id):
                    if client.can_answer(self.method, self.params) and client.peer not in self.asked:
                        self.asked.add(client.peer)
                        self.in_flight += 1
                        tasks.start_soon(self._ask, client.peer)
                if self.in_flight == 0:
                    try:
                        waited += await routes.wait_for_client(
                            self.session_id, self.method, routes.detached_wait - waited
                        )
                    except RpcError as exc:  # raised out here, not wrapped by the task group
                        self.outcome.append((False, exc))
                        break
                    continue
                await first_of(self.settled.wait, changed.wait)
            tasks.cancel_scope.cancel()
        ok, value = self.outcome[0]
        if ok:
            return value
        raise value

    async def _ask(self, peer: Peer) -> None:
        timeout = None if self.deadline is None else max(self.deadline - anyio.current_time(), 0.0)
        got: tuple[bool, Any] | None = None
        try:
            got = (True, await peer.request(self.method, self.params, timeout=timeout))
        except PeerClosedError:
            self.routes.leave(self.session_id, peer)
        except (RpcError, RequestTimeoutError) as exc:  # an error answer, or none in time: the outcome
            got = (False, exc)
        finally:
            self.in_flight -= 1
            self.routes.signal(self.session_id)  # wakes `run` to count what is left
        if got is not None and not self.outcome:
            self.outcome.append(got)
            self.settled.set()


async def first_of(*waits: Callable[[], Any]) -> None:
    """Return as soon as any of `waits` returns."""
    async with anyio.create_task_group() as tasks:

        async def one(wait: Callable[[], Any]) -> None:
            await wait()
            tasks.cancel_scope.cancel()

        for wait in waits:
            tasks.start_soon(one, wait)
