"""Benchmark: one session's turn streamed to a stdio front (`--runner`) while 0, 1, 2 and 8 remote
WebSocket clients (`/acp`, a token from `acp-server pair`) watch it. The agent (bench/stamped.py)
stamps each delta with the monotonic clock; a watcher compares at receipt (same clock, same
machine). Two turns: fast (as quick as the agent makes deltas, which the runner merges into few
frames while a reader lags) and paced (1,000 deltas/s, about a frame each). Prints deltas/s at the
front against no watchers, p50/p99 latency at the watchers, the runner's CPU (user + system,
/proc) per delta and per delta per watcher, its RSS as each turn ends; then the RSS of 100 idle
remote connections. The watchers run in a child process of their own, so their parsing does not
share a GIL with the front's reader. Nothing is asserted about speed.

    .venv/bin/python bench/watchers.py [--deltas N] [--paced N] [--runs K] [--watchers 0,1,2,8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent))
from remote import INIT, acp, frame, idle_connections, rss_kib  # the remote endpoint's benchmark
from runner import Client, text  # the runner benchmark's stdio front
from shared import cpu_seconds

BENCH = Path(__file__).resolve().parent
WIDTH = 21  # characters of one stamped delta


async def watch_one(url: str, token: str, sid: str, cwd: str, turns: int, ready: asyncio.Event) -> list[int]:
    """Load the session, then read `turns` turns' ends; every delta's latency (ns) seen live."""
    auth = {"Authorization": f"Bearer {token}"}
    async with websockets.connect(url.replace("http", "ws", 1), additional_headers=auth, max_size=None) as socket:
        await socket.send(json.dumps(frame("initialize", INIT, 1)))
        await socket.send(json.dumps(frame("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []}, 2)))
        while json.loads(await socket.recv()).get("id") != 2:
            pass
        ready.set()
        latencies: list[int] = []
        while turns:
            raw = await socket.recv()
            now = time.monotonic_ns()
            message = json.loads(raw)
            update = message.get("params", {}).get("update", {})
            if update.get("sessionUpdate") == "agent_message_chunk":
                latencies += [now - int(stamp) for stamp in update["content"]["text"].split(";") if stamp]
            elif "turnEnded" in update.get("_meta", {}).get("acp-server", {}):
                turns -= 1
        return latencies


async def watchers_main(config: dict[str, Any]) -> None:
    """The child process: open the watchers, say "ready", print their latencies when the turns end."""
    readies = [asyncio.Event() for _ in range(config["count"])]
    args = (config["url"], config["token"], config["sid"], config["cwd"], config["turns"])
    tasks = [asyncio.create_task(watch_one(*args, ready)) for ready in readies]
    await asyncio.gather(*(ready.wait() for ready in readies))
    print("ready", flush=True)
    print(json.dumps(await asyncio.gather(*tasks)), flush=True)


def one_runner(place: str, env: dict[str, str], watchers: int, turns: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """A fresh runner and journal; each turn's figures with `watchers` remote clients watching."""
    db = f"{place}/w{watchers}-{time.monotonic_ns()}.db"
    options = ["--agent", "python", "--script", "stamped:run", "--db", db]
    acp("runner", "start", "--listen", "127.0.0.1:0", *options, env=env)
    pairing = json.loads(acp("pair", "--json", env=env))
    pid = json.loads(acp("runner", "status", "--json", env=env))[0]["pid"]
    front = Client(["--runner", *options], env)
    sid = front.session(place)
    config = {"count": watchers, "url": pairing["acp_url"], "token": pairing["token"], "sid": sid}
    child = subprocess.Popen(
        [sys.executable, __file__, "--child", json.dumps({**config, "cwd": place, "turns": len(turns)})],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    figures = []
    for count, gap_us in turns:
        cpu = cpu_seconds(pid)
        started = time.perf_counter()
        chars, answer = front.until(
            front.send("session/prompt", {"sessionId": sid, "prompt": [text(f"{count} {gap_us}")]})
        )
        wall = time.perf_counter() - started
        assert answer["result"]["stopReason"] == "end_turn" and chars == WIDTH * count, (chars, answer)
        figures.append({"rate": count / wall, "cpu": (cpu_seconds(pid) - cpu) / count, "rss": rss_kib(pid)})
    latencies = json.loads(child.stdout.readline())
    child.wait(60)
    assert all(len(each) == sum(c for c, _ in turns) for each in latencies)  # every delta, once
    start = 0
    for figure, (count, _) in zip(figures, turns, strict=True):  # each watcher's latencies, turn by turn
        figure["latency"] = [lat for each in latencies for lat in each[start : start + count]]
        start += count
    front.close()
    acp("runner", "stop", env=env)
    return figures


def percentile(values: list[int], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] / 1e6 if ordered else float("nan")


def report(results: dict[int, list[list[dict[str, Any]]]], names: list[str], counts: list[int]) -> None:
    for index, name in enumerate(names):
        print(f"{name}:")
        base = statistics.median(run[index]["rate"] for run in results[counts[0]])
        alone = statistics.median(run[index]["cpu"] for run in results[counts[0]])
        for watchers in counts:
            runs = [run[index] for run in results[watchers]]
            rate = statistics.median(r["rate"] for r in runs)
            cpu = statistics.median(r["cpu"] for r in runs)
            each = f"{(cpu - alone) / watchers * 1e6:6.1f}" if watchers else "     -"
            seen = [lat for r in runs for lat in r["latency"]]
            late = f"p50 {percentile(seen, 0.5):7.1f} ms, p99 {percentile(seen, 0.99):7.1f} ms" if seen else " " * 30
            rss = statistics.median(r["rss"] for r in runs) / 1024
            print(
                f"  {watchers:2} watchers  {rate:8.0f} deltas/s at the front ({rate / base:.2f} of {counts[0]})  "
                f"{late}  runner CPU {cpu * 1e6:6.1f} us/delta, {each} us/delta/watcher  RSS {rss:.1f} MiB"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=20000, help="deltas of the fast turn")
    parser.add_argument("--paced", type=int, default=2000, help="deltas of the paced turn (1,000/s)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--watchers", default="0,1,2,8")
    parser.add_argument("--idle", type=int, default=100, help="idle remote connections to hold open at the end")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(watchers_main(json.loads(args.child)))
        return 0
    counts = [int(n) for n in args.watchers.split(",")]
    turns = [(args.deltas, 0), (args.paced, 1000)]
    names = [f"fast turn of {args.deltas} deltas", f"paced turn of {args.paced} deltas at 1,000/s"]
    results: dict[int, list[list[dict[str, Any]]]] = {}
    with tempfile.TemporaryDirectory(prefix="acpb-", dir="/tmp") as place:  # short: a socket path
        path = os.pathsep.join([str(BENCH), os.environ.get("PYTHONPATH", "")])
        env = {**os.environ, "XDG_RUNTIME_DIR": place, "XDG_DATA_HOME": f"{place}/data", "PYTHONPATH": path}
        for _ in range(args.runs):  # interleaved: a busy spell of the machine hits every count
            for watchers in counts:
                results.setdefault(watchers, []).append(one_runner(place, env, watchers, turns))
        acp("runner", "start", "--listen", "127.0.0.1:0", "--agent", "echo", "--db", f"{place}/idle.db", env=env)
        pairing = json.loads(acp("pair", "--json", env=env))
        try:
            before, after, _ = asyncio.run(idle_connections(pairing["acp_url"], pairing["token"], args.idle, env))
        finally:
            acp("runner", "stop", env=env)
    print(
        f"median of {args.runs}, a stdio front and W remote WebSocket watchers (load average {os.getloadavg()[0]:.1f}):"
    )
    report(results, names, counts)
    each = (after - before) / args.idle
    print(
        f"{args.idle} idle remote connections: runner RSS {before / 1024:.1f} -> {after / 1024:.1f} MiB "
        f"({each:.0f} KiB each)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
