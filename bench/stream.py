"""Benchmark: how fast one `say` turn streams to a minimal ACP client over stdio.

Starts `python -m acp_server --agent scripted` as a subprocess with a scenario that says one
short text N times, sends initialize / session/new / session/prompt, and reads stdout with a
plain blocking reader until the prompt's response. Reports chunks per second and the server's
CPU seconds per 1,000 deltas (Linux /proc). When the server has a journal (`--db`), each run
gets a fresh one in a temporary directory. A benchmark, not a test: nothing is asserted about
speed; only the received text is checked.

    .venv/bin/python bench/stream.py [--deltas N] [--runs K] [--text TEXT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parent.parent
MATCH = "stream"


def has_journal() -> bool:
    """Whether this server version takes `--db` (a journal); without it, nothing is stored."""
    sys.path.insert(0, str(REPO))
    from acp_server.cli.settings import SERVER_OPTIONS

    return any(flag == "--db" for flag, _ in SERVER_OPTIONS)


@dataclass(frozen=True, slots=True)
class Run:
    deltas: int
    frames: int
    chars: int
    wall: float
    cpu: float | None
    stop_reason: str

    @property
    def deltas_per_second(self) -> float:
        return self.deltas / self.wall

    @property
    def frames_per_second(self) -> float:
        return self.frames / self.wall

    @property
    def cpu_per_1000_deltas(self) -> float | None:
        return None if self.cpu is None else self.cpu / (self.deltas / 1000)


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of a process (all its threads), or None where /proc is missing."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces; the fields after it are fixed.
    fields = stat.rsplit(")", 1)[1].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


class Client:
    """Just enough of an ACP client: write a request line, read lines until its response."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self._in: IO[bytes] = proc.stdin
        self._out: IO[bytes] = proc.stdout
        self._next_id = 0
        self.frames = 0
        self.chars = 0

    def send(self, method: str, params: dict[str, Any]) -> int:
        request_id = self._next_id
        self._next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        self._in.write(line.encode() + b"\n")
        self._in.flush()
        return request_id

    def wait_for(self, request_id: int) -> Any:
        while True:
            line = self._out.readline()
            if not line:
                raise SystemExit("the server closed stdout before answering")
            message = json.loads(line)
            if message.get("id") == request_id and "method" not in message:
                if "error" in message:
                    raise SystemExit(f"request {request_id} failed: {message['error']}")
                return message["result"]
            if message.get("method") == "session/update":
                update = message["params"]["update"]
                if update.get("sessionUpdate") == "agent_message_chunk":
                    self.frames += 1
                    self.chars += len(update["content"]["text"])
            elif "method" in message and "id" in message:
                raise SystemExit(f"unexpected request from the server: {message['method']}")


def run_once(script: Path, deltas: int, text: str, workdir: str, db: Path | None) -> Run:
    command = [sys.executable, "-m", "acp_server", "--agent", "scripted", "--script", str(script)]
    if db is not None:
        command += ["--db", str(db)]
    proc = subprocess.Popen(command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        client = Client(proc)
        client.wait_for(client.send("initialize", {"protocolVersion": 1, "clientCapabilities": {}}))
        session = client.wait_for(client.send("session/new", {"cwd": workdir, "mcpServers": []}))
        cpu_before = cpu_seconds(proc.pid)
        started = time.perf_counter()
        prompt_id = client.send(
            "session/prompt",
            {
                "sessionId": session["sessionId"],
                "prompt": [{"type": "text", "text": MATCH}],
            },
        )
        result = client.wait_for(prompt_id)
        wall = time.perf_counter() - started
        cpu_after = cpu_seconds(proc.pid)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return Run(deltas, client.frames, client.chars, wall, cpu, result["stopReason"])


def show(label: str, run: Run) -> None:
    cpu = "n/a" if run.cpu is None else f"{run.cpu:.2f}"
    per_1000 = "n/a" if run.cpu_per_1000_deltas is None else f"{run.cpu_per_1000_deltas:.4f}"
    print(
        f"{label:>7}  {run.deltas:>7}  {run.frames:>7}  {run.chars:>9}  {run.wall:>7.3f}  "
        f"{run.deltas_per_second:>10,.0f}  {run.frames_per_second:>10,.0f}  {cpu:>7}  {per_1000:>9}"
    )


def median_run(runs: list[Run]) -> Run:
    cpus = [r.cpu for r in runs if r.cpu is not None]
    return Run(
        deltas=runs[0].deltas,
        frames=round(statistics.median(r.frames for r in runs)),
        chars=round(statistics.median(r.chars for r in runs)),
        wall=statistics.median(r.wall for r in runs),
        cpu=statistics.median(cpus) if len(cpus) == len(runs) else None,
        stop_reason=runs[0].stop_reason,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deltas", type=int, default=20_000, help="text deltas the agent emits (default 20000)")
    parser.add_argument("--runs", type=int, default=3, help="runs, each with a fresh server (default 3)")
    parser.add_argument("--text", default="x" * 16, help="the text of each delta (default 16 x's)")
    args = parser.parse_args()
    if args.deltas < 1 or args.runs < 1 or not args.text:
        parser.error("--deltas and --runs must be at least 1 and --text not empty")

    expected = args.deltas * len(args.text)
    scenario = {"scenarios": [{"match": MATCH, "steps": [{"say": args.text, "repeat": args.deltas}]}]}
    journal = has_journal()
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; "
        f"{args.deltas} deltas of {len(args.text)} chars, {args.runs} runs; "
        f"journal: {'a fresh SQLite file per run' if journal else 'none'}"
    )
    print("    run   deltas   frames      chars   wall s    deltas/s    frames/s   cpu s  cpu s/1k")
    runs: list[Run] = []
    with tempfile.TemporaryDirectory() as workdir:
        script = Path(workdir, "stream.json")
        script.write_text(json.dumps(scenario), encoding="utf-8")
        for index in range(args.runs):
            db = Path(workdir, f"journal-{index + 1}.db") if journal else None
            run = run_once(script, args.deltas, args.text, workdir, db)
            if run.chars != expected or run.stop_reason != "end_turn":
                print(
                    f"run {index + 1}: received {run.chars} chars (expected {expected}), stopReason {run.stop_reason}",
                    file=sys.stderr,
                )
                return 1
            runs.append(run)
            show(str(index + 1), run)
    show("median", median_run(runs))
    print(f"chars received = {args.deltas} x {len(args.text)} = {expected}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
