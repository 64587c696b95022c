"""Benchmark: the runner's remote endpoint. One runner (`runner start --listen 127.0.0.1:0`), one
streamed turn of N deltas, read (a) by a stdio front (`--runner`), (b) over WebSocket, (c) over
Streamable HTTP (POST + SSE); prints the agent's deltas/s (median of K runs) for each (deltas are
merged into fewer frames while a reader lags, as the runner does for every connection). Every client parses
each frame (json.loads), so the figures compare transports, not clients. Nothing is asserted.

    .venv/bin/python bench/remote.py [--deltas N] [--runs K]
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

import httpx
import websockets

REPO = Path(__file__).resolve().parent.parent
INIT = {"protocolVersion": 1, "clientCapabilities": {}}


def acp(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", *args], capture_output=True, text=True, env=env, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def frame(method: str, params: dict[str, Any], request_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def is_delta(message: dict[str, Any]) -> int:
    """How many of the agent's deltas (8 characters each) a frame carries (merged while a reader lags)."""
    if message.get("method") != "session/update":
        return 0
    update = message["params"]["update"]
    return len(update["content"]["text"]) // 8 if update["sessionUpdate"] == "agent_message_chunk" else 0


def front_turn(options: list[str], env: dict[str, str], cwd: str) -> float:
    process = subprocess.Popen(
        [sys.executable, "-m", "acp_server", "--runner", *options],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert process.stdin and process.stdout
    stdin, stdout = process.stdin, process.stdout

    def call(method: str, params: dict[str, Any], request_id: int) -> tuple[int, dict[str, Any]]:
        stdin.write(json.dumps(frame(method, params, request_id)).encode() + b"\n")
        stdin.flush()
        deltas = 0
        while True:
            message = json.loads(stdout.readline())
            deltas += is_delta(message)
            if message.get("id") == request_id and "method" not in message:
                return deltas, message

    call("initialize", INIT, 1)
    session = call("session/new", {"cwd": cwd, "mcpServers": []}, 2)[1]["result"]["sessionId"]
    started = time.perf_counter()
    deltas, _ = call("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "stream"}]}, 3)
    elapsed = time.perf_counter() - started
    stdin.close()
    process.wait()
    return deltas / elapsed


async def ws_turn(url: str, token: str, cwd: str) -> float:
    async with websockets.connect(
        url.replace("http", "ws", 1), additional_headers={"Authorization": f"Bearer {token}"}, max_size=None
    ) as socket:

        async def call(method: str, params: dict[str, Any], request_id: int) -> tuple[int, dict[str, Any]]:
            await socket.send(json.dumps(frame(method, params, request_id)))
            deltas = 0
            while True:
                message = json.loads(await socket.recv())
                deltas += is_delta(message)
                if message.get("id") == request_id and "method" not in message:
                    return deltas, message

        await call("initialize", INIT, 1)
        session = (await call("session/new", {"cwd": cwd, "mcpServers": []}, 2))[1]["result"]["sessionId"]
        started = time.perf_counter()
        deltas, _ = await call(
            "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "stream"}]}, 3
        )
        return deltas / (time.perf_counter() - started)


async def http_turn(url: str, token: str, cwd: str) -> float:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
        opened = await client.post(url, json=frame("initialize", INIT, 1))
        connection = {"Acp-Connection-Id": opened.headers["acp-connection-id"], "Accept": "text/event-stream"}

        async def first_answer(headers: dict[str, str], request_id: int, counted: list[int]) -> dict[str, Any]:
            async with client.stream("GET", url, headers=headers) as stream:
                async for line in stream.aiter_lines():
                    if line.startswith("data: "):
                        message = json.loads(line[6:])
                        counted[0] += is_delta(message)
                        if message.get("id") == request_id and "method" not in message:
                            return message
            raise AssertionError("the stream ended")

        waiting = asyncio.create_task(first_answer(connection, 2, [0]))
        await client.post(url, json=frame("session/new", {"cwd": cwd, "mcpServers": []}, 2), headers=connection)
        session = (await waiting)["result"]["sessionId"]
        counted = [0]
        scoped = {**connection, "Acp-Session-Id": session}
        waiting = asyncio.create_task(first_answer(scoped, 3, counted))
        started = time.perf_counter()
        prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "stream"}]}
        await client.post(url, json=frame("session/prompt", prompt, 3), headers=scoped)
        await waiting
        return counted[0] / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--deltas", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="acpb-", dir="/tmp") as place:
        env = {**os.environ, "XDG_RUNTIME_DIR": place, "XDG_DATA_HOME": f"{place}/data"}
        script = Path(place, "script.json")
        script.write_text(json.dumps({"scenarios": [{"match": "stream", "steps": [{"say": "x" * 8}] * args.deltas}]}))
        options = ["--agent", "scripted", "--script", str(script), "--db", f"{place}/journal.db"]
        acp("runner", "start", "--listen", "127.0.0.1:0", *options, env=env)
        pairing = json.loads(acp("pair", "--json", env=env))
        try:
            figures = {
                "stdio front": [front_turn(options, env, place) for _ in range(args.runs)],
                "WebSocket": [
                    asyncio.run(ws_turn(pairing["acp_url"], pairing["token"], place)) for _ in range(args.runs)
                ],
                "Streamable HTTP": [
                    asyncio.run(http_turn(pairing["acp_url"], pairing["token"], place)) for _ in range(args.runs)
                ],
            }
        finally:
            acp("runner", "stop", env=env)
    print(f"one turn of {args.deltas} deltas through one runner, median of {args.runs} runs")
    for name, rates in figures.items():
        print(f"  {name:16} {statistics.median(rates):9,.0f} deltas/s   (min {min(rates):,.0f}, max {max(rates):,.0f})")


if __name__ == "__main__":
    main()
