"""ACP v1's newest stable fields on what our agents stream, through the real server stack: every
chunk carries a `messageId` (one per message: the run's prompt, then each stretch of thoughts or
words between tool calls), a tool call its machine `name`, and `usage_update` its window and
cost; a restart and `session/load` replays the very same ids and objects from the journal."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from acp_child import Runtimes
from harness import FakeEditor, running

from acp_server.acp.handlers import AcpAgent
from adapters.base import Sink, TurnInput
from adapters.callable import SimpleAdapter
from adapters.events import StopReason
from adapters.scripted import ScriptedAdapter
from journal.store import Journal


class Reading(SimpleAdapter):
    """Thinks, says it reads, reads a file (a named tool), says it is done, reports its usage."""

    name = "reading"

    def run_turn(self, turn: TurnInput, sink: Sink) -> StopReason:
        sink.thought("Let me look.")
        sink.text("Reading ")
        sink.text("the file.")
        call = sink.tool_call("Read a.py", kind="read", name="read_file", raw_input={"path": "a.py"})
        sink.tool_update(call, status="completed")
        sink.text("Done.")
        sink.usage(input_tokens=900, output_tokens=100, context_size=128_000, cost_usd=0.25)
        return "end_turn"


SESSION_UPDATES = ("available_commands_update", "current_mode_update", "config_option_update", "session_info_update")


def merged(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turn's updates (not the session's) with consecutive chunks of one message joined
    (live streaming may cut a message into any number of chunks; replay joins them)."""
    out: list[dict[str, Any]] = []
    for update in updates:
        if update["sessionUpdate"] in SESSION_UPDATES:
            continue
        last = out[-1] if out else None
        same = last is not None and (last["sessionUpdate"], last.get("messageId")) == (
            update["sessionUpdate"],
            update.get("messageId"),
        )
        if last is not None and same and update["sessionUpdate"].endswith("_chunk"):
            text = last["content"]["text"] + update["content"]["text"]
            out[-1] = last | {"content": {"type": "text", "text": text}}
            continue
        out.append(dict(update))
    return out


def expected(run_id: str, tool_call_id: str) -> list[dict[str, Any]]:
    def chunk(kind: str, text: str, ordinal: int) -> dict[str, Any]:
        content = {"type": "text", "text": text}
        return {"sessionUpdate": kind, "content": content, "messageId": f"{run_id}:{ordinal}"}

    return [
        chunk("agent_thought_chunk", "Let me look.", 1),
        chunk("agent_message_chunk", "Reading the file.", 2),
        {
            "sessionUpdate": "tool_call",
            "toolCallId": tool_call_id,
            "title": "Read a.py",
            "kind": "read",
            "status": "pending",
            "name": "read_file",
            "rawInput": {"path": "a.py"},
        },
        {"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id, "status": "completed"},
        chunk("agent_message_chunk", "Done.", 3),
        {"sessionUpdate": "usage_update", "used": 1000, "size": 128_000, "cost": {"amount": 0.25, "currency": "USD"}},
    ]


async def reloaded(db: Path, sid: str, cwd: Path) -> FakeEditor:
    async with await Journal.open(db) as journal, running(AcpAgent(Reading(), journal=journal)) as editor:
        await editor.initialize()
        await editor.request("session/load", {"sessionId": sid, "cwd": str(cwd), "mcpServers": []})
        return editor


async def test_every_chunk_names_its_message_and_a_reload_names_it_the_same(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    async with await Journal.open(db) as journal, running(AcpAgent(Reading(), journal=journal)) as live:
        await live.initialize()
        sid = await live.new_session(tmp_path)
        await live.prompt(sid, "read a.py")
        [run] = await journal.runs(sid)
    shown = live.updates[sid]
    tool_call_id = next(u["toolCallId"] for u in shown if u["sessionUpdate"] == "tool_call")
    assert merged(shown) == expected(run.id, tool_call_id)

    replayed = (await reloaded(db, sid, tmp_path)).updates[sid]
    prompt = {
        "sessionUpdate": "user_message_chunk",
        "content": {"type": "text", "text": "read a.py"},
        "messageId": f"{run.id}:0",
    }
    turn = [u for u in replayed if u["sessionUpdate"] not in SESSION_UPDATES]
    assert turn == [prompt, *expected(run.id, tool_call_id)]  # replay joins each message's chunks itself


async def test_messages_of_two_turns_never_share_an_id(tmp_path: Path) -> None:
    async with (
        await Journal.open(tmp_path / "journal.db") as journal,
        running(AcpAgent(Reading(), journal=journal)) as live,
    ):
        await live.initialize()
        sid = await live.new_session(tmp_path)
        await live.prompt(sid, "read a.py")
        await live.prompt(sid, "again")
    ids = [u["messageId"] for u in live.updates[sid] if "messageId" in u]
    assert len(set(ids)) == 6  # three messages a turn, none alike


FAKE_AGENT = str(Path(__file__).with_name("fake_acp_agent.py"))


async def test_an_agent_belows_message_ids_tool_names_and_usage_reach_the_editor_and_a_reload(tmp_path: Path) -> None:
    argv = (sys.executable, FAKE_AGENT, "--store", str(tmp_path / "store.json"), "--v1")
    runtimes = Runtimes()
    try:
        db = tmp_path / "journal.db"
        async with await Journal.open(db) as journal, running(AcpAgent(runtimes.make(argv), journal=journal)) as live:
            await live.initialize()
            sid = await live.new_session(tmp_path)
            await live.prompt(sid, "hello")
            [run] = await journal.runs(sid)
        tool_call_id = next(u["toolCallId"] for u in live.updates[sid] if u["sessionUpdate"] == "tool_call")
        theirs = [
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "You said hello; I remember nothing."},
                "messageId": "their-0",  # the agent's own ids, kept
            },
            {
                "sessionUpdate": "agent_thought_chunk",
                "content": {"type": "text", "text": "Thinking."},
                "messageId": "their-thought",
            },
            {
                "sessionUpdate": "tool_call",
                "toolCallId": tool_call_id,
                "title": "List files",
                "kind": "search",
                "status": "pending",
                "name": "list_dir",
            },
            {"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id, "status": "completed"},
            {
                "sessionUpdate": "usage_update",
                "used": 5000,
                "size": 200_000,
                "cost": {"amount": 0.5, "currency": "USD"},
            },
        ]
        assert merged(live.updates[sid]) == theirs
        async with await Journal.open(db) as journal, running(AcpAgent(runtimes.make(argv), journal=journal)) as again:
            await again.initialize()
            await again.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        prompt = {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hello"}}
        assert merged(again.updates[sid]) == [prompt | {"messageId": f"{run.id}:0"}, *theirs]
    finally:
        runtimes.close()


async def test_a_scripted_tool_shows_its_machine_name(tmp_path: Path) -> None:
    steps = [{"tool": "Look around", "name": "look", "kind": "search"}, {"say": "seen"}]
    adapter = ScriptedAdapter.from_data({"scenarios": [{"match": "look", "steps": steps}]})
    async with running(AcpAgent(adapter)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "look")
    [call] = [u for u in editor.updates[sid] if u["sessionUpdate"] == "tool_call"]
    assert (call["title"], call["name"], call["kind"]) == ("Look around", "look", "search")


async def test_an_agent_belows_notices_and_compactions_reach_only_an_editor_that_shows_them(tmp_path: Path) -> None:
    argv = (sys.executable, FAKE_AGENT, "--store", str(tmp_path / "store.json"), "--v1")
    runtimes = Runtimes()
    try:
        async with running(AcpAgent(runtimes.make(argv))) as editor:
            await editor.initialize({"session": {"notices": {}, "compaction": {}}})
            sid = await editor.new_session(tmp_path)
            await editor.prompt(sid, "hello")
        summary = {"type": "text", "text": "Earlier: a greeting."}
        kinds = ("notice", "compaction_update", "compaction_summary_chunk")
        assert [u for u in editor.updates[sid] if u["sessionUpdate"] in kinds] == [
            {"sessionUpdate": "notice", "severity": "warning", "title": "Rate limit near"},
            {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "in_progress"},
            {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c1", "content": summary},
            {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "completed", "summary": [summary]},
        ]
    finally:
        runtimes.close()
