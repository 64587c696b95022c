"""Update latency of one session, paired: acp-server (journal on) against the SDK reference agent,
and optionally against another checkout of acp-server (`--before DIR`, run with DIR/.venv), the
subjects taking turns run by run (A, B, C, A, B, C, ...) so that a machine's drift hits them alike.

Each run starts a fresh process, opens one session and prompts `latency N INTERVAL_MS`: the agent
(bench/latency_agent.py for acp-server, bench/sdk_agent.py for the SDK) stamps each delta with
`time.time_ns()` when it hands it on, one every INTERVAL_MS ms; the client reads the clock when
the frame arrives (a frame of merged deltas carries several stamps, each measured). Prints each
run's p50 / p99 / max and, per subject, the min / median / max of those over the runs; then, per
round, acp-server's p99 against the goal `2 x the SDK agent's p99 + 2 ms` of the same round.

    .venv/bin/python bench/latency.py [--runs 7] [--deltas 1000] [--interval 2] [--before /work/main]

A benchmark, not a test: nothing is asserted; only the count of stamps is checked.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import (
    BENCH,
    PY,
    REPO,
    BenchError,
    LineClient,
    checkout_server,
    child,
    deadline,
    install_cleanup,
    kill_children,
    percentile,
    progress,
    set_pycache,
    stamp_ages,
)

TIMEOUT = 120.0


@dataclass(frozen=True, slots=True)
class Subject:
    label: str
    command: list[str]
    cwd: Path


@dataclass(frozen=True, slots=True)
class Run:
    p50: float
    p99: float
    max: float
    frames: int


def subjects(before: Path | None, tmp: Path) -> list[Subject]:
    def ours(label: str, repo: Path, server: list[str]) -> Subject:
        agent = "bench.latency_agent:make_agent"
        return Subject(label, [*server, "--agent", agent, "--db", str(tmp / "{run}.db")], repo)

    found = [Subject("SDK agent", [PY, str(BENCH / "sdk_agent.py")], REPO)]
    if before is not None:
        found.append(ours("before", before, checkout_server(before)))
    found.append(ours("acp-server" if before is None else "after", REPO, [PY, "-m", "acp_server"]))
    return found


def run_once(subject: Subject, tmp: Path, index: int, deltas: int, interval_ms: float) -> Run:
    command = [part.replace("{run}", f"{subject.label}-{index}") for part in subject.command]
    samples: list[int] = []

    def on_chunk(_line: bytes, message: dict[str, Any]) -> None:
        samples.extend(stamp_ages(client.arrived_ns, message))

    with child(command, subject.label, tmp, cwd=subject.cwd) as proc:
        client = LineClient(proc, subject.label)
        with deadline(proc, TIMEOUT, f"{subject.label}: the latency turn"):
            client.initialize()
            session_id = client.new_session(str(tmp))
            prompt = [{"type": "text", "text": f"latency {deltas} {interval_ms:g}"}]
            client.wait_for(client.send("session/prompt", {"sessionId": session_id, "prompt": prompt}), on_chunk)
    if len(samples) != deltas:
        raise BenchError(f"{subject.label}: {len(samples)} stamps arrived, expected {deltas}")
    samples.sort()
    ms = [s / 1e6 for s in samples]
    return Run(percentile(ms, 0.50), percentile(ms, 0.99), ms[-1], client.frames)


def spread(values: list[float]) -> str:
    return f"{min(values):.3f} / {statistics.median(values):.3f} / {max(values):.3f}"


def report(found: list[Subject], rounds: list[dict[str, Run]], args: argparse.Namespace) -> None:
    print(
        f"Update latency, one session, {args.deltas:,} deltas one every {args.interval:g} ms, "
        f"{len(rounds)} alternating rounds; ms, min / median / max over the rounds"
    )
    print(f"  {'':<12}  {'p50':>23}  {'p99':>23}  {'max':>23}")
    for subject in found:
        runs = [r[subject.label] for r in rounds]
        p50s, p99s, maxes = [r.p50 for r in runs], [r.p99 for r in runs], [r.max for r in runs]
        print(f"  {subject.label:<12}  {spread(p50s):>23}  {spread(p99s):>23}  {spread(maxes):>23}")
    print("Per round: p99 ms (goal for acp-server: <= 2 x the SDK agent's p99 + 2 ms of the same round)")
    for n, r in enumerate(rounds, 1):
        goal = 2 * r["SDK agent"].p99 + 2
        cells = [f"{label} {run.p99:.3f}" for label, run in r.items()]
        verdict = " ".join(
            f"{label}:{'met' if run.p99 <= goal else 'MISSED'}" for label, run in r.items() if label != "SDK agent"
        )
        print(f"  {n}: {', '.join(cells)}; goal {goal:.3f}; {verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--deltas", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=2.0, help="ms between deltas")
    parser.add_argument("--before", type=Path, help="another checkout with its own .venv")
    args = parser.parse_args()
    install_cleanup()
    with tempfile.TemporaryDirectory(prefix="acp-latency-") as tmpdir:
        tmp = Path(tmpdir)
        set_pycache(tmp / "pycache")
        found = subjects(args.before, tmp)
        rounds: list[dict[str, Run]] = []
        try:
            for index in range(args.runs + 1):  # round 0 warms the bytecode caches, not counted
                this = {s.label: run_once(s, tmp, index, args.deltas, args.interval) for s in found}
                if index:
                    rounds.append(this)
                    progress(f"  round {index}: " + ", ".join(f"{k} p99 {v.p99:.3f}" for k, v in this.items()))
        except BenchError as exc:
            progress(f"FAILED: {exc}")
            return 1
        finally:
            kill_children()
    report(found, rounds, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
