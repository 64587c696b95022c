"""Work a session's local commands do outside the model's wait: a command still running in a tool
call (which a client may stop), and the processes a finished command left running (`sleep 30 &`,
a dev server), which outlive the turn until they exit or a client cancels them.

The registry is the server's, keyed by session; a connection that shows background work (v2's
`state_update.background`) listens to a session's changes. Stopping goes through the same
`Descendants.kill_all` a cancelled turn uses, so a detached or re-grouped process is stopped too.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import TypeVar

import anyio

from acp_server.turns.descendants import Descendants

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(slots=True, eq=False)
class Leftover:
    """What one finished command left running: shown as a terminal of its own."""

    session_id: str
    terminal_id: str
    command: str
    cwd: str
    processes: Descendants
    tool_call_id: str | None
    cancelled: bool = False
    watched: bool = False
    done: anyio.Event = field(default_factory=anyio.Event)


Spawn = Callable[[Callable[[], Awaitable[None]]], None]


class Watcher:
    """Who shows a running command live: its start, each chunk of its output, its exit."""

    async def started(self, session_id: str, terminal_id: str, tool_call_id: str, command: str, cwd: str) -> None:
        """The command started, in a terminal of this id."""

    async def output(self, session_id: str, terminal_id: str, chunk: bytes) -> None:
        """The command wrote `chunk` (stdout and stderr together)."""

    async def exited(self, session_id: str, terminal_id: str, exit_code: int | None, signal: str | None) -> None:
        """The command ended (its leftovers, if any, are background work of their own)."""


# ("left" | "exited", the leftover) or ("running", a tool call id whose command can be stopped)
Listener = Callable[[str, "Leftover | str"], None]

_running: dict[tuple[str, str], anyio.CancelScope] = {}  # (session, tool call) -> the command's scope
_leftovers: dict[tuple[str, str], Leftover] = {}  # (session, terminal id) -> leftover
_listeners: dict[str, list[Listener]] = {}
_watchers: dict[str, list[Watcher]] = {}  # session -> who shows its commands' output live


def listen(session_id: str, listener: Listener) -> None:
    """Call `listener` when a command of the session leaves processes running and when they end."""
    _join(_listeners, session_id, listener)


def unlisten(session_id: str, listener: Listener) -> None:
    _leave(_listeners, session_id, listener)


def show_live(session_id: str, watcher: Watcher) -> None:
    _join(_watchers, session_id, watcher)


def hide_live(session_id: str, watcher: Watcher) -> None:
    _leave(_watchers, session_id, watcher)


def _join(registry: dict[str, list[T]], session_id: str, member: T) -> None:
    members = registry.setdefault(session_id, [])
    if member not in members:
        members.append(member)


def _leave(registry: dict[str, list[T]], session_id: str, member: T) -> None:
    members = registry.get(session_id, [])
    if member in members:
        members.remove(member)


def live_watchers(session_id: str) -> list[Watcher]:
    """Those showing the session's commands live, now (a copy: one may leave meanwhile)."""
    return list(_watchers.get(session_id, []))


def leftovers(session_id: str) -> list[Leftover]:
    """The session's terminals still running, oldest first."""
    return [left for (session, _), left in _leftovers.items() if session == session_id]


@contextlib.contextmanager
def stoppable(session_id: str, tool_call_id: str | None) -> Generator[anyio.CancelScope]:
    """The scope a tool call's command runs in, which `cancel_tool_call` cancels."""
    with anyio.CancelScope() as scope:
        if tool_call_id is None:
            yield scope
            return
        key = (session_id, tool_call_id)
        _running[key] = scope
        _tell(session_id, "running", tool_call_id)
        try:
            yield scope
        finally:
            _running.pop(key, None)


def is_running(session_id: str, tool_call_id: str) -> bool:
    return (session_id, tool_call_id) in _running


def cancel_tool_call(session_id: str, tool_call_id: str) -> bool:
    """Stop the command the tool call is running; False when it runs none (or no more)."""
    scope = _running.get((session_id, tool_call_id))
    if scope is None:
        return False
    scope.cancel()
    return True


def left_running(left: Leftover) -> None:
    """A finished command left processes running: the session's background work until they end
    (those a command left on a connection nobody watches are dropped once found dead)."""
    for key, old in list(_leftovers.items()):
        if not old.watched and not old.processes.alive_pids():
            del _leftovers[key]
    _leftovers[(left.session_id, left.terminal_id)] = left
    _tell(left.session_id, "left", left)


def watch(left: Leftover, spawn: Spawn) -> None:
    """Watch (once, in a task `spawn` starts) for the end of the leftover's processes."""
    if not left.watched:
        left.watched = True
        spawn(lambda: _watch(left))


def new_terminal_id() -> str:
    return f"bg-{os.urandom(6).hex()}"


async def cancel_terminal(session_id: str, terminal_id: str) -> bool:
    """Stop every process of a leftover (False: no such terminal, or it already ended)."""
    left = _leftovers.get((session_id, terminal_id))
    if left is None:
        return False
    left.cancelled = True
    await left.processes.kill_all()
    return True


async def _watch(left: Leftover) -> None:
    """Wait (on pidfds, no polling) until none of the leftover's processes is alive; a watch
    cancelled with its connection leaves the leftover to the next one that watches."""
    try:
        while alive := left.processes.alive_pids():
            await _any_exit(alive)
    except anyio.get_cancelled_exc_class():
        left.watched = False
        raise
    left.processes.keep_track()  # reap what was ours
    _leftovers.pop((left.session_id, left.terminal_id), None)
    left.done.set()
    _tell(left.session_id, "exited", left)


async def _any_exit(pids: list[int]) -> None:
    fds: list[int] = []
    try:
        for pid in pids:
            with contextlib.suppress(OSError):
                fds.append(os.pidfd_open(pid))
        if not fds:
            return
        async with anyio.create_task_group() as group:

            async def one(fd: int) -> None:
                await anyio.wait_readable(fd)
                group.cancel_scope.cancel()

            for fd in fds:
                group.start_soon(one, fd)
    finally:
        for fd in fds:
            os.close(fd)


def _tell(session_id: str, what: str, item: Leftover | str) -> None:
    for listener in list(_listeners.get(session_id, [])):
        try:
            listener(what, item)
        except Exception:
            log.exception("a background listener of session %s failed", session_id)
