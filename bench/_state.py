"""Sections 3 to 5 of bench/compare.py: cold start (ours to `initialize` and to `session/new`, the
SDK agent, `python -c pass`),
`session/load` of a long session, and memory per idle session after `session/resume`.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from _common import (
    BENCH,
    PY,
    BenchError,
    LineClient,
    alternate,
    child,
    deadline,
    memory_kib,
    now,
    progress,
    run_seconds,
    spawn,
    stop,
)

COLD_SUBJECTS = ("ours", "ours_new", "sdk", "python")
COLD_LABELS = {"ours": "acp-server", "ours_new": "-> session/new", "sdk": "SDK agent", "python": "python -c pass"}
INIT_LINE = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}\n'
TIMEOUT = 60.0


# --- cold start ------------------------------------------------------------------------------


def cold_command(subject: str, tmp: Path) -> list[str]:
    if subject in ("ours", "ours_new"):
        return [PY, "-m", "acp_server", "--agent", "echo", "--db", str(tmp / "cold.db")]
    if subject == "sdk":
        return [PY, str(BENCH / "sdk_agent.py")]
    return [PY, "-c", "pass"]


def new_session_line(cwd: Path) -> bytes:
    params = {"cwd": str(cwd), "mcpServers": []}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": params}).encode() + b"\n"


def cold_once(subject: str, tmp: Path) -> tuple[float, float | None]:
    """Seconds from fork+exec to the initialize response (`ours_new`: to the session/new response
    sent right behind it, as editors do; `python -c pass`: to exit), and the CPU seconds the
    process had spent by then (all threads; a busy machine stretches the first, less so this)."""
    command = cold_command(subject, tmp)
    started = now()
    proc = spawn(command)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        with deadline(proc, TIMEOUT, f"cold start of {COLD_LABELS[subject]}"):
            if subject == "python":
                _, status, usage = os.wait4(proc.pid, 0)
                elapsed = now() - started
                proc.returncode = os.waitstatus_to_exitcode(status)
                return elapsed, usage.ru_utime + usage.ru_stime
            proc.stdin.write(INIT_LINE + (new_session_line(tmp) if subject == "ours_new" else b""))
            proc.stdin.flush()
            line = proc.stdout.readline()
            while subject == "ours_new" and line and not line.startswith(b'{"jsonrpc":"2.0","id":1,'):
                line = proc.stdout.readline()  # initialize's response comes first
            elapsed, cpu = now() - started, run_seconds(proc.pid)
            if b'"result"' not in line:
                raise BenchError(f"cold start of {COLD_LABELS[subject]}: no result: {line[:200]!r}")
            return elapsed, cpu
    finally:
        stop(proc)


def cold_start(tmp: Path, runs: int, *, with_sdk: bool = True) -> dict[str, tuple[float, float | None]]:
    """Per subject: the median seconds to its answer, and the median CPU seconds by then."""
    subjects = COLD_SUBJECTS if with_sdk else tuple(s for s in COLD_SUBJECTS if s != "sdk")
    for subject in subjects:  # warm-up: page cache, .pyc files, the journal file created
        cold_once(subject, tmp)
    times: dict[str, list[tuple[float, float | None]]] = {s: [] for s in subjects}
    for _, subject in alternate(subjects, runs):
        times[subject].append(cold_once(subject, tmp))
    for subject, values in times.items():
        shown = " ".join(f"{wall * 1000:.0f}" for wall, _ in values)
        progress(f"  cold start {COLD_LABELS[subject]:<15} runs (ms): {shown}")
    return {subject: (statistics.median(w for w, _ in v), _median_cpu(v)) for subject, v in times.items()}


def _median_cpu(values: list[tuple[float, float | None]]) -> float | None:
    cpu = [c for _, c in values if c is not None]
    return statistics.median(cpu) if cpu else None


# --- session/load of a long session -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoadSummary:
    runs: int
    turns: int
    chunks: int
    db_mb: float
    seconds: float
    notifications: int
    rss_before_mib: float
    peak_growth_mib: float


def load_once(db: Path, session_id: str, tmp: Path, cwd: Path) -> tuple[float, int, int, int]:
    label = "acp-server (session/load)"
    with child([PY, "-m", "acp_server", "--agent", "echo", "--db", str(db)], label, tmp) as proc:
        client = LineClient(proc, label)
        with deadline(proc, TIMEOUT, f"{label}: initialize"):
            client.initialize()
        before = memory_kib(proc.pid)
        with deadline(proc, TIMEOUT, label):
            started = now()
            client.wait_for(client.send("session/load", {"sessionId": session_id, "cwd": str(cwd), "mcpServers": []}))
            elapsed = now() - started
        after = memory_kib(proc.pid)
    return elapsed, client.notifications, before["VmRSS"], after["VmHWM"]


def session_load(tmp: Path, runs: int, turns: int, chunks: int) -> LoadSummary:
    from load import REPO, build  # bench/load.py's builder: prompt, tool call, text deltas per turn

    db = tmp / "load.db"
    started = now()
    session_id = asyncio.run(build(db, turns, chunks))
    progress(f"  built {turns} turns x {chunks} chunks in {now() - started:.2f} s ({db.stat().st_size / 1e6:.1f} MB)")
    results = []
    for index in range(runs):
        elapsed, notifications, rss, peak = load_once(db, session_id, tmp, REPO)  # the cwd the session was built with
        results.append((elapsed, notifications, rss, peak))
        progress(
            f"  load run {index + 1}/{runs}: {elapsed * 1000:.1f} ms, {notifications} notifications, "
            f"RSS {rss / 1024:.1f} MiB -> peak {peak / 1024:.1f} MiB"
        )
    return LoadSummary(
        runs=runs,
        turns=turns,
        chunks=chunks,
        db_mb=db.stat().st_size / 1e6,
        seconds=statistics.median(r[0] for r in results),
        notifications=round(statistics.median(r[1] for r in results)),
        rss_before_mib=statistics.median(r[2] for r in results) / 1024,
        peak_growth_mib=statistics.median((r[3] - r[2]) / 1024 for r in results),
    )


# --- memory per idle session after restore ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemorySummary:
    runs: int
    sessions: int
    rss_before_mib: float
    rss_after_mib: float
    kib_per_session: float


async def build_sessions(db: Path, count: int, cwd: str) -> list[str]:
    """`count` journaled sessions, each with one finished turn (a prompt and a few deltas)."""
    from adapters.events import Envelope, PromptReceived, TextDelta, TurnFinished
    from journal.store import Journal, SessionRecord

    ids = [f"sess_idle_{n:04d}" for n in range(count)]
    async with await Journal.open(db) as journal:
        for session_id in ids:
            await journal.create_session(SessionRecord(id=session_id, cwd=cwd, title=f"idle {session_id}"))
            run_id = f"run_{session_id}"
            await journal.start_run(run_id=run_id, session_id=session_id)
            events = [
                PromptReceived(({"type": "text", "text": "hello"},)),
                *(TextDelta(f"word{n} ") for n in range(5)),
                TurnFinished("end_turn"),
            ]
            for seq, event in enumerate(events, 1):
                await journal.append(Envelope(run_id, session_id, seq, event, time.time()))
            await journal.finish_run(run_id, "end_turn", stop_reason="end_turn")
    return ids


def memory_once(db: Path, warm_id: str, ids: list[str], tmp: Path) -> tuple[int, int]:
    label = "acp-server (session/resume)"
    with child([PY, "-m", "acp_server", "--agent", "echo", "--db", str(db)], label, tmp) as proc:
        client = LineClient(proc, label)

        def resume(session_ids: list[str]) -> None:
            client.wait_for(
                {
                    client.send("session/resume", {"sessionId": sid, "cwd": str(tmp), "mcpServers": []})
                    for sid in session_ids
                }
            )

        with deadline(proc, TIMEOUT, label):
            client.initialize()
            resume([warm_id])  # first-use costs (lazy imports, caches) are not per session
            time.sleep(0.2)
            before = memory_kib(proc.pid)["VmRSS"]
            resume(ids)
            time.sleep(0.2)
            after = memory_kib(proc.pid)["VmRSS"]
    return before, after


def idle_memory(tmp: Path, runs: int, sessions: int) -> MemorySummary:
    db = tmp / "idle.db"
    all_ids = asyncio.run(build_sessions(db, sessions + 1, str(tmp)))
    warm_id, ids = all_ids[0], all_ids[1:]
    results = []
    for index in range(runs):
        before, after = memory_once(db, warm_id, ids, tmp)
        results.append((before, after))
        progress(
            f"  resume run {index + 1}/{runs}: RSS {before / 1024:.1f} MiB -> {after / 1024:.1f} MiB "
            f"({(after - before) / sessions:.1f} KiB/session)"
        )
    return MemorySummary(
        runs=runs,
        sessions=sessions,
        rss_before_mib=statistics.median(r[0] for r in results) / 1024,
        rss_after_mib=statistics.median(r[1] for r in results) / 1024,
        kib_per_session=statistics.median((r[1] - r[0]) / sessions for r in results),
    )
