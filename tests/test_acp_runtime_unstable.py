"""ACP's unstable parts with an agent below (`--unstable`): an agent that offers `session/fork`
(as claude-agent-acp and codex-acp do) forks its own session when the editor forks ours, the
fork being recorded in our journal as a session of its own with the history so far and brought
back under the agent's fork (not its parent) after a restart; one that does not is offered no
fork. A client's `systemPrompt` reaches an agent that offers it, in the modes it offers."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from acp_child import Runtimes
from harness import FakeEditor, RemoteError, running

from acp_server.acp.handlers import AcpAgent
from acp_server.acp.prompting import AgentOptions
from acp_server.rpc.errors import INVALID_PARAMS, METHOD_NOT_FOUND
from journal.store import Journal

FAKE_AGENT = str(Path(__file__).with_name("fake_acp_agent.py"))


@pytest.fixture
def runtimes():
    made = Runtimes()
    yield made
    made.close()


def fake(root: Path, *flags: str) -> tuple[str, ...]:
    return (sys.executable, FAKE_AGENT, "--store", str(root / "store.json"), *flags)


def said(editor: FakeEditor, session_id: str) -> list[str]:
    """What the agent said, one entry per message (the fake answers each prompt in one chunk)."""
    return [u["content"]["text"] for u in editor.updates[session_id] if u["sessionUpdate"] == "agent_message_chunk"]


def agent(runtimes: Runtimes, argv: tuple[str, ...], journal: Journal) -> AcpAgent:
    return AcpAgent(runtimes.make(argv), AgentOptions(unstable=True), journal=journal)


async def fork(editor: FakeEditor, session_id: str, cwd: Path, **extra: Any) -> str:
    params = {"sessionId": session_id, "cwd": str(cwd), "mcpServers": [], **extra}
    return (await editor.request("session/fork", params))["sessionId"]


async def test_an_agent_below_that_forks_forks_its_own_session_and_the_fork_survives_a_restart(tmp_path, runtimes):
    argv = fake(tmp_path, "--fork")
    db = tmp_path / "journal.db"
    async with await Journal.open(db) as journal, running(agent(runtimes, argv, journal)) as editor:
        caps = (await editor.initialize())["agentCapabilities"]["sessionCapabilities"]
        assert caps["fork"] == {}
        parent = await editor.new_session(tmp_path)
        await editor.prompt(parent, "first")
        child = await fork(editor, parent, tmp_path)
        await editor.prompt(parent, "parent second")
        await editor.prompt(child, "child second")
    assert said(editor, child) == ["You said child second; I remember first."]
    assert said(editor, parent)[-1] == "You said parent second; I remember first."
    runtimes.close()

    async with await Journal.open(db) as journal, running(agent(runtimes, argv, journal)) as again:
        await again.initialize()
        await again.request("session/load", {"sessionId": child, "cwd": str(tmp_path), "mcpServers": []})
        replayed = said(again, child)
        await again.prompt(child, "child third")
    assert replayed == ["You said first; I remember nothing.", "You said child second; I remember first."]
    assert said(again, child)[-1] == "You said child third; I remember first, child second."


async def test_a_fork_not_prompted_before_a_restart_is_still_the_agents_fork(tmp_path, runtimes):
    argv = fake(tmp_path, "--fork")
    db = tmp_path / "journal.db"
    async with await Journal.open(db) as journal, running(agent(runtimes, argv, journal)) as editor:
        await editor.initialize()
        parent = await editor.new_session(tmp_path)
        await editor.prompt(parent, "first")
        child = await fork(editor, parent, tmp_path)
    runtimes.close()
    async with await Journal.open(db) as journal, running(agent(runtimes, argv, journal)) as again:
        await again.initialize()
        await again.request("session/resume", {"sessionId": child, "cwd": str(tmp_path), "mcpServers": []})
        await again.prompt(child, "child")
        await again.request("session/resume", {"sessionId": parent, "cwd": str(tmp_path), "mcpServers": []})
        await again.prompt(parent, "parent")
    assert said(again, child) == ["You said child; I remember first."]
    assert said(again, parent) == ["You said parent; I remember first."]  # the fork's turn is not the parent's


async def test_an_agent_below_without_fork_is_offered_none(tmp_path, runtimes):
    async with (
        await Journal.open(tmp_path / "journal.db") as journal,
        running(agent(runtimes, fake(tmp_path), journal)) as editor,
    ):
        caps = (await editor.initialize())["agentCapabilities"]["sessionCapabilities"]
        parent = await editor.new_session(tmp_path)
        with pytest.raises(RemoteError) as failed:
            await fork(editor, parent, tmp_path)
    assert "fork" not in caps
    assert failed.value.code == METHOD_NOT_FOUND


async def test_a_system_prompt_reaches_an_agent_below_that_offers_it_and_only_in_its_modes(tmp_path, runtimes):
    argv = fake(tmp_path, "--system-prompt", "--fork")
    async with (
        await Journal.open(tmp_path / "journal.db") as journal,
        running(agent(runtimes, argv, journal)) as editor,
    ):
        caps = (await editor.initialize())["agentCapabilities"]["sessionCapabilities"]
        assert caps["systemPrompt"] == {}  # append only, as the agent offers
        prompt = {"mode": "append", "content": [{"type": "text", "text": "be brief"}]}
        params = {"cwd": str(tmp_path), "mcpServers": [], "systemPrompt": prompt}
        sid = (await editor.request("session/new", params))["sessionId"]
        await editor.prompt(sid, "hi")
        other = {"mode": "append", "content": [{"type": "text", "text": "be verbose"}]}
        child = await fork(editor, sid, tmp_path, systemPrompt=other)
        await editor.prompt(child, "again")
        with pytest.raises(RemoteError) as refused:
            await editor.request("session/new", {**params, "systemPrompt": {**prompt, "mode": "override"}})
    assert said(editor, sid) == ["You said hi; I remember nothing. I was told to append: be brief."]
    assert said(editor, child) == ["You said again; I remember hi. I was told to append: be verbose."]
    assert refused.value.code == INVALID_PARAMS


THEIR_ENTRIES = [{"content": "Look", "status": "in_progress", "priority": "high"}]
PLAN_KINDS = ("plan", "plan_update", "plan_removed")


def plans(editor: FakeEditor, session_id: str) -> list[dict[str, Any]]:
    return [u for u in editor.updates[session_id] if u["sessionUpdate"] in PLAN_KINDS]


@pytest.mark.parametrize(
    ("unstable", "capabilities", "offered", "shown"),
    [
        (
            True,
            {"plan": {}},
            True,
            [
                {
                    "sessionUpdate": "plan_update",
                    "plan": {"type": "items", "planId": "their-plan", "entries": THEIR_ENTRIES},
                },
                {"sessionUpdate": "plan_removed", "planId": "their-plan"},
            ],
        ),
        (
            True,
            {},
            True,
            [{"sessionUpdate": "plan", "entries": THEIR_ENTRIES}, {"sessionUpdate": "plan", "entries": []}],
        ),
        (
            False,
            {"plan": {}},
            False,
            [{"sessionUpdate": "plan", "entries": THEIR_ENTRIES}, {"sessionUpdate": "plan", "entries": []}],
        ),
    ],
)
async def test_an_agent_belows_plan_operations_reach_an_editor_in_the_form_it_asked_for(
    tmp_path, runtimes, unstable, capabilities, offered, shown
):
    calls = tmp_path / "calls.jsonl"
    argv = fake(tmp_path, "--calls", str(calls))
    db = tmp_path / "journal.db"
    runtime = runtimes.make(argv)
    async with (
        await Journal.open(db) as journal,
        running(AcpAgent(runtime, AgentOptions(unstable=unstable), journal=journal)) as editor,
    ):
        await editor.initialize(capabilities)
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "plan")
    initialize = next(json.loads(line) for line in calls.read_text().splitlines() if '"initialize"' in line)
    assert ("plan" in initialize["params"]["clientCapabilities"]) is offered
    assert plans(editor, sid) == shown
    runtimes.close()

    async with (
        await Journal.open(db) as journal,
        running(AcpAgent(runtimes.make(argv), AgentOptions(unstable=unstable), journal=journal)) as again,
    ):
        await again.initialize(capabilities)
        await again.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
    assert plans(again, sid) == shown
