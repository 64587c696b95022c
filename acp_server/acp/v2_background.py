"""v2's background work on one connection: `state_update.background`, the `terminal_update`s that
announce and end what it lists, and `terminal/cancel` / `tool_call/cancel`.

What runs in the background is `turns.background`'s: the processes a finished local command left
running, each shown as a terminal (`bg-…`), and the local command a tool call is running, which a
client may stop. Every state update of a session this connection follows carries the complete list
(v2: once reported, always reported); a terminal is announced before the first list that holds it,
and its `exitStatus` is sent before the first list without it.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from acp_server.protocol import methods
from acp_server.rpc.errors import FieldProblem, PeerClosedError, invalid_params
from acp_server.rpc.peer import Peer
from acp_server.turns import background
from acp_server.turns.background import Leftover

log = logging.getLogger(__name__)

CANCEL: dict[str, Any] = {"cancel": {}}
Notice = tuple[str, dict[str, Any]]


class Background(background.Watcher):
    """What one v2 connection has shown of its sessions' background work, and the terminals
    (`term-…`) in which it shows a tool call's local command live."""

    def __init__(self, peer: Peer, state: Callable[[str], str]) -> None:
        self._peer = peer
        self._state = state  # the session's foreground state now: running, requires_action or idle
        self._shown: dict[str, dict[str, Leftover]] = {}  # session -> terminals announced
        self._cancellable: set[tuple[str, str]] = set()  # tool calls shown with capabilities.cancel
        self._watches: set[anyio.CancelScope] = set()
        self._listening: list[tuple[str, background.Listener]] = []

    def close(self) -> None:
        """The connection ends: stop watching (its task group would wait for the watches) and
        listening; what runs in the background runs on."""
        for scope in self._watches:
            scope.cancel()
        for session_id, listener in self._listening:
            background.unlisten(session_id, listener)
            background.hide_live(session_id, self)

    def follow(self, session_id: str) -> None:
        """Show this session's background work (on session/new and session/resume)."""

        def heard(what: str, item: Leftover | str) -> None:
            self._heard(session_id, what, item)

        if session_id not in self._shown:
            self._shown[session_id] = {}
            background.listen(session_id, heard)
            background.show_live(session_id, self)
            self._listening.append((session_id, heard))
        for left in background.leftovers(session_id):  # left by a turn of another connection
            background.watch(left, self._spawn_watch)

    def _heard(self, session_id: str, what: str, item: Leftover | str) -> None:
        try:
            if isinstance(item, str):  # a tool call's command started: it can be stopped
                self._peer.spawn(lambda: self._advertise(session_id, item))
            elif what == "left":
                background.watch(item, self._spawn_watch)
            else:  # exited: its exit, then a state without it
                state = mapping_state(self._state(session_id))
                self._peer.spawn(lambda: self._say(session_id, state))
        except PeerClosedError:
            pass  # the client left: nothing more to show it

    def _spawn_watch(self, watch: Callable[[], Awaitable[None]]) -> None:
        async def watched() -> None:
            with anyio.CancelScope() as scope:
                self._watches.add(scope)
                try:
                    await watch()
                finally:
                    self._watches.discard(scope)

        self._peer.spawn(watched)

    async def _advertise(self, session_id: str, tool_call_id: str) -> None:
        if background.is_running(session_id, tool_call_id):  # not already over
            self._cancellable.add((session_id, tool_call_id))
            await self._say(
                session_id, {"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id} | {"capabilities": CANCEL}
            )

    async def _say(self, session_id: str, update: dict[str, Any]) -> None:
        try:
            await self._peer.notify(methods.SESSION_UPDATE, {"sessionId": session_id, "update": update})
        except PeerClosedError:
            log.info("the client left before session %s's background work was shown", session_id)

    # --- a tool call's command, live ------------------------------------------------------

    async def started(self, session_id: str, terminal_id: str, tool_call_id: str, command: str, cwd: str) -> None:
        terminal = {"sessionUpdate": "terminal_update", "terminalId": terminal_id, "command": command, "cwd": cwd}
        await self._say(session_id, terminal)
        shown = {"type": "terminal", "terminalId": terminal_id}
        await self._say(
            session_id, {"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id, "content": [shown]}
        )

    async def output(self, session_id: str, terminal_id: str, chunk: bytes) -> None:
        data = base64.b64encode(chunk).decode("ascii")
        await self._say(session_id, {"sessionUpdate": "terminal_output_chunk", "terminalId": terminal_id, "data": data})

    async def exited(self, session_id: str, terminal_id: str, exit_code: int | None, signal: str | None) -> None:
        status = {k: v for k, v in (("exitCode", exit_code), ("signal", signal)) if v is not None}
        update = {"sessionUpdate": "terminal_update", "terminalId": terminal_id, "exitStatus": status}
        await self._say(session_id, update)

    # --- the dialect's part ------------------------------------------------------------------

    def state(self, session_id: str, update: dict[str, Any]) -> list[Notice]:
        """A state update with the complete background list, after the terminal updates that
        announce what it newly lists and end what it no longer does."""
        shown = self._shown.get(session_id)
        if shown is None:
            return [_notice(session_id, update)]
        now = {left.terminal_id: left for left in background.leftovers(session_id)}
        notices = [_notice(session_id, _ended(left)) for tid, left in shown.items() if tid not in now]
        notices += [_notice(session_id, _announced(left)) for tid, left in now.items() if tid not in shown]
        self._shown[session_id] = now
        listed = [{"type": "terminal", "terminalId": tid} for tid in now]
        return [*notices, _notice(session_id, {**update, "background": listed})]

    def tool_call(self, session_id: str, update: dict[str, Any]) -> dict[str, Any]:
        """A tool call's final status takes away the cancel control it was offered (its status,
        `cancelled` when a client stopped its command, is the mapper's: the same in a replay)."""
        key = (session_id, update.get("toolCallId", ""))
        if update.get("status") not in ("completed", "failed", "cancelled") or key not in self._cancellable:
            return update
        self._cancellable.discard(key)
        return {**update, "capabilities": None}

    # --- the client's requests ---------------------------------------------------------------

    def _ids(self, params: dict[str, Any], name: str) -> tuple[str, str]:
        """The session and item a cancel names: only a session this connection follows."""
        session_id, item = params.get("sessionId"), params.get(name)
        if not isinstance(session_id, str) or not isinstance(item, str):
            raise invalid_params(FieldProblem(name, "sessionId and it must be strings"), message=f"{name} needed")
        if session_id not in self._shown:
            raise invalid_params(FieldProblem("sessionId", "is not a session of this connection"))
        return session_id, item

    async def cancel_terminal(self, params: dict[str, Any]) -> dict[str, Any]:
        session_id, terminal_id = self._ids(params, "terminalId")
        if not await background.cancel_terminal(session_id, terminal_id):
            raise invalid_params(FieldProblem("terminalId", "is unknown or has exited"), message="no such terminal")
        return {}

    async def cancel_tool_call(self, params: dict[str, Any]) -> dict[str, Any]:
        session_id, tool_call_id = self._ids(params, "toolCallId")
        if not background.cancel_tool_call(session_id, tool_call_id):
            raise invalid_params(FieldProblem("toolCallId", "is not running a command"), message="not cancellable")
        return {}


def mapping_state(state: str) -> dict[str, Any]:
    """A state update that ends no foreground work (so no stop reason)."""
    return {"sessionUpdate": "state_update", "state": state}


def _notice(session_id: str, update: dict[str, Any]) -> Notice:
    return methods.SESSION_UPDATE, {"sessionId": session_id, "update": update}


def _announced(left: Leftover) -> dict[str, Any]:
    return {
        "sessionUpdate": "terminal_update",
        "terminalId": left.terminal_id,
        "command": left.command,
        "cwd": left.cwd,
        "capabilities": CANCEL,
    }


def _ended(left: Leftover) -> dict[str, Any]:
    """Its exit: killed when a client cancelled it; otherwise unknown (not our child to wait on)."""
    exit_status: dict[str, Any] = {"signal": "SIGKILL"} if left.cancelled else {}
    return {
        "sessionUpdate": "terminal_update",
        "terminalId": left.terminal_id,
        "exitStatus": exit_status,
        "capabilities": None,
    }
