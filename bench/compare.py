"""Benchmark (issue 6): acp-server side by side with an agent on the official Python SDK and a raw
floor, in one process tree, printing a table of figures, ratios and PASS/MISS against targets.

1. streaming throughput of one 20,000-delta `say` turn (ours with the journal on, the SDK
   reference agent in bench/sdk_agent.py, the raw floor in bench/raw_floor.py);
2. latency from the agent's sink call to the frame read by the client, 8 sessions streaming;
3. cold start: fork+exec to the `initialize` response (ours, SDK agent; `python -c pass`) and,
   for ours, to the `session/new` response (the time to a usable session);
4. `session/load` of a 200-turn x 50-chunk session with tool calls (bench/load.py's builder);
5. memory per idle session after `session/resume` of 200 journaled sessions.

Runs of different subjects alternate (A, B, C, A, B, C, ...); figures are medians. A
benchmark, not a test: the exit status is 1 only when a measurement could not be made.
Needs the SDK, which the `test` extra installs (`.venv/bin/pip install -e '.[test]'`, or just
`.venv/bin/pip install -r bench/requirements.txt`); without it the SDK column is skipped. Our
server runs the `echo` agent (cold start, load, resume), the `scripted` agent (streaming) and
bench/latency_agent.py (latency).

    .venv/bin/python bench/compare.py [--runs K] [--quick] [--only SECTION ...]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import (
    REPO,
    BenchError,
    fmt,
    install_cleanup,
    kill_children,
    progress,
    ratio,
    set_pycache,
)
from _state import COLD_LABELS, LoadSummary, MemorySummary, cold_start, idle_memory, session_load
from _streaming import LABELS, LatencySummary, StreamSummary, latency, streaming

SECTIONS = ("stream", "latency", "cold", "load", "memory")
TEXT = "x" * 16


@dataclass(frozen=True, slots=True)
class Config:
    runs: int
    deltas: int
    lat_sessions: int
    lat_deltas: int
    lat_interval_ms: float
    cold_runs: int
    load_turns: int
    load_chunks: int
    idle_sessions: int


def config(args: argparse.Namespace) -> Config:
    if args.quick:
        return Config(
            runs=args.runs or 2,
            deltas=2_000,
            lat_sessions=8,
            lat_deltas=100,
            lat_interval_ms=2,
            cold_runs=3,
            load_turns=200,
            load_chunks=50,
            idle_sessions=200,
        )
    runs = args.runs or 5
    return Config(
        runs=runs,
        deltas=20_000,
        lat_sessions=8,
        lat_deltas=1_000,
        lat_interval_ms=2,
        cold_runs=max(10, 2 * runs),
        load_turns=200,
        load_chunks=50,
        idle_sessions=200,
    )


def sdk_version() -> str | None:
    if importlib.util.find_spec("acp") is None:
        return None
    try:
        return importlib.metadata.version("agent-client-protocol")
    except importlib.metadata.PackageNotFoundError:
        return "unknown version"


def revision() -> str:
    """The checked-out commit, read-only (`+ local changes` when the tree differs from it)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (head or "unknown") + (" + local changes" if dirty else "")


# --- the report ------------------------------------------------------------------------------


def table(header: list[str], rows: list[list[str]], first: int = 26) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(1, len(header))]
    print(f"  {header[0]:<{first}}" + "".join(f"  {h:>{w}}" for h, w in zip(header[1:], widths, strict=True)))
    for row in rows:
        print(f"  {row[0]:<{first}}" + "".join(f"  {c:>{w}}" for c, w in zip(row[1:], widths, strict=True)))


def report_stream(cfg: Config, s: dict[str, StreamSummary]) -> None:
    subjects = list(s)
    print(
        f"\n1. Streaming: one turn of {cfg.deltas:,} deltas x {len(TEXT)} chars, session/prompt -> response, "
        f"blocking readline + json.loads client; median of {cfg.runs} alternating runs"
    )
    table(
        ["", *(LABELS[k] for k in subjects)],
        [
            ["deltas/s", *(fmt(s[k].deltas_per_second) for k in subjects)],
            ["chunk frames received", *(fmt(s[k].frames) for k in subjects)],
            ["wall s", *(fmt(s[k].wall, ".3f") for k in subjects)],
            ["server CPU s", *(fmt(s[k].cpu, ".2f") for k in subjects)],
            ["CPU s per 1,000 deltas", *(fmt(s[k].cpu_per_1000, ".4f") for k in subjects)],
        ],
    )
    print(
        "  (CPU from /proc utime+stime in 1/100 s ticks; acp-server merges consecutive deltas while its "
        "writer is busy, so its client parses fewer, larger frames; the SDK agent and the floor send one "
        "frame per delta)"
    )
    ours = s["ours"]
    for other in ("sdk", "floor"):
        if other in s:
            print(
                f"  ours/{'SDK' if other == 'sdk' else 'floor'}: "
                f"{fmt(ratio(ours.deltas_per_second, s[other].deltas_per_second), '.2f', 'x')} deltas/s, "
                f"{fmt(ratio(ours.cpu_per_1000, s[other].cpu_per_1000), '.3f', 'x')} CPU per delta"
            )


def report_latency(lat: LatencySummary) -> None:
    how = (
        "--agent bench.latency_agent:make_agent"
        if lat.launcher == "module:factory"
        else "bench/_latency_server.py (registry without module:factory)"
    )
    print(
        f"\n2. Latency, agent sink call -> frame read by the client: {lat.sessions} sessions x {lat.deltas:,} "
        f"deltas at once, one every {lat.interval_ms:g} ms each, journal on; median of {lat.runs} runs"
    )
    table(
        ["", "p50 ms", "p99 ms", "max ms", "stamps/run", "frames/run"],
        [
            [
                "acp-server",
                f"{lat.p50_ms:.3f}",
                f"{lat.p99_ms:.3f}",
                f"{lat.max_ms:.3f}",
                f"{lat.samples:,}",
                fmt(lat.frames),
            ]
        ],
    )
    print(f"  probe: {how}")


def report_cold(cfg: Config, cold: dict[str, tuple[float, float | None]]) -> None:
    wall, cpu = {k: v[0] for k, v in cold.items()}, {k: v[1] for k, v in cold.items()}
    base, base_cpu = wall.get("python"), cpu.get("python")
    print(
        f"\n3. Cold start, fork+exec -> initialize response (-> session/new: initialize and session/new "
        f"sent together, to the session/new response; python -c pass: -> exit); "
        f"median of {cfg.cold_runs} alternating runs after one warm-up each; CPU: all threads, by the answer"
    )
    table(
        ["", *(COLD_LABELS[k] for k in cold)],
        [
            ["median ms", *(f"{v * 1000:.1f}" for v in wall.values())],
            [
                "over python -c pass, ms",
                *(fmt(None if base is None else (v - base) * 1000, ".1f") for v in wall.values()),
            ],
            ["median CPU ms", *(fmt(None if v is None else v * 1000, ".1f") for v in cpu.values())],
            [
                "CPU over python -c pass, ms",
                *(fmt(None if v is None or base_cpu is None else (v - base_cpu) * 1000, ".1f") for v in cpu.values()),
            ],
        ],
    )


def report_load(load: LoadSummary) -> None:
    print(
        f"\n4. session/load of {load.turns} turns x {load.chunks} chunks + a tool call each "
        f"({load.db_mb:.1f} MB journal); median of {load.runs} runs"
    )
    table(
        ["", "time ms", "notifications", "RSS before MiB", "peak RSS growth MiB"],
        [
            [
                "acp-server",
                f"{load.seconds * 1000:.1f}",
                f"{load.notifications:,}",
                f"{load.rss_before_mib:.1f}",
                f"{load.peak_growth_mib:.1f}",
            ]
        ],
    )


def report_memory(mem: MemorySummary) -> None:
    print(
        f"\n5. Memory per idle session: session/resume of {mem.sessions} journaled sessions "
        f"(after one warm-up resume); median of {mem.runs} runs"
    )
    table(
        ["", "RSS before MiB", "RSS after MiB", "KiB per session"],
        [["acp-server", f"{mem.rss_before_mib:.1f}", f"{mem.rss_after_mib:.1f}", f"{mem.kib_per_session:.1f}"]],
    )


def targets(r: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []

    def row(name: str, measured: float | None, spec: str, goal: str, ok: bool | None) -> None:
        result = "n/a" if measured is None or ok is None else ("PASS" if ok else "MISS")
        rows.append([name, "n/a" if measured is None else format(measured, spec), goal, result])

    if "stream" in r:
        s = r["stream"]
        sdk = s.get("sdk")
        speed = ratio(s["ours"].deltas_per_second, sdk.deltas_per_second) if sdk else None
        cpu = ratio(s["ours"].cpu_per_1000, sdk.cpu_per_1000) if sdk else None
        row("throughput ours/SDK (journal on)", speed, ".2f", ">= 3x", None if speed is None else speed >= 3)
        row("CPU per 1,000 deltas ours/SDK", cpu, ".3f", "<= 0.333x", None if cpu is None else cpu <= 1 / 3)
    if "latency" in r:
        p99 = r["latency"].p99_ms
        row(f"p99 latency, {r['latency'].sessions} sessions (ms)", p99, ".3f", "< 5 ms", p99 < 5)
    if "cold" in r and "python" in r["cold"]:
        over = (r["cold"]["ours_new"][0] - r["cold"]["python"][0]) * 1000
        row("session/new over python -c pass (ms)", over, ".1f", "<= 150 ms", over <= 150)
    if "load" in r:
        load = r["load"]
        row(
            f"session/load {load.turns}x{load.chunks} time (ms)",
            load.seconds * 1000,
            ".1f",
            "< 250 ms",
            load.seconds < 0.25,
        )
        row(
            "session/load peak RSS growth (MiB)",
            load.peak_growth_mib,
            ".1f",
            "< 30 MB",
            load.peak_growth_mib * 1.048576 < 30,
        )
    if "memory" in r:
        row("memory per idle session (KiB)", r["memory"].kib_per_session, ".1f", "(no target)", None)
        rows[-1][-1] = "-"
    return rows


# --- main ------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, help="runs per subject (default 5; 2 with --quick)")
    parser.add_argument("--quick", action="store_true", help="fewer deltas and runs: a smoke check")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these sections")
    args = parser.parse_args()
    if args.runs is not None and args.runs < 1:
        parser.error("--runs must be at least 1")
    cfg = config(args)
    sections = args.only or SECTIONS
    install_cleanup()
    sdk = sdk_version()
    if sdk is None:
        progress(
            "the SDK (module acp) is not installed: the SDK column is skipped; "
            "install it with .venv/bin/pip install -r bench/requirements.txt"
        )

    print(
        f"acp-server comparison benchmark: python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"{platform.system()} {platform.release()}; revision {revision()}; "
        f"SDK agent-client-protocol {sdk or 'not installed'}; runs {cfg.runs}{' (quick)' if args.quick else ''}"
    )
    print(
        f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (other work on the machine "
        "skews every figure)"
    )
    print(
        "children: the venv's python, bytecode cached in a private PYTHONPYCACHEPREFIX, "
        "PYTHONUNBUFFERED and PYTHONDONTWRITEBYTECODE unset"
    )
    results: dict[str, Any] = {}
    failures: list[str] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="acp-compare-") as tmpdir:
        tmp = Path(tmpdir)
        set_pycache(tmp / "pycache")
        for section in sections:
            progress(f"[{time.perf_counter() - started:6.1f} s] {section} ...")
            try:
                if section == "stream":
                    subjects = ("ours", "sdk", "floor") if sdk else ("ours", "floor")
                    results[section] = streaming(tmp, cfg.runs, cfg.deltas, TEXT, subjects)
                elif section == "latency":
                    results[section] = latency(tmp, cfg.runs, cfg.lat_sessions, cfg.lat_deltas, cfg.lat_interval_ms)
                elif section == "cold":
                    results[section] = cold_start(tmp, cfg.cold_runs, with_sdk=sdk is not None)
                elif section == "load":
                    results[section] = session_load(tmp, cfg.runs, cfg.load_turns, cfg.load_chunks)
                elif section == "memory":
                    results[section] = idle_memory(tmp, cfg.runs, cfg.idle_sessions)
            except BenchError as exc:
                failures.append(f"{section}: {exc}")
                progress(f"  FAILED: {exc}")
            finally:
                kill_children()
    progress(f"[{time.perf_counter() - started:6.1f} s] done")

    if "stream" in results:
        report_stream(cfg, results["stream"])
    if "latency" in results:
        report_latency(results["latency"])
    if "cold" in results:
        report_cold(cfg, results["cold"])
    if "load" in results:
        report_load(results["load"])
    if "memory" in results:
        report_memory(results["memory"])
    rows = targets(results)
    if rows:
        print("\nTargets")
        table(["", "measured", "target", "result"], rows, first=40)
    for failure in failures:
        print(f"\nFAILED {failure}")
    print(
        f"\ntotal {time.perf_counter() - started:.0f} s; load average at the end: "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
