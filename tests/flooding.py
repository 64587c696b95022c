"""A client that floods a real server (or a runner's front) with `session/list` requests while it
reads nothing of its stdout, then reads every answer; memory from Linux /proc/PID/status."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from schema_check import check_agent_frame
from stdio_server import StdioServer

FLOOD_REQUESTS = 60_000  # more than the pipes and the server's buffers hold (about 40,000 answers)
GROWTH_LIMIT_KB = 25 * 1024  # the bounds allow about 5 MB
HOLD = 8.0  # seconds at most the client holds off reading (less once the growth is over the limit)
SAMPLE_EVERY = 0.1
ANSWER_TIMEOUT = 60.0


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


class Flood(StdioServer):
    """The server's stdout is read by a thread that stops taking lines while `reading` is clear."""

    def __init__(self, *args: str, cwd: str) -> None:
        self.cwd = cwd
        self.reading = threading.Event()
        self.reading.set()
        self._writer: threading.Thread | None = None
        self._first_id = 0
        super().__init__(*args, cwd=cwd)

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
            self.reading.wait()
        self._lines.put(None)

    def prepare(self) -> None:
        self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

    def hold(self, pid: int, count: int) -> tuple[int, bool]:
        """Stop reading and write `count` requests from a thread for HOLD seconds at most: the
        largest growth of `pid`'s RSS (kB) seen, and whether every request could be written."""
        self.reading.clear()
        self._first_id = self._next_id + 1
        self._next_id += count
        baseline = rss_kb(pid)
        written = threading.Event()
        self._writer = threading.Thread(target=self._write_flood, args=(count, written), daemon=True)
        self._writer.start()
        growth = 0
        deadline = time.monotonic() + HOLD
        while not written.wait(SAMPLE_EVERY) and time.monotonic() < deadline and growth < GROWTH_LIMIT_KB:
            growth = max(growth, rss_kb(pid) - baseline)
        return max(growth, rss_kb(pid) - baseline), written.is_set()

    def _write_flood(self, count: int, written: threading.Event) -> None:
        assert self.process.stdin is not None
        try:
            for n in range(self._first_id, self._first_id + count):
                self.process.stdin.write(b'{"jsonrpc":"2.0","id":%d,"method":"session/list","params":{}}\n' % n)
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # the server is gone; the test's reading says why
        finally:
            written.set()

    def read_all(self, count: int) -> None:
        """Read again: every request of the flood gets exactly one answer, each valid."""
        self.reading.set()
        expected = range(self._first_id, self._first_id + count)
        seen: set[int] = set()
        shapes: set[str] = set()
        while len(seen) < count:
            line = self._lines.get(timeout=ANSWER_TIMEOUT)
            assert line is not None, f"stdout closed after {len(seen)} answers{self.exit_report()}"
            frame: dict[str, Any] = json.loads(line)
            request_id = frame.pop("id", None)
            assert request_id in expected and request_id not in seen, f"unexpected frame {frame}"
            seen.add(request_id)
            shape = json.dumps(frame, sort_keys=True)
            if shape not in shapes:  # the answers differ only in their ids: validate each kind once
                shapes.add(shape)
                check_agent_frame({"id": request_id, **frame}, "session/list")
        assert self._writer is not None
        self._writer.join(ANSWER_TIMEOUT)

    def prompt(self) -> dict[str, Any]:
        sid = self.call("session/new", {"cwd": self.cwd, "mcpServers": []})["sessionId"]
        return self.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
