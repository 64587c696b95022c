"""Local commands: `/bin/sh -c` in the session's cwd, in a process group of its own.

Output (stdout and stderr together) is kept as a bounded tail while it is read, so a chatty
command cannot fill the server's memory. A timeout or a cancelled turn kills the whole group and
every process the command started, also those that left it (`descendants`); `lifeline` makes a
command die with a server that was killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable

import anyio

from acp_server.turns.descendants import Descendants, adopting
from acp_server.turns.lifeline import LIFELINE
from adapters.base import CommandResult

OUTPUT_LIMIT = 1 << 20  # bytes of output kept (the last ones)
KILL_GRACE = 5.0  # seconds to collect what a killed group still writes
_CHUNK = 64 * 1024


class OutputTail:
    """The last `limit` bytes of a stream, and whether anything before them was dropped."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._data = bytearray()
        self.truncated = False

    def add(self, chunk: bytes) -> None:
        self._data += chunk
        if len(self._data) > self._limit:
            del self._data[: len(self._data) - self._limit]
            self.truncated = True

    def text(self) -> str:
        return self._data.decode("utf-8", errors="replace")


Left = Callable[[Descendants], None]
Output = Callable[[bytes], Awaitable[None]]


async def run_local(
    command: str, *, cwd: str, timeout: float | None, left: Left | None = None, output: Output | None = None
) -> CommandResult:
    """Run `command` to its end; `output` sees each chunk as it is read, `left` is told what a
    finished command left running."""
    with adopting():
        return await _run(command, cwd=cwd, timeout=timeout, left=left, output=output)


async def _run(
    command: str, *, cwd: str, timeout: float | None, left: Left | None, output: Output | None
) -> CommandResult:
    descendants = Descendants()
    process = await asyncio.create_subprocess_exec(
        *await LIFELINE.argv(command),
        cwd=cwd,
        env=descendants.environment,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    descendants.started(process.pid)
    tail = OutputTail(OUTPUT_LIMIT)
    finished = False
    try:
        with anyio.move_on_after(timeout):
            await _collect(process, tail, output)
            finished = True
    finally:
        with anyio.CancelScope(shield=True):
            if finished:
                descendants.keep_track()
                if left is not None and descendants.alive_pids():
                    left(descendants)
            else:  # timed out or cancelled: nothing the command started may go on
                await descendants.kill_all()  # first, while the tree still hangs from the command
                _kill_group(process)
                with anyio.move_on_after(KILL_GRACE):
                    await _collect(process, tail, output)
                await process.wait()
    text = tail.text()
    if not finished:
        text += f"\n[timed out after {timeout:g} s]"
    code = process.returncode
    name = _signal_name(-code) if code is not None and code < 0 else None
    return CommandResult(text, None if name else code, name, tail.truncated)


async def _collect(process: asyncio.subprocess.Process, tail: OutputTail, output: Output | None) -> None:
    """Read to the end of the output (every writer gone), then wait for the exit; `output` sees
    each chunk as it is read (a v2 client's terminal). Reads of one chunk at a time lose nothing
    when cancelled, unlike `communicate`."""
    assert process.stdout is not None
    while chunk := await process.stdout.read(_CHUNK):
        tail.add(chunk)
        if output is not None:
            await output(chunk)
    await process.wait()


def _kill_group(process: asyncio.subprocess.Process) -> None:
    # All there is to find without /proc. Never `process.kill()`: it polls first, and reaping the
    # command here would leave asyncio's watcher without its exit status.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"
