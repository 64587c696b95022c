"""One runner continues every stored session of its journal with the agent that session was made
with, whichever configuration that was: a session made by `acp-server prompt --agent echo` and
one made on the runner's own scripted agent, both listed with their agent and both continued
from one remote WebSocket connection (every frame checked against the schema), the runner
starting the echo agent beside its own instead of answering with the wrong one."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import websockets
from runner_fronts import Front, cli, runners, scripted_runner
from test_remote_endpoint import Socket, chunk_text

from acp_server.rpc.errors import INTERNAL_ERROR
from journal.records import SessionRecord
from journal.store import Journal

SCRIPT = {"scenarios": [{"match": "", "steps": [{"say": "scripted "}, {"say": "reply"}]}]}


@pytest.fixture
def runner_env(tmp_path, monkeypatch):
    with scripted_runner(tmp_path, monkeypatch, SCRIPT) as options:
        yield options


def db_of(options: tuple[str, ...]) -> str:
    return options[options.index("--db") + 1]


def answered(request_id: int) -> Any:
    return lambda frame: frame.get("id") == request_id and "method" not in frame


async def turn(socket: Socket, session_id: str, text: str) -> tuple[str, dict[str, Any]]:
    """One prompt's streamed text and its answer."""
    content = [{"type": "text", "text": text}]
    asked = await socket.request("session/prompt", {"sessionId": session_id, "prompt": content})
    frames = await socket.until(answered(asked))
    return chunk_text(frames), frames[-1]


def test_one_remote_connection_continues_sessions_of_two_agents_each_with_its_own(tmp_path: Path, runner_env):
    made = cli("prompt", "--agent", "echo", "--db", db_of(runner_env), "--cwd", str(tmp_path), "said to echo")
    assert made.returncode == 0, made.stderr
    done = cli("runner", "start", "--listen", "127.0.0.1:0", *runner_env)
    assert done.returncode == 0, done.stderr
    (status,) = runners()
    url = status["listen"]["acpUrl"].replace("http", "ws", 1)
    token = json.loads(cli("pair", "--json").stdout)["token"]

    async def both() -> dict[str, Any]:
        auth = {"Authorization": f"Bearer {token}"}
        async with websockets.connect(url, additional_headers=auth) as raw:
            socket = Socket(raw)
            await socket.until(answered(await socket.request("initialize", {"protocolVersion": 1})))
            new = await socket.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
            own = (await socket.until(answered(new)))[-1]["result"]["sessionId"]
            listed = (await socket.until(answered(await socket.request("session/list", {}))))[-1]["result"]
            agents = {s["sessionId"]: s["_meta"]["acp-server"]["agent"] for s in listed["sessions"]}
            (echoed,) = [sid for sid, agent in agents.items() if agent == "echo"]
            load = await socket.request("session/load", {"sessionId": echoed, "cwd": str(tmp_path), "mcpServers": []})
            replay = chunk_text(await socket.until(answered(load)))
            return {
                "agents": agents,
                "own": own,
                "replay": replay,
                "echo": await turn(socket, echoed, "echo this back"),
                "scripted": await turn(socket, own, "anything"),
                "echo again": await turn(socket, echoed, "and this"),
            }

    seen = asyncio.run(asyncio.wait_for(both(), 60))
    assert sorted(seen["agents"].values()) == ["echo", "scripted"]
    assert seen["agents"][seen["own"]] == "scripted"
    assert seen["replay"] == "said to echo"
    for key, text in (("echo", "echo this back"), ("scripted", "scripted reply"), ("echo again", "and this")):
        streamed, answer = seen[key]
        assert (streamed, answer["result"]["stopReason"]) == (text, "end_turn")
    (status,) = runners()  # one runner hosts both agents: no second one was started
    assert status["agents"] == ["scripted", "echo"]
    assert "agent scripted (and echo for their sessions)" in cli("runner", "status").stdout
    front = Front(*runner_env)  # an editor's stdio front, on the scripted configuration, does the same
    try:
        front.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        echoed = next(sid for sid, agent in seen["agents"].items() if agent == "echo")
        front.call("session/resume", {"sessionId": echoed, "cwd": str(tmp_path), "mcpServers": []})
        asked = front.request("session/prompt", {"sessionId": echoed, "prompt": [{"type": "text", "text": "front"}]})
        assert front.response(asked)["result"]["stopReason"] == "end_turn"
        assert chunk_text(front.frames) == "front"
    finally:
        front.close_stdin()
        front.wait()


def test_a_session_whose_agent_cannot_be_started_here_is_refused_not_given_to_the_runners_own(
    tmp_path: Path, runner_env
):
    async def store() -> None:
        journal = await Journal.open(db_of(runner_env))
        try:
            record = SessionRecord(id="elsewhere", cwd=str(tmp_path), adapter="gone", launch={"agent": "no-such-agent"})
            await journal.create_session(record)
        finally:
            await journal.close()

    asyncio.run(store())
    done = cli("runner", "start", "--listen", "127.0.0.1:0", *runner_env)
    assert done.returncode == 0, done.stderr
    (status,) = runners()
    url = status["listen"]["acpUrl"].replace("http", "ws", 1)
    token = json.loads(cli("pair", "--json").stdout)["token"]

    async def attempts() -> tuple[dict[str, Any], dict[str, Any], str]:
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {token}"}) as raw:
            socket = Socket(raw)
            await socket.until(answered(await socket.request("initialize", {"protocolVersion": 1})))
            opening = {"sessionId": "elsewhere", "cwd": str(tmp_path), "mcpServers": []}
            load = (await socket.until(answered(await socket.request("session/load", opening))))[-1]
            content = [{"type": "text", "text": "hello"}]
            prompted = await socket.request("session/prompt", {"sessionId": "elsewhere", "prompt": content})
            prompt = (await socket.until(answered(prompted)))[-1]
            new = await socket.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
            own = (await socket.until(answered(new)))[-1]["result"]["sessionId"]
            streamed, _answer = await turn(socket, own, "still serving")
            return load, prompt, streamed

    load, prompt, streamed = asyncio.run(asyncio.wait_for(attempts(), 60))
    for refused in (load, prompt):
        assert refused["error"]["code"] == INTERNAL_ERROR
        assert "cannot start agent 'no-such-agent'" in refused["error"]["message"]
    assert streamed == "scripted reply"  # the runner goes on serving its own agent's sessions
