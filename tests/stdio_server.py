"""A real `acp-server` subprocess over real pipes, for tests: send lines, read frames.

Every line the server writes on stdout is parsed as JSON and validated against the schema;
anything else fails the test.
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
from typing import Any

from schema_check import check_agent_frame


class StdioServer:
    def __init__(self, *args: str, cwd: str | None = None, env: dict[str, str] | None = None) -> None:
        # A server run with --unstable (or ACP_SERVER_UNSTABLE=1) is checked against the unstable schema.
        self.unstable = "--unstable" in args or (env or {}).get("ACP_SERVER_UNSTABLE") == "1"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "acp_server", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
        )
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self.frames: list[dict[str, Any]] = []
        self.methods: dict[Any, str] = {}
        self._next_id = 0
        self.permission_option = "allow_once"  # how `response` answers permission requests
        self.stderr = b""
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self._stderr_thread = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_thread.start()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        self.stderr = self.process.stderr.read()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> int:
        self._next_id += 1
        self.methods[self._next_id] = method
        self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return self._next_id

    def next_frame(self, timeout: float = 20) -> dict[str, Any] | None:
        line = self._lines.get(timeout=timeout)
        if line is None:
            return None
        assert line.endswith(b"\n")
        frame = json.loads(line)
        answered = self.methods.get(frame.get("id")) if "method" not in frame else None
        check_agent_frame(frame, answered, unstable=self.unstable)
        self.frames.append(frame)
        return frame

    def response(self, request_id: int, timeout: float = 20) -> dict[str, Any]:
        """Read frames until the response to `request_id`; answers permission requests with
        `permission_option`."""
        while True:
            frame = self.next_frame(timeout)
            assert frame is not None, f"stdout closed before the response to {request_id}{self.exit_report()}"
            if frame.get("id") == request_id and "method" not in frame:
                return frame
            if frame.get("method") == "session/request_permission":
                self.send(
                    {
                        "jsonrpc": "2.0",
                        "id": frame["id"],
                        "result": {"outcome": {"outcome": "selected", "optionId": self.permission_option}},
                    }
                )

    def exit_report(self) -> str:
        """How the process ended and the tail of its stderr, for a failure message."""
        try:
            code: int | str = self.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = "still running"
        tail = self.stderr.decode(errors="replace")[-4000:]
        return f"\n--- server exit status {code}; its stderr:\n{tail}"

    def call(self, method: str, params: dict[str, Any]) -> Any:
        frame = self.response(self.request(method, params))
        assert "result" in frame, frame
        return frame["result"]

    def start_session(self, cwd: str) -> str:
        self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        return self.call("session/new", {"cwd": cwd, "mcpServers": []})["sessionId"]

    def close_stdin(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()

    def terminate(self) -> None:
        self.process.send_signal(signal.SIGTERM)

    def wait(self, timeout: float = 10) -> int:
        code = self.process.wait(timeout)
        self._stderr_thread.join(timeout)
        return code

    def remaining_frames(self) -> list[dict[str, Any]]:
        frames = []
        while (frame := self.next_frame()) is not None:
            frames.append(frame)
        return frames

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
