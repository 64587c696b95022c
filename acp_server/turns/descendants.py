"""Every process a local command started, found, killed and reaped (Linux /proc; elsewhere none).

A command can leave its process group (`setsid`, a daemon's double fork) and hold its output
open after it was cancelled. So while commands run the server is a child subreaper (orphans
reparent to it, not to init), and each command's processes carry a mark in their environment
(inherited across fork, exec and setsid): `kill_all` SIGKILLs the command's process tree and
every marked process, scanning again until none is left, and waits for them to die. The server
reaps the orphans it adopted; those a finished command left running, once they exit (after a
later command).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import sys
import time
from collections.abc import Generator
from typing import Any

import anyio

from adapters.frozen import frozen

log = logging.getLogger(__name__)

MARK = "ACP_SERVER_COMMAND"  # the environment variable naming the command a process belongs to
PR_SET_CHILD_SUBREAPER = 36
KILL_ROUNDS = 20  # scans at most: a process may fork while the others are being killed
KILL_WAIT = 5.0  # seconds for killed processes to die (one in uninterruptible sleep takes longer)
EXEC_SETTLE_READS = 20  # reads of an empty environment (an execve under way) before taking it as empty
EXEC_SETTLE_PAUSE = 0.0005  # seconds between them: 10 ms at most, only for a process with no environment
KTHREADD = 2  # the parent of kernel threads, whose environment is always empty


@frozen
class Proc:
    """One process as /proc shows it; (pid, start) names it even after its pid is reused."""

    pid: int
    ppid: int
    state: str
    start: int  # clock ticks after boot

    @property
    def alive(self) -> bool:
        return self.state not in "ZX"


_adopted: set[tuple[int, int]] = set()  # (pid, start) of command processes that may become our zombies
_commands = 0  # local commands running now


@contextlib.contextmanager
def adopting() -> Generator[None]:
    """While any command runs, the server is a child subreaper (Linux): orphaned descendants
    reparent to it, not to init. Only then, so that the orphans of its other children (an MCP
    server's, killed by process group) still go to init, which reaps them."""
    global _commands
    if _commands == 0:
        _set_subreaper(1)
    _commands += 1
    try:
        yield
    finally:
        _commands -= 1
        if _commands == 0:
            _set_subreaper(0)


def _set_subreaper(on: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        if _libc().prctl(PR_SET_CHILD_SUBREAPER, on, 0, 0, 0) != 0:
            raise OSError("prctl(PR_SET_CHILD_SUBREAPER) failed")
    except (OSError, AttributeError) as exc:
        log.info("not a child subreaper (%s): a command's orphans go to init", exc)


@functools.cache
def _libc() -> Any:
    import ctypes  # here, not at start-up: most servers never run a local command

    return ctypes.CDLL(None)


class Descendants:
    """The processes of one command: start it with `environment`, then tell `started` its pid."""

    def __init__(self) -> None:
        mark = os.urandom(16).hex()
        self.environment = {**os.environ, MARK: mark}
        self._needle = f"{MARK}={mark}".encode()
        self._root = 0
        self._since = 0  # nothing marked can be older than the command itself

    def started(self, pid: int) -> None:
        self._root = pid
        root = _read(pid)
        self._since = root.start if root is not None else 0

    async def kill_all(self) -> None:
        """SIGKILL the command's tree and marked processes, wait (KILL_WAIT at most) until they
        have died, and reap those the server adopted."""
        exits: list[int] = []  # pidfds of the killed processes, readable once each has died
        killed: set[tuple[int, int]] = set()  # a killed process may take a moment to die
        try:
            for _ in range(KILL_ROUNDS):
                doomed = [p for p in self._alive() if (p.pid, p.start) not in killed]
                if not doomed:
                    break
                for proc in doomed:
                    killed.add((proc.pid, proc.start))
                    exits.extend(_kill(proc))
                    if proc.pid != self._root:  # asyncio reaps the command itself
                        _adopted.add((proc.pid, proc.start))
            else:
                log.warning("a command's processes kept forking while they were being killed")
            with anyio.move_on_after(KILL_WAIT):
                for pidfd in exits:
                    await anyio.wait_readable(pidfd)
        finally:
            for pidfd in exits:
                os.close(pidfd)
        reap()

    def keep_track(self) -> None:
        """Remember what the finished command left running, to reap it once it exits."""
        _adopted.update((p.pid, p.start) for p in self._alive() if p.pid != self._root)
        reap()

    def alive_pids(self) -> list[int]:
        """The pids of the command's processes still alive (the command itself included)."""
        return [proc.pid for proc in self._alive()]

    def _alive(self) -> list[Proc]:
        """The live processes below the command and below each marked process (a child that
        cleared its environment is still found while its parent lives)."""
        procs = _scan()
        seeds = [
            p.pid
            for p in procs.values()
            if p.alive and p.start >= self._since and p.ppid != KTHREADD and _marked(p.pid, self._needle)
        ]
        root = procs.get(self._root)
        if root is not None and root.start == self._since:  # the pid is still the command's own
            seeds.append(self._root)
        return [proc for pid in _tree(seeds, procs) if (proc := procs[pid]).alive]


def reap() -> None:
    """Reap the remembered processes that have exited as children of the server."""
    me = os.getpid()
    for pid, start in list(_adopted):
        proc = _read(pid)
        if proc is None or proc.start != start:
            _adopted.discard((pid, start))  # gone: reaped by its parent or by init
        elif proc.ppid == me and not proc.alive:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            _adopted.discard((pid, start))


def _kill(proc: Proc) -> list[int]:
    """SIGKILL `proc` through a pidfd, so that a reused pid is never hit; its pidfd, if any."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        return []
    except OSError:  # a kernel before 5.3: by pid, and without waiting for it
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(proc.pid, signal.SIGKILL)
        return []
    again = _read(proc.pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if again is not None and again.start == proc.start:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            return [pidfd]
    os.close(pidfd)
    return []


def _tree(seeds: list[int], procs: dict[int, Proc]) -> set[int]:
    children: dict[int, list[int]] = {}
    for proc in procs.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found, todo = set(seeds), list(seeds)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _scan() -> dict[int, Proc]:
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    return {proc.pid: proc for name in names if name.isdigit() and (proc := _read(int(name))) is not None}


def _read(pid: int) -> Proc | None:
    try:
        stat = _read_file(f"/proc/{pid}/stat")
        fields = stat[stat.rindex(b")") + 2 :].split()  # the name in parentheses may hold anything
        return Proc(pid, int(fields[1]), fields[0].decode(), int(fields[19]))
    except (OSError, ValueError, IndexError):
        return None


def _marked(pid: int, needle: bytes) -> bool:
    # A process in the middle of execve shows an empty environment until the new image's is set
    # up (its mm has no env_start yet): read again before taking it for one without the mark.
    for _ in range(EXEC_SETTLE_READS):
        try:
            environ = _read_file(f"/proc/{pid}/environ")
        except OSError:
            return False  # another user's process, or gone
        if environ:
            return needle in environ.split(b"\0")
        time.sleep(EXEC_SETTLE_PAUSE)
    return False


def _read_file(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks: list[bytes] = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
