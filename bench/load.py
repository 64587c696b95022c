"""Benchmark: `session/load` of a long session, measured against a real server process.

Builds a journal holding one session of T turns, each a prompt, C streamed text deltas and a
tool call (started, in progress, completed), written through the journal's own API as a live
server writes it. Then starts `python -m acp_server --db <that file>`, sends initialize and
`session/load`, and reports the time from the load request to its response, the CPU time
the server spent on it (a busy machine stretches the wall time, not this), the notifications
replayed, and the server's resident memory before the load and at its peak (VmRSS / VmHWM
from Linux /proc). A benchmark, not a test: nothing about speed is asserted.

The first load of a session fills its replay cache, so run 1 is the cold load and later runs
the warm one. `--db PATH` keeps the journal (built there unless it exists, then reused as it
is, cache included); copy a fresh one to time a cold load again. The client parses every frame
as an editor would, which on a long session costs it more than the server spends; `--raw` reads
the frames as bytes and only finds the response, so the time is the server's to its last frame.
`--cold` loads a fresh copy of the journal each run (every run replays from the events).
`--haui off` starts the server with HAUI off (replies replayed as written, not through the
fence scanner). A turn's deltas are one line of text, so `--turns 1 --chunks 1000000` times
the replay of a single-line reply of a million pieces (no run over 1 MB is cached: every run
replays from its events).

    .venv/bin/python bench/load.py [--turns 200] [--chunks 50] [--runs 3] [--db PATH] [--raw] [--cold] [--haui off]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from adapters.events import (  # noqa: E402
    Envelope,
    PromptReceived,
    TextContent,
    TextDelta,
    ToolCallStarted,
    ToolCallUpdated,
    TurnFinished,
)
from journal.store import Journal, SessionRecord  # noqa: E402

SESSION_ID = "sess_bench"


async def build(db: Path, turns: int, chunks: int) -> None:
    session_id = SESSION_ID
    async with await Journal.open(db) as journal:
        await journal.create_session(SessionRecord(id=session_id, cwd=str(REPO), title="load benchmark"))
        for turn in range(turns):
            run_id = f"run_{turn:04d}"
            await journal.start_run(run_id=run_id, session_id=session_id)
            events = [
                PromptReceived(({"type": "text", "text": f"question {turn}"},)),
                ToolCallStarted(f"call_{turn}", f"Read file {turn}", "read", raw_input={"path": f"f{turn}.py"}),
                ToolCallUpdated(f"call_{turn}", status="in_progress"),
                ToolCallUpdated(f"call_{turn}", status="completed", content=(TextContent("line\n" * 20),)),
                *(TextDelta(f"word{n} ") for n in range(chunks)),
                TurnFinished("end_turn"),
            ]
            for seq, event in enumerate(events, 1):
                await journal.append(Envelope(run_id, session_id, seq, event, time.time()))
            await journal.finish_run(run_id, "end_turn", stop_reason="end_turn")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process so far (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_kib(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0])
    return fields


@dataclass(frozen=True, slots=True)
class Load:
    seconds: float
    cpu: float
    notifications: int
    rss_kib: int
    peak_kib: int


RESPONSE = b'{"jsonrpc":"2.0","id":2,'  # the load's answer, as the server writes it


def measure(db: Path, session_id: str, *, raw: bool = False, haui: str = "on") -> Load:
    command = [sys.executable, "-m", "acp_server", "--agent", "echo", "--db", str(db), "--haui", haui]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert server.stdin and server.stdout

    def send(message: dict) -> None:
        server.stdin.write(json.dumps(message).encode() + b"\n")
        server.stdin.flush()

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
        json.loads(server.stdout.readline())
        before = memory_kib(server.pid)
        cpu = cpu_seconds(server.pid)
        started = time.perf_counter()
        send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/load",
                "params": {"sessionId": session_id, "cwd": str(REPO), "mcpServers": []},
            }
        )
        notifications, frame = read_raw(server.stdout.fileno()) if raw else read_parsed(server.stdout)
        elapsed = time.perf_counter() - started
        cpu = cpu_seconds(server.pid) - cpu
        after = memory_kib(server.pid)
        assert "result" in frame, frame
        return Load(elapsed, cpu, notifications, before["VmRSS"], after["VmHWM"])
    finally:
        server.stdin.close()
        server.wait(10)


def read_parsed(stdout: Any) -> tuple[int, dict[str, Any]]:
    notifications = 0
    while True:
        frame = json.loads(stdout.readline())
        if frame.get("id") == 2:
            return notifications, frame
        notifications += 1


def read_raw(fd: int) -> tuple[int, dict[str, Any]]:
    """The frames as bytes in large reads: lines counted, only the answer parsed."""
    pending, lines = b"", 0
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            raise EOFError("the server exited before answering")
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if line.startswith(RESPONSE):
                return lines, json.loads(line)
            lines += 1


def fresh(db: Path, tmp: Path) -> Path:
    """A copy of the journal as built, its replay cache empty: the load replays every run."""
    copy = tmp / "cold.db"
    for suffix in ("-wal", "-shm", ""):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(db, copy)
    with sqlite3.connect(copy) as connection:
        connection.execute("DELETE FROM run_cache")
    connection.close()
    return copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--chunks", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--db", type=Path, help="keep the journal here (reused if it exists)")
    parser.add_argument("--raw", action="store_true", help="do not parse the frames (the server's time alone)")
    parser.add_argument("--haui", choices=("on", "off"), default="on", help="the server's --haui (default on)")
    parser.add_argument("--cold", action="store_true", help="every run loads a fresh copy (no replay cache)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db: Path = args.db or Path(tmp) / "journal.db"
        if db.exists():
            print(f"reusing {db} ({db.stat().st_size / 1e6:.1f} MB)")
        else:
            started = time.perf_counter()
            asyncio.run(build(db, args.turns, args.chunks))
            print(
                f"built {args.turns} turns x {args.chunks} chunks + a tool call each "
                f"in {time.perf_counter() - started:.2f} s ({db.stat().st_size / 1e6:.1f} MB)"
            )
        results = [
            measure(fresh(db, Path(tmp)) if args.cold else db, SESSION_ID, raw=args.raw, haui=args.haui)
            for _ in range(args.runs)
        ]
    for n, load in enumerate(results, 1):
        print(
            f"run {n}: load {load.seconds * 1000:.1f} ms (server CPU {load.cpu * 1000:.0f} ms), "
            f"{load.notifications} notifications, RSS before {load.rss_kib / 1024:.1f} MB, "
            f"peak {load.peak_kib / 1024:.1f} MB (+{(load.peak_kib - load.rss_kib) / 1024:.1f} MB)"
        )
    warm = results if args.cold else results[1:] or results
    which = "cold" if args.cold else "warm"
    print(
        f"median load time ({which} runs): {statistics.median(r.seconds for r in warm) * 1000:.1f} ms, "
        f"server CPU {statistics.median(r.cpu for r in warm) * 1000:.0f} ms; "
        f"median peak RSS growth: {statistics.median((r.peak_kib - r.rss_kib) / 1024 for r in results):.1f} MB"
    )


if __name__ == "__main__":
    main()
