"""The OpenAI agent against a fake model endpoint on 127.0.0.1, with ACP v1's newest stable
fields: its reasoning and words carry message ids, its tool call the function's name, its usage
(the endpoint's own figures) a `usage_update`; a restart and `session/load` replays them all
from the journal, the same ids included."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, reply
from harness import running
from test_message_ids import SESSION_UPDATES, merged

from acp_server.acp.handlers import AcpAgent
from adapters.openai import OpenAIAdapter
from journal.store import Journal


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=["gpt-4o"]) as server:
        yield server


def openai_agent(fake: FakeOpenAI, root: Path, journal: Journal) -> AcpAgent:
    env = {"XDG_CONFIG_HOME": str(root / "config")}
    return AcpAgent(OpenAIAdapter(env=env, model="gpt-4o", base_url=fake.base_url, api_key="sk-test"), journal=journal)


def expected(run_id: str, call: str, read: str, file: Path) -> list[dict[str, Any]]:
    def chunk(kind: str, text: str, ordinal: int) -> dict[str, Any]:
        return {"sessionUpdate": kind, "content": {"type": "text", "text": text}, "messageId": f"{run_id}:{ordinal}"}

    tool_call = {"sessionUpdate": "tool_call", "toolCallId": call, "title": read, "kind": "read", "status": "pending"}
    return [
        chunk("agent_thought_chunk", "Let me see.", 1),
        chunk("agent_message_chunk", "Looking.", 2),
        {"sessionUpdate": "usage_update", "used": 120, "size": 128_000},  # the first request's
        tool_call | {"name": "read_file", "rawInput": {"path": "a.txt"}, "locations": [{"path": str(file)}]},
        chunk("agent_message_chunk", "It says hi.", 3),
        {"sessionUpdate": "usage_update", "used": 180, "size": 128_000, "cost": {"amount": 0.25, "currency": "USD"}},
    ]


def shown(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turn's updates, joined by message, without the tool call's progress (its output is the
    tool's business, and checked elsewhere)."""
    return [u for u in merged(updates) if u["sessionUpdate"] != "tool_call_update"]


async def test_the_openai_agents_ids_tool_names_and_usage_are_shown_live_and_after_a_restart(fake, tmp_path) -> None:
    (tmp_path / "a.txt").write_text("hi\n")
    fake.script(
        reply(
            "Looking.",
            reasoning="Let me see.",
            tools=[("read_file", {"path": "a.txt"})],
            usage={"prompt_tokens": 100, "completion_tokens": 20},
        ),
        reply("It says hi.", usage={"prompt_tokens": 150, "completion_tokens": 30, "cost": 0.25}),
    )
    db = tmp_path / "journal.db"
    async with await Journal.open(db) as journal, running(openai_agent(fake, tmp_path, journal)) as live:
        await live.initialize()
        sid = await live.new_session(tmp_path)
        await live.prompt(sid, "what does a.txt say?")
        [run] = await journal.runs(sid)
    call = next(u for u in live.updates[sid] if u["sessionUpdate"] == "tool_call")
    assert shown(live.updates[sid]) == expected(run.id, call["toolCallId"], call["title"], tmp_path / "a.txt")

    async with await Journal.open(db) as journal, running(openai_agent(fake, tmp_path, journal)) as again:
        await again.initialize()
        await again.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
    prompt = {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "what does a.txt say?"}}
    replayed = [u for u in again.updates[sid] if u["sessionUpdate"] not in SESSION_UPDATES]
    assert shown(replayed) == [
        prompt | {"messageId": f"{run.id}:0"},
        *expected(run.id, call["toolCallId"], call["title"], tmp_path / "a.txt"),
    ]
