"""The five real ACP agents through `acp-server --agent acp -- AGENT` against the same agent run
directly, each on the same fake of its model API on 127.0.0.1 (tests/agents.py launches them,
as tests/test_acp_runtime_real.py does; they are installed on first use, tests/agent_installs.py).

    .venv/bin/python bench/acp_runtime.py [--deltas 2000] [--runs 3] [--turns 5] [--agents claude,codex,...]
                                          [--before /work/main]

Each run starts both subjects side by side (fresh processes, agent homes of their own, a fresh
journal for acp-server), opens a session on each, warms each with one turn, and then measures
TURNS turns of each, alternating between them: in each the model streams DELTAS deltas of 3
characters as fast as the fake can send them. Per agent and subject, medians of all turns:
  first ms       prompt sent to the first text the editor gets
  deltas/s       model deltas delivered per second, first text to the prompt's answer
  ratio          deltas/s through acp-server over direct (goal: >= 0.9)
  +first ms      first ms through acp-server minus direct (goal: <= 10)
  agent CPU      the agent's CPU seconds per 1,000 deltas (its whole process tree)
  server CPU     acp-server's own CPU seconds per 1,000 deltas
  +end ms        prompt sent to its answer through acp-server, minus direct (goal: <= 17, a frame)
  tail ms        the last text the editor gets to the prompt's answer
With `--before DIR` a third subject, acp-server from another checkout (run with DIR/.venv), takes
its turns in the same rotation, and its row follows (`agent (before)`): a paired before/after.
A last line measures what acp-server adds to the first delta alone, with tests/fake_acp_agent.py
(it answers every prompt at once): 35 prompts per run and subject.
A benchmark, not a test: nothing is asserted about speed; only the text received is checked.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent.parent / "tests")]

from agents import REAL_AGENTS, Launch, RealAgent  # noqa: E402

from acp_server.downstream.client import CLIENT_CAPABILITIES  # noqa: E402
from bench._common import (  # noqa: E402
    PY,
    BenchError,
    LineClient,
    checkout_server,
    cpu_seconds,
    deadline,
    fmt,
    median,
    progress,
)

TIMEOUT = 180.0  # seconds for a start or a turn
GRACE = 5.0  # seconds a subject gets to exit after its stdin closed
DIRECT, THROUGH, BEFORE = "direct", "acp-server", "before"
Figures = dict[str, float]


@dataclass(frozen=True, slots=True)
class Subject:
    name: str
    command: list[str]
    env: dict[str, str]
    cwd: Path


def subjects(launch: Launch, root: Path, run: int, before: Path | None = None) -> list[Subject]:
    """The agent alone and below acp-server (and below `before`'s acp-server), with the same
    environment (acp-server passes its own down to the agent, so the agent sees the same either way)."""
    env = launch.env | {"XDG_DATA_HOME": str(root / "data"), "XDG_CONFIG_HOME": str(root / "config")}

    def server(command: list[str], name: str) -> list[str]:
        return [*command, "--db", str(root / f"journal-{name}-{run}.db"), "--agent", "acp", "--"]

    found = [
        Subject(DIRECT, list(launch.command), env, launch.cwd),
        Subject(THROUGH, [*server([PY, "-m", "acp_server"], THROUGH), *launch.command], env, launch.cwd),
    ]
    if before is not None:
        found.append(Subject(BEFORE, [*server(checkout_server(before), BEFORE), *launch.command], env, launch.cwd))
    return found


# --- process trees -------------------------------------------------------------------------


def tree(pid: int) -> list[int]:
    """`pid` and every process below it (from /proc's child lists)."""
    found, todo = [pid], [pid]
    while todo:
        current = todo.pop()
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{current}/task").iterdir():
                with contextlib.suppress(OSError):
                    children = [int(c) for c in (task / "children").read_text().split()]
                    found += children
                    todo += children
    return found


def cpu_of(pids: list[int]) -> dict[int, float]:
    return {pid: cpu for pid in pids if (cpu := cpu_seconds(pid)) is not None}


def spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds the processes used between two readings (new ones from zero)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


# --- one run -------------------------------------------------------------------------------


@contextlib.contextmanager
def started(subject: Subject, logdir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The subject's process, in a process group of its own; at the end its stdin is closed and,
    after a grace period, the group killed (claude-agent-acp and codex-acp outlive their stdin)."""
    log_path = logdir / f"{subject.name}-{time.monotonic_ns()}.stderr"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            subject.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=subject.env,
            cwd=subject.cwd,
            start_new_session=True,
        )
    try:
        yield proc
    except BenchError as exc:
        tail = log_path.read_text(errors="replace")[-2000:].strip()
        raise BenchError(f"{exc}\n--- stderr of {subject.name} ---\n{tail or '(empty)'}") from None
    finally:
        assert proc.stdin is not None and proc.stdout is not None
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(timeout=GRACE)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()


def turn(client: LineClient, session: str, deltas: int, through: bool) -> Figures:
    """One prompt; its figures. The client's process is the agent (direct), or acp-server with
    the agent's tree below it (through)."""
    first: list[float] = []
    last: list[float] = [0.0]

    def on_chunk(_line: bytes, message: dict[str, Any]) -> None:
        if message["params"]["update"]["content"].get("text"):
            last[0] = time.monotonic()
            if not first:
                first.append(last[0])

    top = client.proc.pid
    tree_before, top_before = cpu_of(tree(top)), cpu_seconds(top)
    chars = client.chars
    sent = time.monotonic()
    request = client.send("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]})
    with deadline(client.proc, TIMEOUT, f"{client.label}: a prompt"):
        client.wait_for(request, on_chunk)
    ended = time.monotonic()
    tree_after, top_after = cpu_of(tree(top)), cpu_seconds(top)
    if client.chars - chars != 3 * deltas or not first:
        raise BenchError(f"{client.label}: got {client.chars - chars} characters, expected {3 * deltas}")
    figures = {"first": first[0] - sent, "rate": deltas / (ended - first[0]), "turn": ended - sent}
    figures["tail"] = ended - last[0]
    total = spent(tree_before, tree_after)
    if not through:  # the whole tree is the agent's
        return figures | {"agent_cpu": total * 1000 / deltas}
    server = (top_after or 0.0) - (top_before or 0.0)
    return figures | {"agent_cpu": (total - server) * 1000 / deltas, "server_cpu": server * 1000 / deltas}


def opened(subject: Subject, proc: subprocess.Popen[bytes]) -> tuple[LineClient, str]:
    client = LineClient(proc, subject.name)
    with deadline(proc, TIMEOUT, f"{subject.name}: initialize and session/new"):
        # Direct, the agent is told what acp-server tells it (fast-agent, for one, acts on it).
        caps = CLIENT_CAPABILITIES if subject.name == DIRECT else {}
        client.wait_for(client.send("initialize", {"protocolVersion": 1, "clientCapabilities": caps}))
        return client, client.new_session(str(subject.cwd))


def measure(pair: list[Subject], logdir: Path, deltas: int, turns: int) -> dict[str, list[Figures]]:
    """Both subjects running side by side, their turns alternating (load drifts alike)."""
    found: dict[str, list[Figures]] = {subject.name: [] for subject in pair}
    with contextlib.ExitStack() as stack:
        sessions = [(subject, *opened(subject, stack.enter_context(started(subject, logdir)))) for subject in pair]
        for subject, client, session in sessions:
            turn(client, session, deltas, subject.name != DIRECT)  # the warm-up: lazy loading, routers, caches
        for index in range(turns):
            for subject, client, session in sessions if index % 2 == 0 else reversed(sessions):
                found[subject.name].append(turn(client, session, deltas, subject.name != DIRECT))
    return found


def bench_agent(
    agent: RealAgent, deltas: int, runs: int, turns: int, before: Path | None = None
) -> dict[str, list[Figures]]:
    results: dict[str, list[Figures]] = {DIRECT: [], THROUGH: [], BEFORE: []}
    with tempfile.TemporaryDirectory(prefix=f"acp-runtime-{agent.name}-") as tmp, agent.endpoint() as fake:
        root = Path(tmp)
        # No delta equal to the one before it: fast-agent 0.10.48 drops such a delta (its text is lost).
        text = "".join(f"{i % 1000:03d}" for i in range(deltas))
        fake.responder = lambda body: agent.say(text)
        for run in range(runs):
            progress(f"{agent.name}: run {run + 1} of {runs}")
            # Each subject an agent home of its own: they run at the same time.
            direct = subjects(agent.launch(root / f"direct-{run}", fake.base_url), root / f"direct-{run}", run)[0]
            through = subjects(agent.launch(root / f"via-{run}", fake.base_url), root / f"via-{run}", run)[1]
            pair = [direct, through]
            if before is not None:
                home = root / f"before-{run}"
                pair.append(subjects(agent.launch(home, fake.base_url), home, run, before)[2])
            for name, figures in measure(pair, root, deltas, turns).items():
                results[name] += figures
    return results


# --- acp-server's own share: an agent that answers at once ---------------------------------

FAKE_AGENT = Path(__file__).resolve().parent.parent / "tests" / "fake_acp_agent.py"
PROBES = 40  # prompts per subject; the first 5 are left out


def probe(runs: int) -> dict[str, list[float]]:
    """Prompt to first text with tests/fake_acp_agent.py, which answers each prompt at once with
    one chunk: what acp-server adds to the first delta, without a model or a busy agent."""
    found: dict[str, list[float]] = {DIRECT: [], THROUGH: []}
    with tempfile.TemporaryDirectory(prefix="acp-runtime-probe-") as tmp:
        root = Path(tmp)
        (root / "work").mkdir()
        launch = Launch([PY, str(FAKE_AGENT), "--store", str(root / "store.json")], {"PATH": os.defpath}, root / "work")
        for run in range(runs):
            for subject in subjects(launch, root, run):
                progress(f"probe: run {run + 1} of {runs}: {subject.name}")
                with started(subject, root) as proc:
                    client = LineClient(proc, subject.name)
                    with deadline(proc, TIMEOUT, f"{subject.name}: the probe"):
                        client.initialize()
                        session = client.new_session(str(subject.cwd))
                        for index in range(PROBES):
                            first = first_text(client, session)
                            if index >= 5:
                                found[subject.name].append(first)
    return found


def first_text(client: LineClient, session: str) -> float:
    """Seconds from a prompt to the first chunk of its answer (the turn is read to its end)."""
    first: list[float] = []

    def on_chunk(_line: bytes, _message: dict[str, Any]) -> None:
        if not first:
            first.append(time.monotonic())

    sent = time.monotonic()
    client.wait_for(
        client.send("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}), on_chunk
    )
    return first[0] - sent


# --- the table -----------------------------------------------------------------------------


def value(runs: list[Figures], key: str) -> float | None:
    return median([run.get(key) for run in runs]) if runs and all(key in run for run in runs) else None


HEADER = [
    "agent",
    "first ms direct",
    "first ms via",
    "+first ms",
    "deltas/s direct",
    "deltas/s via",
    "ratio",
    "agent CPU direct",
    "agent CPU via",
    "server CPU",
    "+end ms",
    "tail ms",
]


def row(name: str, direct: list[Figures], through: list[Figures]) -> list[str]:
    d_rate, t_rate = value(direct, "rate"), value(through, "rate")
    d_first, t_first = value(direct, "first"), value(through, "first")
    d_turn, t_turn, t_tail = value(direct, "turn"), value(through, "turn"), value(through, "tail")
    return [
        name,
        fmt(None if d_first is None else d_first * 1000, ".1f"),
        fmt(None if t_first is None else t_first * 1000, ".1f"),
        fmt(None if d_first is None or t_first is None else (t_first - d_first) * 1000, "+.1f"),
        fmt(d_rate, ",.0f"),
        fmt(t_rate, ",.0f"),
        fmt(None if d_rate is None or t_rate is None else t_rate / d_rate, ".2f"),
        fmt(value(direct, "agent_cpu"), ".3f"),
        fmt(value(through, "agent_cpu"), ".3f"),
        fmt(value(through, "server_cpu"), ".3f"),
        fmt(None if d_turn is None or t_turn is None else (t_turn - d_turn) * 1000, "+.1f"),
        fmt(None if t_tail is None else t_tail * 1000, ".1f"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--turns", type=int, default=5, help="measured turns per run")
    parser.add_argument("--agents", default=",".join(sorted(REAL_AGENTS)), help="comma-separated names")
    parser.add_argument("--before", type=Path, help="another checkout (with .venv) to pair against")
    parser.add_argument("--no-probe", action="store_true", help="skip the fake agent's first-text probe")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # the agents are ended on the way out
    print(f"{args.deltas} model deltas of 3 characters; median of {args.runs} runs x {args.turns} turns (after one)")
    print("CPU: seconds per 1,000 deltas; via: through acp-server --agent acp")
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "---|" * len(HEADER), flush=True)
    for name in [name for name in args.agents.split(",") if name]:
        results = bench_agent(REAL_AGENTS[name], args.deltas, args.runs, args.turns, args.before)
        print("| " + " | ".join(row(name, results[DIRECT], results[THROUGH])) + " |", flush=True)
        if args.before is not None:
            print("| " + " | ".join(row(f"{name} (before)", results[DIRECT], results[BEFORE])) + " |", flush=True)
        for label in (THROUGH, BEFORE):
            rates = [t["rate"] / d["rate"] for t, d in zip(results[label], results[DIRECT], strict=False)]
            if rates:
                progress(f"{name} {label}: per-turn ratios {' '.join(f'{r:.2f}' for r in rates)}")
    if args.no_probe:
        return
    probed = probe(args.runs)
    direct, through = median(probed[DIRECT]), median(probed[THROUGH])
    assert direct is not None and through is not None
    print(
        f"An agent that answers at once (tests/fake_acp_agent.py), prompt to first text, median of"
        f" {len(probed[THROUGH])}: direct {direct * 1000:.2f} ms, through acp-server {through * 1000:.2f} ms"
        f" (+{(through - direct) * 1000:.2f} ms)"
    )


if __name__ == "__main__":
    main()
