"""Benchmark: one session shared by several connections in runner mode. A stdio front prompts a
turn (fast: N deltas as quick as the agent makes them; paced: 500 deltas/s) while W other fronts
(0, 1, 2, 8) have the session open and read every update; prints the deltas/s at the prompting
front, the ratio to no watchers, and the runner's CPU (user + system, from /proc) per delta. Each
watcher count gets a fresh runner and journal; every watcher is checked to have seen the whole
turn. A benchmark, not a test: nothing is asserted about speed.

    .venv/bin/python bench/shared.py [--deltas N] [--paced N] [--runs K] [--watchers 0,1,2,8]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from runner import REPO, Client, text  # the runner benchmark's client

TICKS = os.sysconf("SC_CLK_TCK")


def script(deltas: int, paced: int) -> dict[str, Any]:
    """A fast stream (the runner merges its deltas into few frames) and a paced one (500 deltas/s:
    a frame each, so every watcher costs the runner a frame per delta)."""
    steps = [step for _ in range(paced) for step in ({"say": "x" * 8}, {"sleep": 0.002})]
    return {
        "scenarios": [
            {"match": "stream", "steps": [{"say": "x" * 8} for _ in range(deltas)]},
            {"match": "paced", "steps": steps},
        ]
    }


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def runner_pid(env: dict[str, str]) -> int:
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", "runner", "status", "--json"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    [status] = json.loads(done.stdout)
    return status["pid"]


def watch(client: Client, seen: list[int]) -> None:
    """Read until the turn's end is announced, counting the agent text's characters (every one an
    "x", less those of the two "text" words of the update). Bytes only, no JSON decoding: the watchers
    share this process, and its GIL, with the prompting front's reader."""
    chars = 0
    while line := client.stdout.readline():
        if b'"agent_message_chunk"' in line:
            chars += line.count(b"x") - line.count(b"text")  # the "text" key and type hold one each
        elif b'"turnEnded"' in line:
            break
    seen.append(chars)


def shared_once(
    argv: list[str], env: dict[str, str], cwd: str, turn: tuple[str, int], watchers: int
) -> tuple[float, float]:
    """(deltas/s at the prompting front, runner CPU seconds per delta) for one turn."""
    prompter = Client(argv, env)
    sid = prompter.session(cwd)
    seen: list[int] = []
    threads, clients = [], []
    for _ in range(watchers):
        watcher = Client(argv, env)
        watcher.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        watcher.call("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
        thread = threading.Thread(target=watch, args=(watcher, seen), daemon=True)
        thread.start()
        threads.append(thread)
        clients.append(watcher)
    pid = runner_pid(env)
    cpu = cpu_seconds(pid)
    started = time.perf_counter()
    words, deltas = turn
    chars, response = prompter.until(prompter.send("session/prompt", {"sessionId": sid, "prompt": [text(words)]}))
    wall = time.perf_counter() - started
    for thread in threads:
        thread.join(120)
    cpu = cpu_seconds(pid) - cpu
    assert response["result"]["stopReason"] == "end_turn" and chars == 8 * deltas, (chars, response)
    assert seen == [8 * deltas] * watchers, seen  # every watcher saw the whole turn
    for client in [prompter, *clients]:
        client.close()
    subprocess.run(
        [sys.executable, "-m", "acp_server", "runner", "stop"], env=env, cwd=REPO, check=True, capture_output=True
    )
    return deltas / wall, cpu / deltas


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=50000)
    parser.add_argument("--paced", type=int, default=3000, help="deltas of the paced turn")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--watchers", default="0,1,2,8")
    args = parser.parse_args()
    counts = [int(n) for n in args.watchers.split(",")]
    turns = {"fast": ("stream", args.deltas), "paced": ("paced", args.paced)}
    results: dict[tuple[str, int], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="acpb-", dir="/tmp") as tmp:  # short: a socket path
        env = dict(os.environ, XDG_RUNTIME_DIR=f"{tmp}/run", XDG_DATA_HOME=f"{tmp}/data")
        os.makedirs(f"{tmp}/run")
        path = Path(tmp) / "script.json"
        path.write_text(json.dumps(script(args.deltas, args.paced)))
        for run in range(args.runs):  # interleaved: a busy spell of the machine hits every count
            for name, turn in turns.items():
                for watchers in counts:
                    db = f"{tmp}/{name}-{watchers}-{run}.db"
                    argv = ["--runner", "--agent", "scripted", "--script", str(path), "--db", db]
                    results.setdefault((name, watchers), []).append(shared_once(argv, env, tmp, turn, watchers))
    print(f"median of {args.runs}, through stdio fronts (load average {os.getloadavg()[0]:.1f}):")
    for name, (_, deltas) in turns.items():
        print(f"{name} turn of {deltas} deltas:")
        report(results, name, counts)
    return 0


def report(results: dict[tuple[str, int], list[tuple[float, float]]], name: str, counts: list[int]) -> None:
    base = statistics.median(rate for rate, _ in results[name, counts[0]])
    alone = statistics.median(cpu for _, cpu in results[name, counts[0]])
    for watchers in counts:
        runs = results[name, watchers]
        rate = statistics.median(r for r, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        each = f"{(cpu - alone) / watchers * 1e6:5.1f}" if watchers else "    -"
        print(
            f"  {watchers:2} watchers  {rate:8.0f} deltas/s at the prompter ({rate / base:.2f} of {counts[0]})"
            f"  runner CPU {cpu * 1e6:5.1f} us/delta, {each} us/delta/watcher"
            f"  (runs: {', '.join(f'{r:.0f}' for r, _ in runs)})"
        )


if __name__ == "__main__":
    sys.exit(main())
