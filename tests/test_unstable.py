"""ACP's unstable parts behind `--unstable` (ACP_SERVER_UNSTABLE=1): the switch itself, and
`session/fork` built from the journal for our own agents. With the switch on every frame is
checked against schema.unstable.json, with it off against schema.json (harness, stdio_server):
off, nothing changes on the wire."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness import FakeEditor, RemoteError, running
from stdio_server import StdioServer

from acp_server.acp.handlers import AcpAgent
from acp_server.acp.prompting import AgentOptions
from acp_server.cli.runner import runner_argv
from acp_server.cli.settings import add_server_options, bare_switches
from acp_server.protocol import methods
from acp_server.rpc.errors import METHOD_NOT_FOUND
from adapters.scripted import ScriptedAdapter
from journal.store import Journal

SCRIPT = {
    "scenarios": [
        {
            "match": "hold",
            "steps": [{"tool": "Deploy", "kind": "execute", "input": {"command": "make deploy"}, "ask": True}],
        },
        {"match": "", "steps": [{"say": "noted"}]},
    ]
}


def agent(journal: Journal, *, unstable: bool = True) -> AcpAgent:
    return AcpAgent(ScriptedAdapter.from_data(SCRIPT), AgentOptions(unstable=unstable), journal=journal)


def parsed(argv: list[str], env: dict[str, str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    old = dict(os.environ)
    os.environ.update(env or {})
    try:
        add_server_options(parser)
        return parser.parse_args(bare_switches(argv))
    finally:
        os.environ.clear()
        os.environ.update(old)


@pytest.mark.parametrize(
    ("argv", "env", "on"),
    [
        ([], {}, False),
        (["--unstable"], {}, True),
        (["--unstable", "0"], {}, False),
        ([], {"ACP_SERVER_UNSTABLE": "1"}, True),
        (["--unstable=0"], {"ACP_SERVER_UNSTABLE": "1"}, False),
    ],
)
def test_the_unstable_switch_is_a_flag_or_its_variable_and_reaches_the_runner(argv, env, on):
    args = parsed(argv, env)
    assert (args.unstable == "1") is on
    runner = runner_argv(args)
    assert ("--unstable" in runner and runner[runner.index("--unstable") + 1] == "1") is on


def initialize_over_stdio(tmp_path: Path, env: dict[str, str]) -> dict[str, Any]:
    server = StdioServer("--agent", "scripted", "--db", str(tmp_path / "j.db"), env={**os.environ, **env})
    try:
        request = server.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        return server.response(request)["result"]
    finally:
        server.close_stdin()
        server.wait()


def test_initialize_offers_fork_only_with_the_switch_and_is_otherwise_unchanged(tmp_path):
    stable = initialize_over_stdio(tmp_path, {"ACP_SERVER_UNSTABLE": "0"})
    unstable = initialize_over_stdio(tmp_path, {"ACP_SERVER_UNSTABLE": "1"})
    assert "fork" not in stable["agentCapabilities"]["sessionCapabilities"]
    assert unstable["agentCapabilities"]["sessionCapabilities"] == {
        **stable["agentCapabilities"]["sessionCapabilities"],
        "fork": {},
    }
    assert {**unstable, "agentCapabilities": None} == {**stable, "agentCapabilities": None}


def prompts_replayed(editor: FakeEditor, session_id: str) -> list[str]:
    return [u["content"]["text"] for u in editor.updates[session_id] if u["sessionUpdate"] == "user_message_chunk"]


async def load(editor: FakeEditor, session_id: str, cwd: Path) -> list[str]:
    await editor.request("session/load", {"sessionId": session_id, "cwd": str(cwd), "mcpServers": []})
    return prompts_replayed(editor, session_id)


async def fork(editor: FakeEditor, session_id: str, cwd: Path) -> str:
    result = await editor.request("session/fork", {"sessionId": session_id, "cwd": str(cwd), "mcpServers": []})
    return result["sessionId"]


async def test_a_fork_goes_its_own_way_and_both_histories_survive_a_restart(tmp_path):
    db = tmp_path / "j.db"
    async with await Journal.open(db) as journal, running(agent(journal)) as editor:
        await editor.initialize()
        parent = await editor.new_session(tmp_path)
        await editor.prompt(parent, "first")
        child = await fork(editor, parent, tmp_path)
        assert child != parent
        await editor.prompt(parent, "parent second")
        await editor.prompt(child, "child second")
        listed = await editor.request("session/list", {})
    assert {child, parent} <= {s["sessionId"] for s in listed["sessions"]}

    async with await Journal.open(db) as journal, running(agent(journal)) as again:
        await again.initialize()
        assert await load(again, child, tmp_path) == ["first", "child second"]
        assert await load(again, parent, tmp_path) == ["first", "parent second"]
        await again.prompt(child, "child third")  # the agent is given the fork's own history
        history = (await journal.history(child)).messages
        assert [m.text for m in history if m.role == "user"] == ["first", "child second", "child third"]


async def test_a_fork_while_a_turn_runs_is_taken_at_the_last_finished_turn(tmp_path):
    asked = anyio.Event()
    answer = anyio.Event()

    async def held(params: dict[str, Any]) -> dict[str, Any]:
        asked.set()
        await answer.wait()
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    async with await Journal.open(tmp_path / "j.db") as journal, running(agent(journal)) as editor:
        editor.handlers[methods.REQUEST_PERMISSION] = held
        await editor.initialize()
        parent = await editor.new_session(tmp_path)
        await editor.prompt(parent, "first")
        running_turn = await editor.start_prompt(parent, "hold on")
        with anyio.fail_after(10):
            await asked.wait()
        child = await fork(editor, parent, tmp_path)
        answer.set()
        assert (await running_turn)["result"]["stopReason"] == "end_turn"
        assert await load(editor, child, tmp_path) == ["first"]
        assert await load(editor, parent, tmp_path) == ["first", "hold on"]


async def test_without_the_switch_there_is_no_session_fork(tmp_path):
    async with await Journal.open(tmp_path / "j.db") as journal, running(agent(journal, unstable=False)) as editor:
        await editor.initialize()
        parent = await editor.new_session(tmp_path)
        with pytest.raises(RemoteError) as failed:
            await fork(editor, parent, tmp_path)
    assert failed.value.code == METHOD_NOT_FOUND


async def test_forking_an_unknown_session_is_resource_not_found_and_creates_nothing(tmp_path):
    async with await Journal.open(tmp_path / "j.db") as journal, running(agent(journal)) as editor:
        await editor.initialize()
        with pytest.raises(RemoteError) as failed:
            await fork(editor, "sess_unknown", tmp_path)
        sessions, _ = await journal.list_sessions()
    assert failed.value.code == -32002
    assert sessions == []


def test_the_vendored_unstable_schema_has_session_fork():
    meta = json.loads((Path(__file__).parent.parent / "schema" / "meta.unstable.json").read_text())
    assert meta["agentMethods"]["session_fork"] == methods.SESSION_FORK


def test_a_fork_in_the_runner_is_a_session_of_the_front_that_made_it_and_another_front_loads_it(tmp_path, monkeypatch):
    from runner_fronts import Front, scripted_runner
    from test_runner import load, read_until, updates

    with scripted_runner(tmp_path, monkeypatch, SCRIPT) as options:
        front = Front(*options, "--unstable", cwd=str(tmp_path))
        parent = front.start_session(str(tmp_path))
        front.call("session/prompt", {"sessionId": parent, "prompt": [{"type": "text", "text": "first"}]})
        child = front.call("session/fork", {"sessionId": parent, "cwd": str(tmp_path), "mcpServers": []})["sessionId"]
        asked = front.request("session/prompt", {"sessionId": child, "prompt": [{"type": "text", "text": "second"}]})
        shown = read_until(front, lambda f: f.get("id") == asked and "method" not in f)
        other = Front(*options, "--unstable", cwd=str(tmp_path))
        other.initialize()
        replayed, _ = load(other, child, str(tmp_path))
        for each in (front, other):
            each.close_stdin()
            each.wait()
    said = [u for u in updates(shown) if u["sessionUpdate"] == "agent_message_chunk"]
    assert [u["content"]["text"] for u in said] == ["noted"]
    users = [u["content"]["text"] for u in updates(replayed) if u["sessionUpdate"] == "user_message_chunk"]
    assert users == ["first", "second"]
