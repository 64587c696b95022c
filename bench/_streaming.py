"""Sections 1 and 2 of bench/compare.py: streaming throughput of one long `say` turn (ours with
the journal on, the SDK reference agent, the raw floor), and delta latency while 8 sessions
stream at once (ours, through bench/latency_agent.py).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import (
    BENCH,
    PY,
    BenchError,
    LineClient,
    alternate,
    child,
    cpu_seconds,
    deadline,
    median,
    now,
    percentile,
    progress,
    stamp_ages,
)

SUBJECTS = ("ours", "sdk", "floor")
LABELS = {"ours": "acp-server (journal on)", "sdk": "SDK agent", "floor": "raw floor"}
TURN_TIMEOUT = 180.0
START_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class StreamRun:
    deltas: int
    frames: int
    chars: int
    wall: float
    cpu: float | None

    @property
    def deltas_per_second(self) -> float:
        return self.deltas / self.wall

    @property
    def cpu_per_1000(self) -> float | None:
        return None if self.cpu is None else self.cpu / (self.deltas / 1000)


@dataclass(frozen=True, slots=True)
class StreamSummary:
    runs: int
    deltas_per_second: float
    frames: float
    wall: float
    cpu: float | None
    cpu_per_1000: float | None


def stream_command(subject: str, tmp: Path, index: int) -> list[str]:
    if subject == "ours":
        return [
            PY,
            "-m",
            "acp_server",
            "--agent",
            "scripted",
            "--script",
            str(tmp / "stream.json"),
            "--db",
            str(tmp / f"stream-{index}.db"),
        ]
    if subject == "sdk":
        return [PY, str(BENCH / "sdk_agent.py")]
    return [PY, str(BENCH / "raw_floor.py")]


def stream_once(subject: str, tmp: Path, index: int, deltas: int, text: str) -> StreamRun:
    label = LABELS[subject]
    with child(stream_command(subject, tmp, index), label, tmp) as proc:
        client = LineClient(proc, label)
        with deadline(proc, START_TIMEOUT, f"{label}: initialize/session/new"):
            client.initialize()
            session_id = client.new_session(str(tmp))
        with deadline(proc, TURN_TIMEOUT, f"{label}: the {deltas}-delta turn"):
            cpu_before = cpu_seconds(proc.pid)
            started = now()
            prompt_id = client.send(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": f"stream {deltas} {text}"}]},
            )
            result = client.wait_for(prompt_id)
            wall = now() - started
            cpu_after = cpu_seconds(proc.pid)
    expected = deltas * len(text)
    if client.chars != expected or result.get("stopReason") != "end_turn":
        raise BenchError(
            f"{label}: received {client.chars} chars (expected {expected}), stopReason {result.get('stopReason')}"
        )
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return StreamRun(deltas, client.frames, client.chars, wall, cpu)


def streaming(
    tmp: Path, runs: int, deltas: int, text: str, subjects: tuple[str, ...] = SUBJECTS
) -> dict[str, StreamSummary]:
    scenario = {"scenarios": [{"match": "stream", "steps": [{"say": text, "repeat": deltas}]}]}
    (tmp / "stream.json").write_text(json.dumps(scenario), encoding="utf-8")
    results: dict[str, list[StreamRun]] = {s: [] for s in subjects}
    for index, subject in alternate(subjects, runs):
        run = stream_once(subject, tmp, index, deltas, text)
        results[subject].append(run)
        progress(
            f"  stream run {index + 1}/{runs} {LABELS[subject]:<24} {run.deltas_per_second:>10,.0f} deltas/s "
            f"{run.frames:>6} frames  {run.wall:.3f} s  cpu {run.cpu}"
        )
    return {
        subject: StreamSummary(
            runs=len(rs),
            deltas_per_second=statistics.median(r.deltas_per_second for r in rs),
            frames=statistics.median(r.frames for r in rs),
            wall=statistics.median(r.wall for r in rs),
            cpu=median([r.cpu for r in rs]),
            cpu_per_1000=median([r.cpu_per_1000 for r in rs]),
        )
        for subject, rs in results.items()
    }


# --- latency ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LatencyRun:
    samples: int
    frames: int
    p50_ms: float
    p99_ms: float
    max_ms: float


@dataclass(frozen=True, slots=True)
class LatencySummary:
    runs: int
    sessions: int
    deltas: int
    interval_ms: float
    samples: int
    frames: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    launcher: str


def latency_launcher() -> str:
    """`--agent module:factory` when the registry takes it, else the fallback launcher script."""
    try:
        from adapters.registry import create_adapter

        adapter: Any = create_adapter("bench.latency_agent:make_agent")
        if getattr(adapter, "name", None) == "latency-probe":
            return "module:factory"
    except Exception:  # an older registry: unknown agent (ValueError) or anything mid-edit
        pass
    return "launcher"


def latency_command(launcher: str, db: Path) -> list[str]:
    if launcher == "module:factory":
        return [PY, "-m", "acp_server", "--agent", "bench.latency_agent:make_agent", "--db", str(db)]
    return [PY, str(BENCH / "_latency_server.py"), "--db", str(db)]


def latency_once(tmp: Path, index: int, launcher: str, sessions: int, deltas: int, interval_ms: float) -> LatencyRun:
    label = "acp-server (latency probe)"
    samples: list[int] = []

    def on_chunk(_line: bytes, message: dict[str, Any]) -> None:
        samples.extend(stamp_ages(client.arrived_ns, message))

    with child(latency_command(launcher, tmp / f"latency-{index}.db"), label, tmp) as proc:
        client = LineClient(proc, label)
        with deadline(proc, START_TIMEOUT, f"{label}: initialize/session/new"):
            client.initialize()
            ids = [client.new_session(str(tmp)) for _ in range(sessions)]
        text = f"latency {deltas} {interval_ms:g}"
        with deadline(proc, TURN_TIMEOUT, f"{label}: {sessions} concurrent turns"):
            prompts = {
                client.send("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
                for sid in ids
            }
            client.wait_for(prompts, on_chunk)
    if len(samples) != sessions * deltas:
        raise BenchError(f"{label}: {len(samples)} stamps arrived, expected {sessions * deltas}")
    samples.sort()
    return LatencyRun(
        len(samples), client.frames, percentile(samples, 0.50) / 1e6, percentile(samples, 0.99) / 1e6, samples[-1] / 1e6
    )


def latency(tmp: Path, runs: int, sessions: int, deltas: int, interval_ms: float) -> LatencySummary:
    launcher = latency_launcher()
    results = []
    for index in range(runs):
        run = latency_once(tmp, index, launcher, sessions, deltas, interval_ms)
        results.append(run)
        progress(
            f"  latency run {index + 1}/{runs}: p50 {run.p50_ms:.3f} ms  p99 {run.p99_ms:.3f} ms  "
            f"max {run.max_ms:.3f} ms  ({run.samples} stamps in {run.frames} frames)"
        )
    return LatencySummary(
        runs=runs,
        sessions=sessions,
        deltas=deltas,
        interval_ms=interval_ms,
        samples=results[0].samples,
        frames=statistics.median(r.frames for r in results),
        p50_ms=statistics.median(r.p50_ms for r in results),
        p99_ms=statistics.median(r.p99_ms for r in results),
        max_ms=statistics.median(r.max_ms for r in results),
        launcher=launcher,
    )
