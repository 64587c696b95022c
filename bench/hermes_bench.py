"""Hermes served by acp-server (`acp-server --agent hermes`) against Hermes' own `hermes acp`,
both over real stdio pipes, on the same fake model on 127.0.0.1 (tests/fake_openai.py) and the
same throw-away HERMES_HOME, with Hermes alone (one AIAgent, a no-op stream callback, its own
process: bench/_hermes_alone.py) as the ceiling neither can pass. A fourth row is acp-server
through its runner (`ACP_SERVER_RUNNER=1`), already started by an earlier editor: each run
spawns a new front, as a second editor window would, while Hermes stays loaded in the runner.

    .venv/bin/python bench/hermes_bench.py [--deltas 6000] [--runs 3] [--hermes PATH]

Per subject, medians of the runs:
  usable s        spawn to session/new answered
  1st delta s     spawn to the first delta of a prompt sent as soon as session/new is answered
  cold ms         that first prompt to its first delta (it may wait for Hermes to load)
  typed ms        first prompt to first delta when it comes 3 s after session/new (a person typing;
                  a fresh process)
  warm ms         a second prompt on the same session, after the first ended, to its first delta
  deltas/s        model deltas delivered per second during that second turn
  CPU s/1k        the subject's CPU seconds per 1,000 deltas during that second turn
The streaming figures come from the second turn, which loads nothing. "-": does not apply.

The fake model runs in a process of its own and writes each answer at once (bench/_fake_model.py
says why): the subject, not the model, sets the pace.

`--pair [--before DIR] [--turns 4]` measures only the streaming goal, paired: in each run a fresh
Hermes alone, `acp-server --agent hermes` and the same from checkout DIR (run with DIR/.venv),
each past its first turn, then their turns in alternation (the order reversed every other
turn); it prints each turn's deltas/s and its ratio to the turn of Hermes alone beside it (goal:
>= 0.95), then min / median / max of the ratios. Beside each, the waits of Hermes' parsing
thread (its voluntary context switches, sampled from /proc every 5 ms): 3-10 a turn alone, and
in acp-server each time the loop took the GIL from it; the ratio's gap follows them.

`hermes acp` needs `hermes-agent[acp]` (agent-client-protocol 0.9, older than the test extra's),
so give it its own virtualenv: `python -m venv V && V/bin/pip install 'hermes-agent[acp]==0.19.0'`
and pass `--hermes V/bin/hermes`.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent.parent / "tests")]

from hermes_home import make_home  # noqa: E402

from bench._common import (  # noqa: E402
    BENCH,
    CHILD_ENV,
    PY,
    BenchError,
    LineClient,
    checkout_server,
    child,
    cpu_seconds,
    deadline,
    fmt,
    install_cleanup,
    median,
    progress,
)

BIN = Path(sys.executable).parent
TYPING_PAUSE = 3.0  # seconds between session/new answered and the first prompt, in the typed run
TIMEOUT = 120.0
Figures = dict[str, float]


@dataclass(frozen=True, slots=True)
class Turn:
    first: float  # seconds from prompt to first delta
    stream: float  # seconds from first delta to the end of the turn
    cpu: float | None  # the subject's CPU seconds during the turn


RUNNER = "acp-server, warm runner"


def acp_subjects(db: str, hermes: str, runner_db: str) -> dict[str, list[str]]:
    server = [str(BIN / "acp-server"), "--agent", "hermes", "--db"]
    return {
        "acp-server --agent hermes": [*server, db],
        "hermes acp": [hermes, "acp"],
        RUNNER: ["env", "ACP_SERVER_RUNNER=1", *server, runner_db],  # env execs: the pid is the front's
    }


def prompt(client: LineClient, session: str, deltas: int) -> tuple[float, Turn]:
    """One prompt; returns when it was sent (monotonic) and its figures."""
    first: list[float] = []

    def on_chunk(_line: bytes, _message: dict[str, Any]) -> None:
        if not first:
            first.append(time.monotonic())

    chars, cpu_before = client.chars, cpu_seconds(client.proc.pid)
    sent = time.monotonic()
    request = client.send("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]})
    with deadline(client.proc, TIMEOUT, f"{client.label}: a prompt"):
        client.wait_for(request, on_chunk)
    ended, cpu_after = time.monotonic(), cpu_seconds(client.proc.pid)
    if client.chars - chars < 3 * deltas or not first:
        raise BenchError(f"{client.label}: got {client.chars - chars} characters, expected {3 * deltas}")
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return sent, Turn(first[0] - sent, ended - first[0], cpu)


def open_client(label: str, proc: Any, workdir: str) -> tuple[LineClient, str]:
    client = LineClient(proc, label)
    with deadline(proc, TIMEOUT, f"{label}: initialize and session/new"):
        client.initialize()
        session = client.new_session(workdir)
    return client, session


def acp_cold(command: list[str], label: str, workdir: str, deltas: int) -> Figures:
    """A prompt as soon as the session exists, then a second one on the same session."""
    started = time.monotonic()
    with child(command, label, workdir) as proc:
        client, session = open_client(label, proc, workdir)
        usable = time.monotonic() - started
        sent, cold = prompt(client, session, deltas)
        _, warm = prompt(client, session, deltas)
    return {"usable": usable, "spawn_first": sent + cold.first - started, "cold": cold.first} | streaming(warm, deltas)


def acp_typed(command: list[str], label: str, workdir: str, deltas: int) -> Figures:
    """The first prompt after a person's pause: what an editor user sees on a fresh session."""
    with child(command, label, workdir) as proc:
        client, session = open_client(label, proc, workdir)
        time.sleep(TYPING_PAUSE)
        _, typed = prompt(client, session, deltas)
    return {"typed": typed.first}


def alone(label: str, workdir: str, deltas: int) -> Figures:
    """Hermes alone: a first turn, then the measured second turn, as for the ACP subjects."""
    with child([PY, str(BENCH / "_hermes_alone.py")], label, workdir) as proc:
        turn = alone_turns(proc, label, deltas)
        turn()
        return streaming(turn(), deltas)


def alone_turns(proc: subprocess.Popen[bytes], label: str, deltas: int) -> Callable[[], Turn]:
    """Once Hermes alone (bench/_hermes_alone.py) is built: a function running its next turn."""
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout
    with deadline(proc, TIMEOUT, f"{label}: build"):
        if stdout.readline().strip() != b"ready":
            raise BenchError(f"{label}: did not get ready")

    def turn() -> Turn:
        cpu_before = cpu_seconds(proc.pid)
        stdin.write(b"go\n")
        stdin.flush()
        with deadline(proc, TIMEOUT, f"{label}: a turn"):
            line = stdout.readline()
        cpu_after = cpu_seconds(proc.pid)
        if not line:
            raise BenchError(f"{label}: exited (status {proc.poll()})")
        result = json.loads(line)
        if result["deltas"] < deltas:
            raise BenchError(f"{label}: got {result['deltas']} deltas, expected {deltas}")
        cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
        return Turn(result["first"], result["stream"], cpu)

    return turn


def streaming(turn: Turn, deltas: int) -> Figures:
    figures = {"warm": turn.first, "rate": deltas / turn.stream}
    return figures | ({} if turn.cpu is None else {"cpu": turn.cpu * 1000 / deltas})


class BusiestThread:
    """While a turn runs, samples each thread of a process (/proc/PID/task) every SAMPLE_S: the
    thread that used the most CPU is Hermes' parsing thread (it lives only for the turn), and
    its voluntary context switches count how often it waited (for the GIL, in acp-server: the
    cause of the gap to Hermes alone, and a steadier figure than deltas/s)."""

    SAMPLE_S = 0.005

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._first: dict[str, tuple[int, int]] = {}  # tid -> (CPU ns, voluntary switches)
        self._last: dict[str, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> BusiestThread:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def switches(self) -> int | None:
        """The busiest thread's voluntary context switches during the turn (None: no reading)."""
        spent = {tid: self._last[tid][0] - first[0] for tid, first in self._first.items()}
        if not spent:
            return None
        busiest = max(spent, key=spent.__getitem__)
        return self._last[busiest][1] - self._first[busiest][1]

    def _sample(self) -> None:
        while True:
            for task in Path(f"/proc/{self._pid}/task").glob("*"):
                try:
                    cpu = int((task / "schedstat").read_text().split()[0])
                    status = (task / "status").read_text()
                except (OSError, ValueError, IndexError):
                    continue  # the thread ended
                voluntary = int(status.split("voluntary_ctxt_switches:")[1].split()[0])
                self._first.setdefault(task.name, (cpu, voluntary))
                self._last[task.name] = (cpu, voluntary)
            if self._stop.wait(self.SAMPLE_S):
                return


def pair(args: argparse.Namespace, workdir: str) -> None:
    """Per run, a fresh Hermes alone and a fresh acp-server (and `--before`'s), each past its
    first turn; then their turns alternate, `--turns` each, so that every ratio compares turns
    run seconds apart (this machine's speed drifts by a third within a minute)."""
    servers = {"after" if args.before else "acp-server": [str(BIN / "acp-server")]}
    if args.before:
        servers["before"] = checkout_server(args.before)
    ratios: dict[str, list[float]] = {label: [] for label in servers}
    waits: dict[str, list[int]] = {label: [] for label in ["alone", *servers]}
    for run in range(args.runs):
        with contextlib.ExitStack() as stack:
            proc = stack.enter_context(child([PY, str(BENCH / "_hermes_alone.py")], "Hermes alone", workdir))
            subjects: dict[str, Callable[[], Turn]] = {"alone": alone_turns(proc, "Hermes alone", args.deltas)}
            pids = {"alone": proc.pid}
            for label, server in servers.items():
                journal = os.path.join(workdir, f"pair-{label}-{run}.db")
                proc = stack.enter_context(child([*server, "--agent", "hermes", "--db", journal], label, workdir))
                client, session = open_client(label, proc, workdir)
                subjects[label] = functools.partial(lambda c, s: prompt(c, s, args.deltas)[1], client, session)
                pids[label] = proc.pid
            for turn in subjects.values():
                turn()  # the first turn: it may wait for Hermes to load
            order = list(subjects)
            for index in range(args.turns):
                rates: dict[str, float] = {}
                switches: dict[str, int | None] = {}
                cells: list[str] = []
                for label in order if index % 2 == 0 else reversed(order):  # none always first
                    with BusiestThread(pids[label]) as busiest:
                        figures = streaming(subjects[label](), args.deltas)
                    rates[label], switches[label] = figures["rate"], busiest.switches()
                for label in order:
                    shown = "" if label == "alone" else f" ({rates[label] / rates['alone']:.2f})"
                    cells.append(f"{label} {rates[label]:,.0f}{shown} {fmt(switches[label], ',')} waits")
                    if label != "alone":
                        ratios[label].append(rates[label] / rates["alone"])
                    if (count := switches[label]) is not None:
                        waits[label].append(count)
                print(f"run {run + 1}, turn {index + 2}: deltas/s " + ", ".join(cells), flush=True)
    for label, values in ratios.items():
        spread = f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"
        print(f"{label}: of Hermes alone, min / median / max over {len(values)} turns: {spread}")
    for label, counts in waits.items():
        if counts:
            spread = f"{min(counts)} / {statistics.median(counts):.0f} / {max(counts)}"
            print(f"{label}: waits of Hermes' parsing thread a turn (voluntary context switches), {spread}")


@contextlib.contextmanager
def fake_model(deltas: int, workdir: str) -> Iterator[str]:
    """The fake model's base URL, served by a process of its own (bench/_fake_model.py)."""
    with child([PY, str(BENCH / "_fake_model.py"), str(deltas)], "fake model", workdir) as proc:
        assert proc.stdout is not None
        with deadline(proc, TIMEOUT, "fake model: start"):
            base_url = proc.stdout.readline().decode().strip()
        if not base_url:
            raise BenchError(f"fake model: exited (status {proc.poll()})")
        yield base_url


def cell(runs: list[Figures], key: str, spec: str, scale: float = 1.0) -> str:
    if not any(key in run for run in runs):
        return "-"
    value = median([run.get(key) for run in runs])
    return fmt(None if value is None else value * scale, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=6000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hermes", default=str(BIN / "hermes"), help="the hermes command (with the acp extra)")
    parser.add_argument("--pair", action="store_true", help="only the streaming ratio to Hermes alone, per run")
    parser.add_argument("--before", type=Path, help="with --pair: another checkout (with .venv) in the rotation")
    parser.add_argument("--turns", type=int, default=4, help="with --pair: measured turns of each subject per run")
    args = parser.parse_args()
    install_cleanup()
    if args.pair:
        with tempfile.TemporaryDirectory() as workdir, fake_model(args.deltas, workdir) as base_url:
            CHILD_ENV["HERMES_HOME"] = str(make_home(Path(workdir), base_url))
            pair(args, workdir)
        return
    ceiling = "Hermes alone (ceiling)"
    results: dict[str, list[Figures]] = {}
    with tempfile.TemporaryDirectory() as workdir, fake_model(args.deltas, workdir) as base_url:
        CHILD_ENV["HERMES_HOME"] = str(make_home(Path(workdir), base_url))
        CHILD_ENV["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="acpb-", dir="/tmp")  # short: a socket path
        runner_db = os.path.join(workdir, "runner.db")
        try:
            progress("starting the runner")
            acp_cold(acp_subjects("", args.hermes, runner_db)[RUNNER], RUNNER, workdir, args.deltas)
            for run in range(args.runs):
                progress(f"run {run + 1} of {args.runs}")
                figures: dict[str, Figures] = {}
                for measure in (acp_cold, acp_typed):  # each with a fresh process and journal
                    journal = os.path.join(workdir, f"journal-{run}-{measure.__name__}.db")
                    for label, command in acp_subjects(journal, args.hermes, runner_db).items():
                        figures[label] = figures.get(label, {}) | measure(command, label, workdir, args.deltas)
                figures[RUNNER].pop("cpu", None)  # the front's alone: the work is the runner's
                for label, measured in figures.items():
                    results.setdefault(label, []).append(measured)
                results.setdefault(ceiling, []).append(alone(ceiling, workdir, args.deltas))
        finally:
            subprocess.run([str(BIN / "acp-server"), "runner", "stop"], env=CHILD_ENV, check=False)
    print(f"{args.deltas} model deltas of 3 characters, median of {args.runs} runs, fake model on 127.0.0.1")
    print(
        f"{'':32}{'usable s':>10}{'1st delta s':>13}{'cold ms':>9}{'typed ms':>10}{'warm ms':>9}"
        f"{'deltas/s':>10}{'CPU s/1k':>10}"
    )
    for label, runs in results.items():
        print(
            f"{label:32}{cell(runs, 'usable', '.2f'):>10}{cell(runs, 'spawn_first', '.2f'):>13}"
            f"{cell(runs, 'cold', ',.0f', 1000):>9}{cell(runs, 'typed', ',.0f', 1000):>10}"
            f"{cell(runs, 'warm', ',.0f', 1000):>9}{cell(runs, 'rate', ',.0f'):>10}{cell(runs, 'cpu', '.3f'):>10}"
        )


if __name__ == "__main__":
    main()
