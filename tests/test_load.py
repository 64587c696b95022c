"""Load: 32 sessions streaming at once, with cancels and permission round trips sprinkled in.
Every turn ends with exactly one response, no session is left wedged, and memory stays flat.
`ACP_LOAD_ROUNDS=20` runs longer."""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from pathlib import Path

from stdio_server import StdioServer

SESSIONS = 32
ROUNDS = int(os.environ.get("ACP_LOAD_ROUNDS", "3"))
SCRIPT = {
    "scenarios": [
        {
            "match": "",
            "steps": [
                {"say": "chunk ", "repeat": 200},
                {"tool": "Deploy", "kind": "execute", "input": {"command": "make deploy"}, "ask": True, "result": "ok"},
                {"sleep": 0.05},
                {"say": "tail ", "repeat": 50},
            ],
        }
    ]
}


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def play_round(server: StdioServer, sessions: list[str], rng: random.Random) -> Counter:
    prompts = {
        server.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}): sid
        for sid in sessions
    }
    to_cancel = set(rng.sample(sessions, 6))
    outcomes: Counter = Counter()
    answered: Counter = Counter()
    while sum(answered.values()) < len(prompts):
        frame = server.next_frame(timeout=30)
        assert frame is not None, "the server closed its output"
        if frame.get("method") == "session/request_permission":
            option = rng.choice(["allow_once", "reject_once"])
            server.send(
                {
                    "jsonrpc": "2.0",
                    "id": frame["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": option}},
                }
            )
        elif frame.get("method") == "session/update" and frame["params"]["sessionId"] in to_cancel:
            server.send(
                {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": frame["params"]["sessionId"]}}
            )
            to_cancel.discard(frame["params"]["sessionId"])
        elif frame.get("id") in prompts and "method" not in frame:
            answered[frame["id"]] += 1
            outcomes[frame["result"]["stopReason"]] += 1
    assert set(answered.values()) == {1}, "a prompt got more or less than one response"
    return outcomes


def test_thirty_two_sessions_stream_with_cancels_and_permissions_and_nothing_wedges(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    server = StdioServer(
        "--agent",
        "scripted",
        "--script",
        str(script),
        "--db",
        str(tmp_path / "j.db"),
        "--max-workers",
        "8",
        cwd=str(tmp_path),
    )
    rng = random.Random(7)
    try:
        server.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        sessions = [
            server.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"] for _ in range(SESSIONS)
        ]
        memory = []
        for _ in range(ROUNDS):
            outcomes = play_round(server, sessions, rng)
            assert outcomes["end_turn"] >= SESSIONS - 6 and outcomes["end_turn"] + outcomes["cancelled"] == SESSIONS
            memory.append(rss_kib(server.process.pid))
        assert memory[-1] - memory[0] < 20 * 1024, f"RSS grew from {memory[0]} KiB to {memory[-1]} KiB"
        for sid in sessions:
            result = server.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/status"}]})
            assert result == {"stopReason": "end_turn"}
    finally:
        server.close_stdin()
        assert server.wait(timeout=15) == 0
        server.kill()
