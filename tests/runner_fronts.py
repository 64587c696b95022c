"""Runner-mode fronts as real subprocesses, each in its own process group (as an editor starts
them), with the runtime and data directories of one test; and ways to find their runners."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stdio_server import StdioServer

ROOT = Path(__file__).resolve().parent.parent


class Front(StdioServer):
    """`acp-server --runner ...` in a new session; `kill_group` SIGKILLs its whole group.
    `mode` replaces `--runner`: `["--remote", HOST, ...]` makes it a remote front over ssh."""

    def __init__(self, *args: str, cwd: str | None = None, mode: tuple[str, ...] = ("--runner",)) -> None:
        self.unstable = "--unstable" in args  # its frames are checked against the unstable schema
        self.process = subprocess.Popen(
            [sys.executable, "-m", "acp_server", *mode, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            start_new_session=True,
        )
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self.frames: list[dict[str, Any]] = []
        self.methods: dict[Any, str] = {}
        self._next_id = 0
        self.permission_option = "allow_once"
        self.stderr = b""
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self._stderr_thread = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_thread.start()

    def kill_group(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def initialize(self) -> None:
        self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_server", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def runners() -> list[dict[str, Any]]:
    done = cli("runner", "status", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def stop_runners() -> None:
    """End the runners a test started: what `runner stop` does, run in this process (a subprocess
    for it and one for `runner status` cost two server start-ups per test), then SIGKILL for any
    runner still there."""
    from acp_server.cli.runner import run_runner_command, running

    started = [status["pid"] for status in running()]
    if started:
        with contextlib.redirect_stdout(io.StringIO()):
            run_runner_command(
                argparse.Namespace(runner_command="stop", pid=None), argparse.ArgumentParser(), build=None
            )  # type: ignore[arg-type]
    for pid in started:
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def scripted_runner(tmp_path: Path, monkeypatch: Any, script: Any) -> Iterator[tuple[str, ...]]:
    """The scripted agent's options (`script`, a journal) with runtime and data directories of the
    test's own; the runners they started are stopped on leaving."""
    run_dir = short_runtime_dir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", run_dir)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    try:
        yield ("--agent", "scripted", "--script", str(path), "--db", str(tmp_path / "journal.db"))
    finally:
        stop_runners()
        shutil.rmtree(run_dir, ignore_errors=True)


def short_runtime_dir() -> str:
    """A Unix socket path must stay under ~100 bytes: pytest's tmp_path can be longer."""
    return tempfile.mkdtemp(prefix="acpr-", dir="/tmp")


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def ended(pid: int) -> bool:
    """Gone, or dead but not yet reaped by its parent (a zombie still answers signal 0)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def wait_until(condition, timeout: float = 30, what: str = "the condition") -> None:
    """Wait for an outside process to reach a state (there is no event to wait on across processes)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
