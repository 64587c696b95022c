"""The front: the process an editor starts in runner mode. It finds the runner of its
configuration (starting one when none answers, under a lock so racing fronts start one) and
relays bytes both ways between its stdio and the runner's socket, parsing nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Generator, Sequence
from pathlib import Path

import anyio
from anyio.abc import SocketStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from acp_server.rpc.wire import FrameWriter, PipeWriter, claim_stdout, read_chunks
from acp_server.runner.paths import RunnerPlace
from journal.private import open_private_append

log = logging.getLogger(__name__)

START_TIMEOUT = 30.0  # seconds a new runner may take to listen (importing an agent can be slow)
READY = b"ready\n"
CHUNK = 1 << 16


class RunnerStartError(RuntimeError):
    pass


def probe(path: Path) -> bool:
    """Whether a runner answers on `path`."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(os.fspath(path))
        except OSError:
            return False
    return True


@contextlib.contextmanager
def locked(path: Path) -> Generator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def ensure_runner(place: RunnerPlace, runner_argv: Sequence[str]) -> bool:
    """Make sure the runner of `place` is listening; True when this call started it."""
    if probe(place.socket):
        return False
    with locked(place.lock):
        if probe(place.socket):  # another front started it while we waited for the lock
            return False
        start_runner(place, runner_argv)
    return True


def start_runner(place: RunnerPlace, runner_argv: Sequence[str]) -> int:
    """Start a runner in its own session and process group, logging to its file; wait until it
    says it listens. Returns its pid."""
    command = [sys.executable, "-m", "acp_server", *runner_argv]
    log_fd = open_private_append(place.log)  # 0600: a runner logs what its sessions do
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log_fd,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(log_fd)
    assert process.stdout is not None
    try:
        line = _read_line(process.stdout.fileno(), START_TIMEOUT)
    finally:
        process.stdout.close()
    if line != READY:
        process.kill()
        process.wait()
        raise RunnerStartError(f"the runner did not start; from its log {place.log}:\n{_tail(place.log)}")
    # Reap it when it exits, so a dead runner never lingers as a zombie that looks alive.
    threading.Thread(target=process.wait, name="runner-reaper", daemon=True).start()
    return process.pid


def _tail(path: Path, size: int = 2000) -> str:
    """The end of a log, for the error an editor shows (why the agent did not start)."""
    try:
        with open(path, "rb") as log_file:
            log_file.seek(max(0, os.fstat(log_file.fileno()).st_size - size))
            return log_file.read().decode(errors="replace").strip()
    except OSError:
        return ""


def _read_line(fd: int, timeout: float) -> bytes:
    deadline = time.monotonic() + timeout
    data = b""
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            break
        chunk = os.read(fd, 64)
        if not chunk:
            break
        data += chunk
    return data


async def relay(place: RunnerPlace, restart: Callable[[], object]) -> None:
    """stdin -> runner and runner -> stdout, bytes unchanged, until the runner closes. A runner
    that closes before answering anything (it was exiting idle as we connected) is replaced once
    (`restart`), and what the editor had sent so far goes to the new one."""
    wire_fd = claim_stdout()
    writer = await PipeWriter.open(wire_fd)
    unanswered = bytearray()  # sent before the runner's first byte back
    send, receive = anyio.create_memory_object_stream[bytes](16)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_read_stdin, send)
        for attempt in range(2):
            stream = await anyio.connect_unix(place.socket)
            answered = await _connection(stream, receive, writer, unanswered)
            if answered or not unanswered or attempt:
                break
            log.warning("the runner closed before answering; starting a fresh one")
            await anyio.to_thread.run_sync(restart)
        tasks.cancel_scope.cancel()
    await writer.aclose()


async def _read_stdin(send: MemoryObjectSendStream[bytes]) -> None:
    async with send:
        async for chunk in read_chunks(0):
            await send.send(chunk)


async def _connection(
    stream: SocketStream, receive: MemoryObjectReceiveStream[bytes], writer: FrameWriter, unanswered: bytearray
) -> bool:
    """Relay over one connection until the runner closes it; whether it answered anything."""
    answered = False
    async with anyio.create_task_group() as tasks:

        async def upstream() -> None:
            try:
                if unanswered:
                    await stream.send(bytes(unanswered))
                async for chunk in receive:
                    if not answered:
                        unanswered.extend(chunk)
                    await stream.send(chunk)
                await stream.send_eof()  # the runner sees the end of input; our sessions detach
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                log.info("the runner closed the connection")

        tasks.start_soon(upstream)
        try:
            while True:
                try:
                    data = await stream.receive(CHUNK)
                except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    break
                if not answered:
                    answered = True
                    unanswered.clear()
                await writer.write(data)
        except (BrokenPipeError, ConnectionError):
            log.info("the editor closed our stdout")
        finally:
            tasks.cancel_scope.cancel()
            with contextlib.suppress(OSError, anyio.BrokenResourceError):
                await stream.aclose()
    return answered
