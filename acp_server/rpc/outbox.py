"""A peer's output: messages encoded and queued in order, written by one task, and a high-water
mark that makes senders (and the peer's reading) wait while the other side does not read. While
that task has nothing to write, a writer that can take a frame at once without waiting (a pipe
with nothing held back, a file) is given it by the sender, on the same turn of the loop.

A write that fails (the other side closed its input) is logged once; from then on nothing waits
for room and queued frames are dropped, so a peer winding down never hangs on its output.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from acp_server.rpc.wire import FrameWriter, ImmediateWriter

log = logging.getLogger(__name__)

HIGH_WATER_BYTES = 1 << 20  # queued output at which senders, and the reading, wait for the writer

_encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def encode(message: dict[str, Any]) -> bytes:
    """Compact, ASCII-escaped JSON: always one line, always valid UTF-8, whatever the text."""
    return _encode(message).encode() + b"\n"


class Outbox:
    """`put` and `send` queue frames; `run` (one task) writes them until `close`."""

    def __init__(self) -> None:
        self._frames: deque[bytes] = deque()
        self._bytes = 0
        self._has_data = asyncio.Event()
        self._has_room = asyncio.Event()
        self._has_room.set()
        self._closed = False
        self._failed = False
        self._now: Callable[[bytes], bool] | None = None  # the writer's `write_now`, while it is idle

    def put(self, message: dict[str, Any], *, at_once: bool = True) -> None:
        """Send `message` without waiting: written now when the writer is idle and can, else
        queued (raises ValueError or TypeError for one that is not JSON). Without `at_once` it
        is queued for the writer's task, so that what is sent before that task runs (a
        response's follow-up notifications) goes out with it, in one write."""
        self._put(encode(message), at_once=at_once)

    async def send(self, message: dict[str, Any]) -> None:
        """Queue `message`, then wait while the output is over the high-water mark."""
        self.put(message)
        await self.room()

    async def send_encoded(self, frame: bytes) -> None:
        """`send` of a frame already encoded as `encode` does (one line, ending in a newline)."""
        self._put(frame)
        await self.room()

    def _put(self, data: bytes, *, at_once: bool = True) -> None:
        if at_once and self._now is not None and not self._frames:
            # The writer waits for data with nothing in hand: write at once, on the caller's
            # turn of the loop, rather than wake the writer's task for another iteration.
            try:
                if self._now(data):
                    return
            except (BrokenPipeError, ConnectionError, OSError) as exc:
                self._fail(exc)
                return
        self._frames.append(data)
        self._bytes += len(data)
        self._has_data.set()

    async def room(self) -> None:
        while self._bytes > HIGH_WATER_BYTES and not self._failed:
            self._has_room.clear()
            await self._has_room.wait()

    def close(self) -> None:
        """Nothing more will be queued: `run` returns once the queue is written."""
        self._closed = True
        self._has_data.set()

    async def run(self, writer: FrameWriter) -> None:
        immediate = writer.write_now if isinstance(writer, ImmediateWriter) else None
        while True:
            while not self._frames:
                if self._closed:
                    return
                self._has_data.clear()
                self._now = None if self._failed else immediate
                try:
                    await self._has_data.wait()
                finally:
                    self._now = None
            data = b"".join(self._frames)
            self._frames.clear()
            self._bytes = 0
            self._has_room.set()
            if self._failed:
                continue
            try:
                await writer.write(data)
            except (BrokenPipeError, ConnectionError, OSError) as exc:
                self._fail(exc)

    def _fail(self, exc: OSError) -> None:
        log.warning("output closed by the other side: %s", exc)
        self._failed = True
        self._now = None
