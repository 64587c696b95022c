"""Terminals on replay: a command that ran in the editor's terminal is journaled with its output
and exit status, so `session/load` on a later connection shows that output as text, never the
earlier connection's `terminalId` (which the editor has long released)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from harness import FakeEditor, running

from acp_server.acp.handlers import AcpAgent
from acp_server.turns.replay import replay_updates
from adapters.base import AdapterCapabilities, RuntimeAdapter, Sink, TurnInput
from adapters.events import (
    PromptReceived,
    RuntimeEvent,
    TerminalContent,
    TerminalExited,
    ToolCallStarted,
    ToolCallUpdated,
    TurnFinished,
)
from adapters.scripted import ScriptedAdapter
from journal import Journal

COMMAND = "echo checked-out-main; echo 2 tests failed; exit 3"


class TerminalOnly:
    """Shows a command's run only as the embedded terminal, as the openai agent does."""

    name = "terminal-only"

    def capabilities(self) -> AdapterCapabilities:
        return AdapterCapabilities()

    def run_turn(self, turn: TurnInput, sink: Sink) -> str:
        tool = sink.tool_call("Run the tests", kind="execute", raw_input={"command": COMMAND})
        sink.tool_update(tool, status="in_progress")
        result = sink.run_command(COMMAND, tool_call_id=tool)
        assert result.terminal_id is not None
        sink.tool_update(tool, status="failed", content=[TerminalContent(result.terminal_id)])
        sink.text("The tests failed.")
        return "end_turn"

    def cancel(self, session_id: str) -> None:
        return None


SCRIPTED = ScriptedAdapter.from_data({"scenarios": [{"match": "", "steps": [{"tool": "Tests", "run": COMMAND}]}]})


def contents(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for u in updates if u["sessionUpdate"].startswith("tool_call") for item in u.get("content", [])]


async def run_then_reload(adapter: RuntimeAdapter, tmp_path: Path) -> tuple[FakeEditor, FakeEditor, str]:
    db = tmp_path / "journal.db"
    async with await Journal.open(db) as journal, running(AcpAgent(adapter, journal=journal)) as live:
        live.enable_terminal()
        await live.initialize({"terminal": True})
        sid = await live.new_session(tmp_path)
        assert (await live.prompt(sid, "run the tests"))["stopReason"] == "end_turn"
    # A new server process: the same journal file, a new connection, no terminal of its own.
    async with await Journal.open(db) as journal, running(AcpAgent(adapter, journal=journal)) as later:
        await later.initialize({"terminal": True})
        await later.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
    return live, later, sid


async def test_a_reload_shows_a_terminals_output_as_text_instead_of_the_stale_terminal(tmp_path: Path) -> None:
    live, later, sid = await run_then_reload(TerminalOnly(), tmp_path)
    (terminal_id,) = live.terminals
    assert {"type": "terminal", "terminalId": terminal_id} in contents(live.updates[sid])  # live keeps it
    replayed = contents(later.updates[sid])
    assert [item for item in replayed if item["type"] == "terminal"] == []
    text = "```\nchecked-out-main\n2 tests failed\n```\nexit code 3"
    assert replayed[-1] == {"type": "content", "content": {"type": "text", "text": text}}
    final = [u for u in later.updates[sid] if u.get("status") == "failed"]
    assert final and final[-1]["content"] == [replayed[-1]]


async def test_an_agent_that_shows_the_output_itself_does_not_get_it_twice_on_reload(tmp_path: Path) -> None:
    live, later, sid = await run_then_reload(SCRIPTED, tmp_path)
    (terminal_id,) = live.terminals
    assert {"type": "terminal", "terminalId": terminal_id} in contents(live.updates[sid])
    final = [u for u in later.updates[sid] if u.get("status") == "failed"][-1]
    output = {"type": "content", "content": {"type": "text", "text": "checked-out-main\n2 tests failed\n"}}
    assert final["content"] == [output]
    assert [item for item in contents(later.updates[sid]) if item["type"] == "terminal"] == []


async def test_the_journal_keeps_a_terminals_output_and_exit_status(tmp_path: Path) -> None:
    await run_then_reload(TerminalOnly(), tmp_path)
    async with await Journal.open(tmp_path / "journal.db") as journal:
        (session,), _ = await journal.list_sessions()
        exited = [rec.event async for rec in journal.events(session.id) if isinstance(rec.event, TerminalExited)]
    assert [(e.output, e.exit_code, e.signal, e.truncated) for e in exited] == [
        ("checked-out-main\n2 tests failed\n", 3, None, False)
    ]


class Record:
    def __init__(self, event: RuntimeEvent) -> None:
        self.run_id = "r1"
        self.event = event


async def replayed(*events: RuntimeEvent) -> list[dict[str, Any]]:
    async def records() -> AsyncIterator[Record]:
        for event in events:
            yield Record(event)

    return [update async for update in replay_updates(records(), lambda run_id: True)]


async def test_a_terminal_whose_command_never_finished_is_left_out_of_the_replay() -> None:
    updates = await replayed(
        PromptReceived(({"type": "text", "text": "go"},)),
        ToolCallStarted("t1", "Build", "execute"),
        ToolCallUpdated("t1", status="in_progress"),
        ToolCallUpdated("t1", content=(TerminalContent("term-gone"),)),
    )
    assert [item for item in contents(updates) if item["type"] == "terminal"] == []
    tool_updates = [u for u in updates if u["sessionUpdate"] == "tool_call_update"]
    assert tool_updates[1] == {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "content": []}
    assert tool_updates[-1]["status"] == "failed"  # closed, as the run was cut off


async def test_a_signal_and_truncated_output_are_said_in_the_replayed_text() -> None:
    updates = await replayed(
        ToolCallStarted("t1", "Serve", "execute", content=(TerminalContent("term-1"),)),
        TerminalExited("term-1", "listening\n", None, "SIGKILL", True, "t1"),
        TurnFinished("end_turn"),
    )
    shown = [u for u in updates if u["sessionUpdate"] == "tool_call_update" and "content" in u]
    text = "```\nlistening\n```\nsignal SIGKILL (output truncated)"
    assert shown[0]["content"] == [{"type": "content", "content": {"type": "text", "text": text}}]
    assert json.dumps(updates).count("terminalId") == 0


async def test_a_command_without_output_replays_as_its_exit_status() -> None:
    updates = await replayed(
        ToolCallStarted("t1", "Touch", "execute"),
        ToolCallUpdated("t1", content=(TerminalContent("term-1"),)),
        TerminalExited("term-1", "", 0, tool_call_id="t1"),
        ToolCallUpdated("t1", status="completed", content=(TerminalContent("term-1"),)),
        TurnFinished("end_turn"),
    )
    text = {"type": "content", "content": {"type": "text", "text": "exit code 0, no output"}}
    assert [u.get("content") for u in updates if u["sessionUpdate"] == "tool_call_update"] == [[], [text], [text]]
