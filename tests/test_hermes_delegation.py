"""Hermes' subagents (its delegate_task tool) answer to the same permissions as the agent: their
tool calls show in the turn that delegated them, ask about the visible call, go through the
editor, and run within that turn; nothing runs after it where nobody can be asked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("run_agent", reason="the hermes extra is not installed")

from fake_openai import FakeOpenAI, Stream, reply
from hermes_home import hermes_model

from adapters.base import PermissionDecision
from adapters.events import ToolCallStarted, ToolCallUpdated
from adapters.hermes import HermesAdapter, routing
from adapters.testing import Answers, RecordingSink, run_turn

GOAL = "write hello to out.txt"


def delegating(body: dict[str, Any]) -> Stream:
    """The agent delegates GOAL; the subagent (whose prompt is GOAL) writes out.txt."""
    messages = body["messages"]
    child = any(GOAL in str(m.get("content")) for m in messages if m["role"] == "user")
    answered = messages[-1]["role"] == "tool"
    if child:
        return (
            reply("Subagent done.")
            if answered
            else reply(tools=[("write_file", {"path": "out.txt", "content": "hello\n"})])
        )
    return reply("All done.") if answered else reply(tools=[("delegate_task", {"goal": GOAL})])


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    with hermes_model(tmp_path, monkeypatch) as server:
        server.responder = delegating
        yield server


def subagents_write(call: ToolCallStarted) -> PermissionDecision:
    return PermissionDecision(call.name != "write_file", reason="not the subagent's write")


def test_a_subagents_write_asks_in_the_delegating_turn_and_goes_through_the_editor(fake, tmp_path):
    sink = RecordingSink(Answers(files={str(tmp_path / "out.txt"): ""}))
    record = run_turn(
        HermesAdapter(warm=False), "delegate it", sink=sink, cwd=str(tmp_path), session_id="s1", timeout=90
    )
    assert (record.reason, record.text) == ("end_turn", "All done.")
    (write,) = [e for e in record.of_kind(ToolCallStarted) if e.name == "write_file"]
    assert write.title == "Subagent: Write out.txt"
    asked = [(a.method, a.args[0]) for a in record.asks]
    assert ("request_permission", write.tool_call_id) in asked
    assert ("write_text_file", str(tmp_path / "out.txt")) in asked
    statuses = [(e.tool_call_id, e.status) for e in record.of_kind(ToolCallUpdated) if e.status]
    assert statuses.index((write.tool_call_id, "completed")) < statuses.index(("call_0_delegate_task", "completed"))
    assert not (tmp_path / "out.txt").exists(), "written behind the editor's back"


def test_a_refused_subagent_write_is_not_written_and_the_turn_goes_on(fake, tmp_path):
    sink = RecordingSink(Answers(permission=subagents_write))
    record = run_turn(
        HermesAdapter(warm=False), "delegate it", sink=sink, cwd=str(tmp_path), session_id="s1", timeout=90
    )
    assert (record.reason, record.text) == ("end_turn", "All done.")
    assert not (tmp_path / "out.txt").exists()
    assert not [a for a in record.asks if a.method == "write_text_file"]
    tool_results = [m for body in fake.chats for m in body["messages"] if m["role"] == "tool"]
    assert any("not the subagent's write" in str(m["content"]) for m in tool_results)


def test_a_tool_call_outside_any_turn_is_refused_unless_it_is_hermes_own_bookkeeping(fake, tmp_path):
    run_turn(HermesAdapter(warm=False), "delegate it", cwd=str(tmp_path), session_id="s1", timeout=90)  # Hermes loaded
    ran: list[str] = []

    def next_call(args: Any) -> str:
        ran.append(json.dumps(args))
        return "{}"

    refused = routing._middleware(tool_name="write_file", args={"path": "x"}, next_call=next_call, task_id="stray")
    assert "was not run" in json.loads(refused)["error"] and ran == []
    routing._middleware(tool_name="memory", args={"action": "add"}, next_call=next_call, task_id="review")
    assert ran == ['{"action": "add"}']
