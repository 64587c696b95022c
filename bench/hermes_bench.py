"""Hermes served by acp-server (`acp-server --agent hermes`) against Hermes' own `hermes acp`,
both over real stdio pipes, on the same fake model on 127.0.0.1 (tests/fake_openai.py) and the
same throw-away HERMES_HOME. Prints, per subject: time to a usable session (spawn to
session/new answered, and to the first turn's first delta), time from prompt to first delta,
model deltas delivered per second, and CPU seconds per 1,000 deltas.

    .venv/bin/python bench/hermes_bench.py [--deltas 6000] [--runs 3] [--hermes PATH]

`hermes acp` needs `hermes-agent[acp]` (agent-client-protocol 0.9, older than the test extra's),
so give it its own virtualenv: `python -m venv V && V/bin/pip install 'hermes-agent[acp]==0.19.0'`
and pass `--hermes V/bin/hermes`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent.parent / "tests")]

from fake_openai import FakeOpenAI, reply  # noqa: E402
from hermes_home import make_home  # noqa: E402

from bench._common import CHILD_ENV, LineClient, child, cpu_seconds, fmt, install_cleanup, median  # noqa: E402

BIN = Path(sys.executable).parent


def subjects(db: str, hermes: str) -> dict[str, list[str]]:
    return {
        "acp-server --agent hermes": [str(BIN / "acp-server"), "--agent", "hermes", "--db", db],
        "hermes acp": [hermes, "acp"],
    }


def one_run(command: list[str], label: str, workdir: str, deltas: int) -> dict[str, float | None]:
    started = time.monotonic()
    with child(command, label, workdir) as proc:
        client = LineClient(proc, label)
        client.initialize()
        session = client.new_session(workdir)
        usable = time.monotonic() - started
        first: list[float] = []
        cpu_before = cpu_seconds(proc.pid)
        sent = time.monotonic()

        def on_chunk(_line: bytes, _message: dict[str, Any]) -> None:
            if not first:
                first.append(time.monotonic())

        request = client.send("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]})
        client.wait_for(request, on_chunk)
        ended = time.monotonic()
        cpu_after = cpu_seconds(proc.pid)
    if client.chars < 3 * deltas or not first:
        raise SystemExit(f"{label}: got {client.chars} characters, expected {3 * deltas}")
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return {
        "usable": usable,
        "usable_first": first[0] - started,
        "first": first[0] - sent,
        "rate": deltas / (ended - first[0]),
        "cpu": None if cpu is None else cpu * 1000 / deltas,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=6000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hermes", default=str(BIN / "hermes"), help="the hermes command (with the acp extra)")
    args = parser.parse_args()
    install_cleanup()
    with tempfile.TemporaryDirectory() as workdir, FakeOpenAI() as fake:
        fake.responder = lambda body: reply("abc" * args.deltas, usage={"prompt_tokens": 10, "completion_tokens": 5})
        CHILD_ENV["HERMES_HOME"] = str(make_home(Path(workdir), fake.base_url))
        results: dict[str, list[dict[str, float | None]]] = {}
        for run in range(args.runs):
            for label, command in subjects(os.path.join(workdir, f"journal-{run}.db"), args.hermes).items():
                results.setdefault(label, []).append(one_run(command, label, workdir, args.deltas))
    print(f"{args.deltas} model deltas of 3 characters, median of {args.runs} runs, fake model on 127.0.0.1")
    print(f"{'':28}{'usable s':>10}{'1st delta s':>13}{'prompt->1st ms':>16}{'deltas/s':>11}{'CPU s/1k':>10}")
    for label, runs in results.items():
        cells = [median([r[key] for r in runs]) for key in ("usable", "usable_first", "first", "rate", "cpu")]
        print(
            f"{label:28}{fmt(cells[0], '.2f'):>10}{fmt(cells[1], '.2f'):>13}"
            f"{fmt(None if cells[2] is None else cells[2] * 1000, ',.0f'):>16}"
            f"{fmt(cells[3], ',.0f'):>11}{fmt(cells[4], '.3f'):>10}"
        )


if __name__ == "__main__":
    main()
