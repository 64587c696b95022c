"""The wire trace (`--trace FILE`): every frame in both directions appended to a file as JSON lines.

`traced_frames` (in) and `TracedWriter` (out) hand the frames' bytes to a `Trace`, whose own
thread parses, redacts (with functions the caller injects: this layer knows nothing of secrets)
and writes them in batches, so neither a slow trace file nor a huge frame holds up serving.
Lines: `{"t", "dir", "frame"}`, or `"raw"` for text that was not JSON, `"oversized"` for a line over
the frame limit (its size), `"dropped"` for frames left out while the file fell behind.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import IO, Any

from acp_server.rpc.wire import Frame, FrameWriter, ImmediateWriter, Oversized
from journal.private import open_private_append

log = logging.getLogger(__name__)

RAW_SCAN = 1 << 16  # text that was not JSON: this much is redacted ...
RAW_CAP = 4096  # ... and this much of that is kept
BACKLOG_BYTES = 64 << 20  # frames waiting for the file beyond this are counted, not kept
CLOSE_GRACE = 5.0  # seconds `close` waits for the backlog to reach the file

_encode = json.JSONEncoder(separators=(",", ":")).encode
_STOP = object()


class Trace:
    """Open with `Trace.open(path, redact=..., redact_text=...)`; `close()` flushes and stops."""

    def __init__(self, file: IO[bytes], *, redact: Callable[[Any], Any], redact_text: Callable[[str], str]) -> None:
        self._file = file
        self._redact = redact
        self._redact_text = redact_text
        self._started = time.monotonic()
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._backlog = 0  # bytes queued, not yet written
        self._dropped = 0
        self._failed = False
        self._thread = threading.Thread(target=self._run, name="wire-trace", daemon=True)
        self._thread.start()

    @classmethod
    def open(cls, path: str, *, redact: Callable[[Any], Any], redact_text: Callable[[str], str]) -> Trace:
        """Appends to `path`, created 0600 (it holds prompts and file contents); raises OSError when it
        cannot be opened for appending or is a symlink or another user's file (a start-up error)."""
        return cls(open(open_private_append(path), "ab"), redact=redact, redact_text=redact_text)  # closed by close()

    def incoming(self, frame: Frame) -> None:
        if isinstance(frame, Oversized):
            self._put("in", frame.size, 0)
        elif frame.strip():
            self._put("in", frame, len(frame))

    def outgoing(self, data: bytes) -> None:
        """`data` holds one or more whole frames, each ending in a newline."""
        self._put("out", data, len(data))

    def close(self) -> None:
        self._queue.put(_STOP)
        self._thread.join(CLOSE_GRACE)
        if self._thread.is_alive():
            log.warning("the wire trace fell behind; its last frames are missing")
            return
        self._file.close()

    def _put(self, direction: str, data: bytes | int, size: int) -> None:
        at = time.monotonic()
        with self._lock:
            if self._backlog + size > BACKLOG_BYTES or self._failed:
                self._dropped += 1
                return
            self._backlog += size
        self._queue.put((direction, data, at, size))

    # --- the trace's thread ----------------------------------------------------------------

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < 512:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(item is _STOP for item in batch)
            self._write([item for item in batch if item is not _STOP])
            if stop:
                return

    def _write(self, batch: list[Any]) -> None:
        lines: list[str] = []
        for direction, data, at, _size in batch:
            lines += self._lines(direction, data, at - self._started)
        with self._lock:
            self._backlog -= sum(size for *_item, size in batch)
            dropped, self._dropped = self._dropped, 0
        if dropped:
            lines.append(_encode({"t": _seconds(time.monotonic() - self._started), "dropped": dropped}))
        if not lines or self._failed:
            return
        try:
            self._file.write(("\n".join(lines) + "\n").encode())
            self._file.flush()
        except (OSError, ValueError) as exc:
            self._failed = True
            log.warning("the wire trace stopped: %s", exc)

    def _lines(self, direction: str, data: bytes | int, elapsed: float) -> list[str]:
        t = _seconds(elapsed)
        if isinstance(data, int):
            return [_encode({"t": t, "dir": direction, "oversized": data})]
        lines: list[str] = []
        for line in data.split(b"\n"):
            if line.strip():
                lines.append(_encode({"t": t, "dir": direction, **self._entry(line)}))
        return lines

    def _entry(self, line: bytes) -> dict[str, Any]:
        text = line.decode("utf-8", errors="replace")
        try:
            return {"frame": self._redact(json.loads(text))}
        except (ValueError, RecursionError):
            redacted = self._redact_text(text[:RAW_SCAN])
            capped = len(text) > RAW_SCAN or len(redacted) > RAW_CAP
            return {"raw": redacted[:RAW_CAP] + ("..." if capped else "")}


def _seconds(elapsed: float) -> float:
    return round(elapsed, 6)


async def traced_frames(frames: AsyncIterable[Frame], trace: Trace) -> AsyncIterator[Frame]:
    """`frames`, each traced as it is read."""
    async for frame in frames:
        trace.incoming(frame)
        yield frame


class TracedWriter:
    """A `FrameWriter` that traces what it is given before writing it."""

    def __init__(self, inner: FrameWriter, trace: Trace) -> None:
        self._inner = inner
        self._trace = trace
        self._now = inner.write_now if isinstance(inner, ImmediateWriter) else None

    async def write(self, data: bytes) -> None:
        self._trace.outgoing(data)
        await self._inner.write(data)

    def write_now(self, data: bytes) -> bool:
        if self._now is None or not self._now(data):
            return False
        self._trace.outgoing(data)
        return True

    async def aclose(self) -> None:
        await self._inner.aclose()
