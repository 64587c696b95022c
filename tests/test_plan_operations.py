"""Plan operations (ACP unstable, `--unstable`): a client that opted in (`clientCapabilities.plan`)
is shown our agents' plans as `plan_update` with a stable `planId`, and a plan emptied as
`plan_removed`, live and on `session/load` alike (the one mapper); any other client, or any
client of a server without the switch, gets today's `plan`. In the runner a connection sharing
the session is shown the form it asked for."""

from __future__ import annotations

from typing import Any

import pytest
from harness import FakeEditor, running
from runner_fronts import Front, scripted_runner
from test_runner import load, read_until, updates

from acp_server.acp.handlers import AcpAgent
from acp_server.acp.prompting import AgentOptions
from acp_server.turns.mapping import PLAN_ID, stable_plan
from adapters.scripted import ScriptedAdapter
from journal.store import Journal

SCRIPT = {
    "scenarios": [
        {
            "match": "plan",
            "steps": [
                {"plan": [{"content": "Look", "status": "in_progress"}, {"content": "Fix"}]},
                {"plan": [{"content": "Look", "status": "completed"}, {"content": "Fix", "status": "in_progress"}]},
                {"plan": []},
                {"say": "done"},
            ],
        }
    ]
}
LOOK = {"content": "Look", "status": "in_progress", "priority": "medium"}
FIX = {"content": "Fix", "status": "pending", "priority": "medium"}
LOOKED = {"content": "Look", "status": "completed", "priority": "medium"}
FIXING = {"content": "Fix", "status": "in_progress", "priority": "medium"}
OPERATIONS = [
    {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": PLAN_ID, "entries": [LOOK, FIX]}},
    {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": PLAN_ID, "entries": [LOOKED, FIXING]}},
    {"sessionUpdate": "plan_removed", "planId": PLAN_ID},
]
STABLE = [
    {"sessionUpdate": "plan", "entries": [LOOK, FIX]},
    {"sessionUpdate": "plan", "entries": [LOOKED, FIXING]},
    {"sessionUpdate": "plan", "entries": []},
]
PLAN_KINDS = ("plan", "plan_update", "plan_removed")


def agent(journal: Journal, *, unstable: bool) -> AcpAgent:
    return AcpAgent(ScriptedAdapter.from_data(SCRIPT), AgentOptions(unstable=unstable), journal=journal)


def plans(editor: FakeEditor, session_id: str) -> list[dict[str, Any]]:
    return [u for u in editor.updates[session_id] if u["sessionUpdate"] in PLAN_KINDS]


@pytest.mark.parametrize(
    ("unstable", "capabilities", "shown"),
    [
        (True, {"plan": {}}, OPERATIONS),
        (True, {}, STABLE),
        (False, {"plan": {}}, STABLE),  # without the switch nothing changes on the wire
    ],
)
async def test_plans_are_shown_as_the_client_asked_live_and_after_a_restart(tmp_path, unstable, capabilities, shown):
    db = tmp_path / "j.db"
    async with await Journal.open(db) as journal, running(agent(journal, unstable=unstable)) as editor:
        await editor.initialize(capabilities)
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "plan")
    assert plans(editor, sid) == shown

    async with await Journal.open(db) as journal, running(agent(journal, unstable=unstable)) as again:
        await again.initialize(capabilities)
        await again.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
    assert plans(again, sid) == shown


async def test_a_replay_cached_for_one_kind_of_client_is_not_served_to_the_other(tmp_path):
    async with await Journal.open(tmp_path / "j.db") as journal, running(agent(journal, unstable=True)) as editor:
        await editor.initialize({})
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "plan")
        params = {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
        await editor.request("session/load", params)  # caches the stable replay
    async with await Journal.open(tmp_path / "j.db") as journal, running(agent(journal, unstable=True)) as opted:
        await opted.initialize({"plan": {}})
        await opted.request("session/load", params)
    assert plans(opted, sid) == OPERATIONS


def test_a_plan_of_another_type_has_no_stable_form_and_other_updates_pass_as_they_are():
    markdown = {"sessionUpdate": "plan_update", "plan": {"type": "markdown", "planId": "p", "content": "# x"}}
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}}
    assert stable_plan(markdown) is None
    assert stable_plan(chunk) is chunk
    assert [stable_plan(u) for u in OPERATIONS] == STABLE


def test_in_the_runner_each_connection_sharing_a_session_sees_the_plan_in_its_own_form(tmp_path, monkeypatch):
    with scripted_runner(tmp_path, monkeypatch, SCRIPT) as options:
        opted = Front(*options, "--unstable", cwd=str(tmp_path))
        opted.call("initialize", {"protocolVersion": 1, "clientCapabilities": {"plan": {}}})
        sid = opted.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
        plain = Front(*options, "--unstable", cwd=str(tmp_path))
        plain.initialize()
        load(plain, sid, str(tmp_path))
        asked = opted.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "plan"}]})
        at_opted = read_until(opted, lambda f: f.get("id") == asked and "method" not in f)
        at_plain = read_until(plain, lambda f: _said_done(f))
        for front in (opted, plain):
            front.close_stdin()
            front.wait()
    assert [u for u in updates(at_opted) if u["sessionUpdate"] in PLAN_KINDS] == OPERATIONS
    assert [u for u in updates(at_plain) if u["sessionUpdate"] in PLAN_KINDS] == STABLE


def _said_done(frame: dict[str, Any]) -> bool:
    update = frame.get("params", {}).get("update", {})
    return update.get("sessionUpdate") == "agent_message_chunk" and update["content"].get("text") == "done"
