"""Benchmark: runner mode. Prints (1) the time from a new front's spawn to the first live update
of a turn that kept running after its editor's front was SIGKILLed (split into initialize, load
answered, first live update), and (2) streaming throughput of one turn through a front next to
the in-process server's. Each mode gets fresh runtime/data directories and a fresh journal.
A benchmark, not a test: nothing is asserted about speed.

    .venv/bin/python bench/runner.py [--deltas N] [--runs K]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parent.parent


def scenario(deltas: int) -> dict[str, Any]:
    slow = [step for n in range(100000) for step in ([{"say": f"s{n} "}, {"sleep": 0.01}])]
    return {
        "scenarios": [
            {"match": "stream", "steps": [{"say": "x" * 8} for _ in range(deltas)]},
            {"match": "slow", "steps": slow},
        ]
    }


class Client:
    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "acp_server", *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=REPO,
            start_new_session=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin: IO[bytes] = self.process.stdin
        self.stdout: IO[bytes] = self.process.stdout
        self.next_id = 0

    def send(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        self.stdin.write(line.encode() + b"\n")
        self.stdin.flush()
        return self.next_id

    def until(self, request_id: int) -> tuple[int, dict[str, Any]]:
        """Characters of agent text read up to the response to `request_id`, and that response."""
        chars = 0
        while line := self.stdout.readline():
            frame = json.loads(line)
            if frame.get("id") == request_id and "method" not in frame:
                return chars, frame
            update = frame.get("params", {}).get("update", {})
            if update.get("sessionUpdate") == "agent_message_chunk":
                chars += len(update["content"]["text"])
        raise RuntimeError("the server closed its stdout")

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return self.until(self.send(method, params))[1]["result"]

    def session(self, cwd: str) -> str:
        self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        return self.call("session/new", {"cwd": cwd, "mcpServers": []})["sessionId"]

    def close(self) -> None:
        self.stdin.close()
        self.process.wait(30)

    def kill_group(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def stream_once(server: list[str], env: dict[str, str], cwd: str, deltas: int) -> float:
    client = Client(server, env)
    sid = client.session(cwd)
    started = time.perf_counter()
    chars, response = client.until(client.send("session/prompt", {"sessionId": sid, "prompt": [text("stream")]}))
    wall = time.perf_counter() - started
    assert response["result"]["stopReason"] == "end_turn" and chars == 8 * deltas, (chars, response)
    client.close()
    return deltas / wall


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def reattach_once(server: list[str], env: dict[str, str], cwd: str) -> tuple[float, float, float]:
    first = Client(server, env)
    sid = first.session(cwd)
    first.send("session/prompt", {"sessionId": sid, "prompt": [text("slow")]})
    for _ in range(5):
        first.stdout.readline()
    first.kill_group()
    spawned = time.perf_counter()
    second = Client(server, env)
    second.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    initialized = time.perf_counter()
    second.until(second.send("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []}))
    loaded = time.perf_counter()
    while json.loads(second.stdout.readline()).get("params", {}).get("update", {}).get("sessionUpdate") != (
        "agent_message_chunk"
    ):
        pass
    live = time.perf_counter()
    second.send("session/cancel", {"sessionId": sid})
    second.close()
    return initialized - spawned, loaded - spawned, live - spawned


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="acpb-", dir="/tmp") as tmp:  # short: a socket path
        env = dict(os.environ, XDG_RUNTIME_DIR=f"{tmp}/run", XDG_DATA_HOME=f"{tmp}/data")
        os.makedirs(f"{tmp}/run")
        script = Path(tmp) / "script.json"
        script.write_text(json.dumps(scenario(args.deltas)))
        results: dict[str, list[float]] = {}
        for name, extra in (("in-process", []), ("through a front", ["--runner"])):
            base = ["--agent", "scripted", "--script", str(script), *extra]
            results[name] = [
                stream_once([*base, "--db", f"{tmp}/{name[:2]}{n}.db"], env, tmp, args.deltas) for n in range(args.runs)
            ]
        reattach = [
            reattach_once(
                ["--runner", "--agent", "scripted", "--script", str(script), "--db", f"{tmp}/re.db"], env, tmp
            )
            for _ in range(args.runs)
        ]
        subprocess.run([sys.executable, "-m", "acp_server", "runner", "stop"], env=env, cwd=REPO, check=True)
    print(f"streaming, one turn of {args.deltas} deltas (median of {args.runs}):")
    for name, rates in results.items():
        print(f"  {name:16} {statistics.median(rates):9.0f} deltas/s   (runs: {', '.join(f'{r:.0f}' for r in rates)})")
    ratio = statistics.median(results["through a front"]) / statistics.median(results["in-process"])
    print(f"  front / in-process: {ratio:.2f}")
    print(f"new front spawn -> (median of {args.runs}, ms):")
    for label, index in (("initialize answered", 0), ("load answered", 1), ("first live update", 2)):
        print(f"  {label:20} {statistics.median(r[index] for r in reattach) * 1000:7.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
