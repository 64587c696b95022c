"""Which connection a session's outbound traffic goes to, in the runner: the session's owner.

A turn in the runner talks to "the editor of its session", not to the connection it started on.
`Routes` stands in for that peer: updates go to the owner (or nowhere while detached: they are
in the journal already); requests wait for an owner, up to `detached_wait` seconds, and are asked
again of the next owner when theirs leaves or is taken over. A session being loaded (or resumed)
buffers its live updates until the replay has answered, then sends those the replay did not cover.
"""

from __future__ import annotations

import contextvars
import logging
from dataclasses import dataclass, field
from typing import Any

import anyio

from acp_server.rpc.errors import INTERNAL_ERROR, PeerClosedError, RpcError
from acp_server.rpc.peer import Peer

log = logging.getLogger(__name__)

Cursor = tuple[str, int]  # run_id, seq: the envelope of the event an update was made from
# Set by the runner's journal as it appends an event; read by `notify` right after, in the same
# task (`Prompts.publish` journals, then notifies), so each live update knows its cursor.
current_cursor: contextvars.ContextVar[Cursor | None] = contextvars.ContextVar("current_cursor", default=None)


Held = tuple[Cursor | None, str, dict[str, Any]]


@dataclass(slots=True)
class _Loading:
    peer: Peer
    buffer: list[Held] = field(default_factory=list[Held])


class Routes(Peer):
    """The outbound side of a peer (`notify`, `request`) routed by `sessionId`; never `run`."""

    def __init__(self, *, detached_wait: float) -> None:
        super().__init__()
        self.detached_wait = detached_wait
        self._owners: dict[str, Peer] = {}
        self._loading: dict[str, _Loading] = {}
        self._changed: dict[str, anyio.Event] = {}
        self._asking: dict[str, set[anyio.CancelScope]] = {}

    def owner(self, session_id: str) -> Peer | None:
        return self._owners.get(session_id)

    def attached(self) -> int:
        return len(self._owners)

    # --- ownership -----------------------------------------------------------------------

    def attach(self, session_id: str, peer: Peer) -> None:
        """`peer` owns the session from now on; requests asked of an earlier owner are withdrawn
        there (it gets `$/cancel_request`) and asked again here."""
        if self._owners.get(session_id) is peer:
            return
        loading = self._loading.get(session_id)
        if loading is not None and loading.peer is peer:
            return  # its own load or resume hands it over, once the updates held meanwhile are sent
        self._loading.pop(session_id, None)
        self._owners[session_id] = peer
        self._signal(session_id)

    def begin_load(self, session_id: str, peer: Peer) -> None:
        """A load or resume by `peer` starts: the earlier owner loses the session, live updates are held."""
        self._owners.pop(session_id, None)
        self._loading[session_id] = _Loading(peer)
        self._signal(session_id)

    async def finish_load(self, session_id: str, peer: Peer, seen: dict[str, int]) -> None:
        """After the load's answer: send the held updates the replay did not include (`seen` is
        the last seq it replayed of each run), then hand the session to `peer`."""
        loading = self._loading.get(session_id)
        if loading is None or loading.peer is not peer:
            return  # taken over meanwhile
        while loading.buffer:
            cursor, method, params = loading.buffer.pop(0)
            if cursor is not None and cursor[1] <= seen.get(cursor[0], -1):
                continue  # the replay showed it already
            try:
                await peer.notify(method, params)
            except PeerClosedError:
                break
        if self._loading.get(session_id) is loading:
            del self._loading[session_id]
            self.attach(session_id, peer)

    def abort_load(self, session_id: str, peer: Peer) -> None:
        loading = self._loading.get(session_id)
        if loading is not None and loading.peer is peer:
            del self._loading[session_id]

    def detach(self, peer: Peer) -> list[str]:
        """The connection of `peer` went away: its sessions have no owner until one attaches."""
        gone = [sid for sid, owner in self._owners.items() if owner is peer]
        gone += [sid for sid, loading in self._loading.items() if loading.peer is peer]
        for session_id in gone:
            self._owners.pop(session_id, None)
            self._loading.pop(session_id, None)
            self._signal(session_id)
        return gone

    def _signal(self, session_id: str) -> None:
        for scope in self._asking.pop(session_id, set()):
            scope.cancel()
        event = self._changed.pop(session_id, None)
        if event is not None:
            event.set()

    # --- outbound ------------------------------------------------------------------------

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        session_id = params.get("sessionId")
        if not isinstance(session_id, str):
            return
        loading = self._loading.get(session_id)
        if loading is not None:
            loading.buffer.append((current_cursor.get(), method, params))
            return
        owner = self._owners.get(session_id)
        if owner is None:
            return  # detached: the event is in the journal, and a load will replay it
        try:
            await owner.notify(method, params)
        except PeerClosedError:
            log.info("an update for session %s met a closing connection", session_id)

    async def request(self, method: str, params: dict[str, Any], *, timeout: float | None = None) -> Any:
        """Ask the session's owner; while there is none, wait for one (at most `detached_wait`
        seconds in all, then fail closed); ask again when the owner leaves or is replaced."""
        session_id = params.get("sessionId")
        if not isinstance(session_id, str):
            raise RpcError(INTERNAL_ERROR, f"{method}: no session to route it by")
        waited = 0.0
        while True:
            owner = self._owners.get(session_id)
            if owner is None:
                waited += await self._wait_for_owner(session_id, method, self.detached_wait - waited)
                continue
            with anyio.CancelScope() as scope:
                self._asking.setdefault(session_id, set()).add(scope)
                try:
                    return await owner.request(method, params, timeout=timeout)
                except PeerClosedError:
                    log.info("%s for session %s: the editor left; asking the next one", method, session_id)
                    self.detach(owner)
                finally:
                    self._asking.get(session_id, set()).discard(scope)

    async def _wait_for_owner(self, session_id: str, method: str, budget: float) -> float:
        """Seconds waited until the session changed hands; RpcError when `budget` runs out."""
        event = self._changed.setdefault(session_id, anyio.Event())
        started = anyio.current_time()
        with anyio.move_on_after(max(budget, 0.0)):
            await event.wait()
            return anyio.current_time() - started
        raise RpcError(
            INTERNAL_ERROR,
            f"no editor answered: no editor was attached to session {session_id} for {self.detached_wait:g} s",
        )
