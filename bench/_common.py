"""Shared pieces of the comparison benchmark (bench/compare.py): child processes that are always
killed, deadlines on blocking reads, /proc readings, a minimal blocking ACP client, statistics.

Nothing here imports the package under test, so the helpers also drive the SDK agent and the
raw floor.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
PY = sys.executable
CLK_TCK = os.sysconf("SC_CLK_TCK")

# Children run as an editor would start them: with bytecode caching (this sandbox exports
# PYTHONDONTWRITEBYTECODE=1, which would recompile the package from source at every start) and
# with buffered stdio (PYTHONUNBUFFERED=1 would make the raw floor write one frame per syscall).
# The bytecode goes to a cache directory of the benchmark's own, never into the source tree.
CHILD_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")}


def set_pycache(directory: str | Path) -> None:
    CHILD_ENV["PYTHONPYCACHEPREFIX"] = str(directory)


def checkout_server(checkout: Path) -> list[str]:
    """`acp-server` from another checkout (`--before DIR`), run with DIR/.venv's Python and DIR's
    code whatever the child's working directory: `-P` keeps that directory off sys.path (`python
    -m` puts it first, and from this repository it ran this repository's code) and PYTHONPATH puts
    DIR ahead of any editable install the venv points elsewhere. `env` execs: the pid is the server's."""
    python = checkout / ".venv" / "bin" / "python"
    return ["env", f"PYTHONPATH={checkout.resolve()}", str(python), "-P", "-m", "acp_server"]


_children: dict[int, subprocess.Popen[bytes]] = {}
_children_lock = threading.Lock()


class BenchError(Exception):
    """A run went wrong (timeout, early exit, wrong output); the message says which."""


# --- child processes --------------------------------------------------------------------------


def spawn(
    command: Sequence[str],
    *,
    stderr: IO[bytes] | int | None = subprocess.DEVNULL,
    env: dict[str, str] | None = None,
    cwd: Path = REPO,
) -> subprocess.Popen[bytes]:
    """Start a child with piped stdin/stdout, remembered so that it is killed when we exit."""
    proc = subprocess.Popen(
        list(command),
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=CHILD_ENV if env is None else env,
    )
    with _children_lock:
        _children[proc.pid] = proc
    return proc


def stop(proc: subprocess.Popen[bytes], *, grace: float = 5.0) -> None:
    """Close stdin (an ACP agent exits on EOF), wait a little, then kill this one child."""
    for stream in (proc.stdin, proc.stdout):
        with contextlib.suppress(OSError, ValueError):
            if stream is not None:
                stream.close()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    with _children_lock:
        _children.pop(proc.pid, None)


@contextlib.contextmanager
def child(
    command: Sequence[str], label: str, logdir: str | Path, *, cwd: Path = REPO
) -> Iterator[subprocess.Popen[bytes]]:
    """A child whose stderr goes to a file; a failed run's error message ends with its tail."""
    name = "".join(c if c.isalnum() else "-" for c in label)
    log_path = Path(logdir, f"{name}-{time.monotonic_ns()}.stderr")
    with open(log_path, "wb") as log:
        proc = spawn(command, stderr=log, cwd=cwd)
        try:
            yield proc
        except BenchError as exc:
            stop(proc, grace=1.0)
            tail = log_path.read_text(errors="replace")[-2000:].strip()
            raise BenchError(f"{exc}\n--- stderr of {label} ---\n{tail or '(empty)'}") from None
        finally:
            stop(proc)
    log_path.unlink(missing_ok=True)


def kill_children() -> None:
    with _children_lock:
        procs = list(_children.values())
        _children.clear()
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=2)


def _on_signal(signum: int, _frame: Any) -> None:
    kill_children()
    raise SystemExit(128 + signum)


def install_cleanup() -> None:
    """Kill every child we started on exit, on SIGTERM/SIGHUP and on Ctrl-C."""
    atexit.register(kill_children)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _on_signal)


@contextlib.contextmanager
def deadline(proc: subprocess.Popen[bytes], seconds: float, what: str) -> Iterator[None]:
    """Kill `proc` if the block takes longer than `seconds`: a blocked readline then sees EOF."""
    fired = threading.Event()

    def expire() -> None:
        fired.set()
        with contextlib.suppress(OSError):
            proc.kill()

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    except BenchError as exc:
        if fired.is_set():
            raise BenchError(f"{what}: no answer within {seconds:g} s") from exc
        raise
    finally:
        timer.cancel()
    if fired.is_set():
        raise BenchError(f"{what}: no answer within {seconds:g} s")


# --- /proc -----------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of a process (all its threads), or None where /proc is missing."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name may hold spaces
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def run_seconds(pid: int) -> float | None:
    """CPU time of a live process so far, all threads, to the nanosecond (schedstat), or None."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tasks:
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
    return total / 1e9


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of a process in KiB."""
    fields: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0])
    return fields


# --- a minimal blocking ACP client -----------------------------------------------------------


FrameHook = Callable[[bytes, dict[str, Any]], None]


class LineClient:
    """Writes request lines and reads response lines with blocking readline + json.loads."""

    def __init__(self, proc: subprocess.Popen[bytes], label: str) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.label = label
        self._in: IO[bytes] = proc.stdin
        self._out: IO[bytes] = proc.stdout
        self._next_id = 0
        self.frames = 0  # agent_message_chunk notifications
        self.chars = 0  # characters of text in them
        self.notifications = 0  # every notification
        self.arrived_ns = 0  # time.time_ns() when the last line was read

    def send(self, method: str, params: dict[str, Any]) -> int:
        request_id = self._next_id
        self._next_id += 1
        self.write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def write(self, message: dict[str, Any]) -> None:
        try:
            self._in.write(json.dumps(message).encode() + b"\n")
            self._in.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise BenchError(f"{self.label}: the process closed its input") from exc

    def read(self) -> tuple[bytes, dict[str, Any]]:
        line = self._out.readline()
        self.arrived_ns = time.time_ns()
        if not line:
            raise BenchError(f"{self.label}: the process closed stdout (exit status {self.proc.poll()})")
        return line, json.loads(line)

    def wait_for(self, request_ids: int | set[int], on_chunk: FrameHook | None = None) -> Any:
        """Read until every id in `request_ids` is answered; returns the (last) result."""
        waiting = {request_ids} if isinstance(request_ids, int) else set(request_ids)
        result: Any = None
        while waiting:
            line, message = self.read()
            if "method" not in message:
                if message.get("id") in waiting:
                    waiting.discard(message["id"])
                    if "error" in message:
                        raise BenchError(f"{self.label}: request {message['id']} failed: {message['error']}")
                    result = message["result"]
                continue
            if "id" in message:
                raise BenchError(f"{self.label}: unexpected request from the agent: {message['method']}")
            self.notifications += 1
            if message["method"] == "session/update":
                update = message["params"]["update"]
                if update.get("sessionUpdate") == "agent_message_chunk":
                    self.frames += 1
                    self.chars += len(update["content"]["text"])
                    if on_chunk is not None:
                        on_chunk(line, message)
        return result

    def initialize(self) -> Any:
        return self.wait_for(self.send("initialize", {"protocolVersion": 1, "clientCapabilities": {}}))

    def new_session(self, cwd: str) -> str:
        return str(self.wait_for(self.send("session/new", {"cwd": cwd, "mcpServers": []}))["sessionId"])


# --- statistics and formatting ---------------------------------------------------------------


def median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present and len(present) == len(values) else None


def stamp_ages(arrived_ns: int, message: dict[str, Any]) -> list[int]:
    """The age in ns, at `arrived_ns`, of each `time.time_ns()` stamp a latency chunk carries
    (`;`-separated: a frame of merged deltas carries several)."""
    text: str = message["params"]["update"]["content"]["text"]
    return [arrived_ns - int(stamp) for stamp in text.split(";") if stamp]


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), math.ceil(fraction * len(sorted_values))))
    return sorted_values[rank - 1]


def fmt(value: float | None, spec: str = ",.0f", suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{suffix}"


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def progress(text: str) -> None:
    """Progress goes to stderr, so that stdout holds only the report."""
    print(text, file=sys.stderr, flush=True)


def alternate(subjects: Sequence[str], runs: int) -> Iterator[tuple[int, str]]:
    """(run index, subject) in the order A, B, C, A, B, C, ..."""
    for index in range(runs):
        for subject in subjects:
            yield index, subject


def now() -> float:
    return time.perf_counter()
