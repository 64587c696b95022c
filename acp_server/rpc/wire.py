"""The stdio wire: newline-delimited JSON frames in, compact JSON frames out.

`claim_stdout` keeps the real stdout for protocol frames and points fd 1 and `sys.stdout` at
stderr, so a stray print anywhere in the process (agents, libraries, children) cannot corrupt
the wire. Readers yield whole lines as bytes, or `Oversized` for a line over the limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, runtime_checkable

import anyio

from adapters.frozen import frozen


@frozen
class Oversized:
    """A line longer than the frame limit; its bytes were discarded."""

    size: int
    limit: int


Frame = bytes | Oversized


class FrameWriter(Protocol):
    async def write(self, data: bytes) -> None: ...
    async def aclose(self) -> None: ...


@runtime_checkable
class ImmediateWriter(FrameWriter, Protocol):
    """A writer that can also take a frame at once, without a task or a loop iteration of its own."""

    def write_now(self, data: bytes) -> bool:
        """Write `data` now and return True; False, with nothing written, when it would have to wait."""
        ...


def claim_stdout() -> int:
    """Keep the real stdout for the wire and send everything else written to fd 1 to stderr."""
    sys.stdout.flush()
    wire_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return wire_fd


def split_lines(max_frame_bytes: int) -> Callable[[bytes], list[Frame]]:
    """A stateful splitter: feed chunks, get back complete frames (or `Oversized` markers)."""
    buffer = bytearray()
    discarding = 0  # bytes dropped so far of a line already over the limit

    def feed(chunk: bytes) -> list[Frame]:
        nonlocal discarding
        frames: list[Frame] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                break
            piece = chunk[start:end]
            if discarding:
                frames.append(Oversized(discarding + len(piece), max_frame_bytes))
                discarding = 0
            elif len(buffer) + len(piece) > max_frame_bytes:
                frames.append(Oversized(len(buffer) + len(piece), max_frame_bytes))
                buffer.clear()
            elif buffer:
                buffer.extend(piece)
                frames.append(bytes(buffer))
                buffer.clear()
            else:
                frames.append(piece)
            start = end + 1
        rest = chunk[start:]
        if discarding:
            discarding += len(rest)
        elif len(buffer) + len(rest) > max_frame_bytes:
            discarding = len(buffer) + len(rest)
            buffer.clear()
        else:
            buffer.extend(rest)
        return frames

    return feed


async def read_frames(fd: int, max_frame_bytes: int) -> AsyncIterator[Frame]:
    """Yield the frames read from `fd` until EOF; a final unterminated line counts as a frame."""
    feed = split_lines(max_frame_bytes)
    async for chunk in read_chunks(fd):
        for frame in feed(chunk):
            yield frame
    for frame in feed(b"\n"):
        if frame:
            yield frame


async def read_chunks(fd: int) -> AsyncIterator[bytes]:
    """The bytes of `fd` as they arrive, up to 64 KiB at a time (a pipe, a tty or a file)."""
    if not _is_pollable(fd):
        while chunk := await anyio.to_thread.run_sync(os.read, fd, 1 << 16):
            yield chunk
        return
    loop = asyncio.get_running_loop()
    # The reader pauses the pipe at twice its limit: while nobody takes chunks (the peer waits
    # for its output to drain), 128 KiB of input wait here and the rest in the pipe.
    reader = asyncio.StreamReader(limit=1 << 16, loop=loop)
    pipe = os.fdopen(os.dup(fd), "rb", buffering=0)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe)
    try:
        while chunk := await reader.read(1 << 16):
            yield chunk
    finally:
        transport.close()


def _is_regular_file(fd: int) -> bool:
    return stat.S_ISREG(os.fstat(fd).st_mode)


def _is_pollable(fd: int) -> bool:
    """A pipe, a socket or a terminal: the event loop can wait on it. A regular file or a device
    such as /dev/null cannot (epoll refuses it, and the loop would wait for ever), so those are
    read with blocking reads in a thread, where EOF arrives as an empty read."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


class PipeWriter:
    """Writes to a pipe through asyncio's transport; `write` waits while the reader lags."""

    def __init__(self, transport: asyncio.WriteTransport, protocol: Any) -> None:
        self._transport = transport
        self._writer = asyncio.StreamWriter(transport, protocol, None, asyncio.get_running_loop())

    @classmethod
    async def open(cls, fd: int) -> FrameWriter:
        if _is_regular_file(fd):
            return FileWriter(fd)
        loop = asyncio.get_running_loop()
        pipe = os.fdopen(fd, "wb", buffering=0)
        transport, protocol = await loop.connect_write_pipe(lambda: asyncio.streams.FlowControlMixin(loop=loop), pipe)
        return cls(transport, protocol)

    async def write(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    def write_now(self, data: bytes) -> bool:
        # Only while nothing waits in the transport: it writes to the pipe at once, and keeps
        # what the pipe did not take (a lagging reader), so the next frame takes `write`.
        if self._transport.is_closing() or self._transport.get_write_buffer_size():
            return False
        self._transport.write(data)
        return True

    async def aclose(self) -> None:
        with contextlib.suppress(ConnectionError, BrokenPipeError):
            await self._writer.drain()
        self._transport.close()


class FileWriter:
    """Blocking writes for a stdout redirected to a regular file (scripts, logs)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def write(self, data: bytes) -> None:
        self.write_now(data)

    def write_now(self, data: bytes) -> bool:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        return True

    async def aclose(self) -> None:
        os.close(self._fd)
