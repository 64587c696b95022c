"""The replay cache: `session/load` keeps each finished run's replay in the journal and sends it
as kept on later loads. What an editor gets must not change by it: a load from the cache sends
exactly what a replay of the events sends, and the cache is passed over whenever what the
replay depends on differs (the session's HAUI switch, a run still running or changed since)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from harness import running
from haui_cases import NOTICE, envelope, fence

from acp_server.acp import history
from acp_server.acp.handlers import AcpAgent
from acp_server.turns.replay import INTERRUPTED_NOTICE, replay_updates
from adapters.echo import EchoAdapter
from adapters.events import (
    CompactionUpdated,
    Envelope,
    NoticeShown,
    PlanEntry,
    PlanUpdated,
    PromptReceived,
    RuntimeEvent,
    TerminalContent,
    TerminalExited,
    TextDelta,
    ThoughtDelta,
    TitleChanged,
    ToolCallStarted,
    ToolCallUpdated,
    TurnFinished,
    UsageReported,
)
from journal import Journal, RunState, SessionRecord
from journal.schema import MIGRATIONS

SID = "sess_cache"
HAUI_REPLY = fence(envelope(NOTICE), "haui")


def prompt(text: str) -> PromptReceived:
    return PromptReceived(({"type": "text", "text": text},))


def deltas(text: str, size: int = 7) -> list[RuntimeEvent]:
    return [TextDelta(text[at : at + size]) for at in range(0, len(text), size)]


# Each run: its events, and how it ends (None: still running, its owner this process).
RUNS: list[tuple[list[RuntimeEvent], RunState | None]] = [
    (
        [
            prompt("run the tests"),
            ThoughtDelta("Running "),
            ThoughtDelta("them."),
            ToolCallStarted("t1", "Run the tests", "execute", raw_input={"command": "make test"}),
            ToolCallUpdated("t1", status="in_progress", content=(TerminalContent("term-1"),)),
            TerminalExited("term-1", "2 tests failed\n", exit_code=3, tool_call_id="t1"),
            ToolCallUpdated("t1", status="failed", content=(TerminalContent("term-1"),)),
            PlanUpdated((PlanEntry("fix the tests", "in_progress"),)),
            *deltas("The tests failed. Here is why:\n\n" + HAUI_REPLY + "\nDone."),
            UsageReported(10, 20, context_used=30, context_size=1000),
            TitleChanged("Tests"),
            NoticeShown("Context compacted"),
            CompactionUpdated("c1", "completed", summary="earlier turns"),
            TurnFinished("end_turn"),
        ],
        RunState.COMPLETED,
    ),
    ([prompt("and now?"), *deltas("Trying"), TurnFinished("error", "the model refused")], RunState.ERROR),
    (
        [prompt("read it"), TextDelta("Reading "), ToolCallStarted("t2", "Read a.py", "read")],
        RunState.INTERRUPTED,
    ),
    ([prompt("once more"), *deltas("Still:\n" + HAUI_REPLY)], None),
]


async def build(db: Path, cwd: Path) -> list[str]:
    """The session of `RUNS`, written through the journal's API as a server writes it."""
    run_ids = []
    async with await Journal.open(db) as journal:
        await journal.create_session(SessionRecord(id=SID, cwd=str(cwd)))
        for number, (events, ending) in enumerate(RUNS):
            run_id = f"run_{number}"
            await journal.start_run(run_id=run_id, session_id=SID)
            for seq, event in enumerate(events):
                await journal.append(Envelope(run_id, SID, seq, event, time.time()))
            if ending is not None:
                await journal.finish_run(run_id, ending)
            run_ids.append(run_id)
    return run_ids


async def load(db: Path, cwd: Path) -> list[dict[str, Any]]:
    """The updates a new connection's `session/load` gets before its answer."""
    async with await Journal.open(db) as journal, running(AcpAgent(EchoAdapter(), journal=journal)) as editor:
        await editor.initialize()
        await editor.request("session/load", {"sessionId": SID, "cwd": str(cwd), "mcpServers": []})
        return [u for u in editor.updates[SID] if u["sessionUpdate"] != "available_commands_update"]


async def from_events(db: Path, *, rich: bool) -> list[dict[str, Any]]:
    """The replay made from the events alone, with no cache in the way."""
    async with await Journal.open(db) as journal:
        runs = {run.id: run for run in await journal.runs(SID)}
        return [
            update
            async for update in replay_updates(
                journal.events(SID), lambda run_id: history.cut_off(runs[run_id]), rich=rich
            )
        ]


@contextmanager
def raw(db: Path) -> Iterator[sqlite3.Connection]:
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        yield conn


def cached(db: Path) -> dict[str, str]:
    with raw(db) as conn:
        return dict(conn.execute("SELECT run_id, body FROM run_cache").fetchall())


def tamper(db: Path, run_id: str, old: str, new: str) -> None:
    """Change a cached replay behind the server's back, so a load shows whether it used it."""
    with raw(db) as conn:
        changed = conn.execute("UPDATE run_cache SET body = replace(body, ?, ?) WHERE run_id = ?", (old, new, run_id))
        assert changed.rowcount == 1


async def test_a_load_from_the_cache_sends_exactly_what_a_replay_of_the_events_sends(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    run_ids = await build(db, tmp_path)
    expected = await from_events(db, rich=True)
    first = await load(db, tmp_path)
    assert set(cached(db)) == set(run_ids[:3])  # the finished runs; not the one still running
    second = await load(db, tmp_path)
    assert first == expected
    assert second == expected
    kinds = {update["sessionUpdate"] for update in expected}
    assert {"user_message_chunk", "agent_thought_chunk", "tool_call", "plan", "usage_update"} <= kinds
    texts = "".join(u["content"]["text"] for u in expected if u["sessionUpdate"] == "agent_message_chunk")
    assert "Repaired." in texts and "```haui" not in texts  # the fences are drawn
    assert "the model refused" in texts and INTERRUPTED_NOTICE in texts
    assert "2 tests failed" in str(expected) and "term-1" not in str(expected)


async def test_a_later_load_sends_a_finished_runs_replay_as_the_cache_holds_it(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    await build(db, tmp_path)
    await load(db, tmp_path)
    tamper(db, "run_1", "Trying", "Tampered")
    texts = str(await load(db, tmp_path))
    assert "Tampered" in texts and "Trying" not in texts


async def test_a_session_with_haui_switched_off_is_not_replayed_from_the_drawn_cache(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    await build(db, tmp_path)
    await load(db, tmp_path)
    tamper(db, "run_0", "The tests failed.", "Tampered.")
    async with await Journal.open(db) as journal:
        await journal.update_session(SID, config={"haui": "off"})
    plain = await from_events(db, rich=False)
    assert plain != await from_events(db, rich=True)
    assert await load(db, tmp_path) == plain
    assert "```haui" in str(plain) and "Tampered." not in str(plain)
    assert await load(db, tmp_path) == plain  # now from the cache it filled as plain


async def test_a_run_still_running_or_changed_since_it_was_cached_is_replayed_from_its_events(
    tmp_path: Path,
) -> None:
    db = tmp_path / "journal.db"
    await build(db, tmp_path)
    await load(db, tmp_path)
    tamper(db, "run_1", "Trying", "Tampered")
    async with await Journal.open(db) as journal:
        # A late event of a finished run (its seq is new), and the running run going on.
        await journal.append(Envelope("run_1", SID, 99, TextDelta(" again"), time.time()), durable=True)
        await journal.append(Envelope("run_3", SID, 99, TextDelta(" and on"), time.time()), durable=True)
    replayed = await load(db, tmp_path)
    assert replayed == await from_events(db, rich=True)
    assert "Tampered" not in str(replayed) and " again" in str(replayed) and " and on" in str(replayed)
    assert "run_3" not in cached(db)


async def test_a_load_from_the_cache_tells_the_runner_the_last_event_it_showed_of_each_run(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    run_ids = await build(db, tmp_path)
    await load(db, tmp_path)
    seen: dict[str, int] = {}
    async with await Journal.open(db) as journal:
        agent = AcpAgent(EchoAdapter(), journal=journal)
        async with running(agent) as editor:
            await editor.initialize()
            await agent.replay(await agent.sessions.get(SID), seen=seen)
    assert seen == {run_id: len(events) - 1 for run_id, (events, _) in zip(run_ids, RUNS, strict=True)}


async def test_a_run_whose_replay_is_over_the_cache_limit_is_not_cached_and_replays_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "journal.db"
    await build(db, tmp_path)
    monkeypatch.setattr(history, "CACHE_MAX_CHARS", 800)  # run_0 replays to more (1,111), the others to less
    assert await load(db, tmp_path) == await from_events(db, rich=True)
    assert set(cached(db)) == {"run_1", "run_2"}


async def test_a_journal_that_refuses_the_cache_still_loads_the_session(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    await build(db, tmp_path)
    with raw(db) as conn:
        conn.execute("CREATE TRIGGER full BEFORE INSERT ON run_cache BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    assert await load(db, tmp_path) == await from_events(db, rich=True)
    assert cached(db) == {}


async def test_a_journal_of_schema_1_gains_the_cache_and_keeps_its_sessions(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    with raw(db) as conn:
        for statement in MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("PRAGMA user_version = 1")
        conn.execute("INSERT INTO sessions (id, cwd, created_at, updated_at) VALUES (?, ?, 1, 1)", (SID, str(tmp_path)))
        conn.execute(
            "INSERT INTO runs (id, session_id, seq_no, status, started_at, last_seq) "
            "VALUES ('r', ?, 0, 'completed', 1, 0)",
            (SID,),
        )
        conn.execute(
            "INSERT INTO events (run_id, seq, session_id, run_no, type, created_at, payload) "
            """VALUES ('r', 0, ?, 0, 'text', 1, '{"text":"from before"}')""",
            (SID,),
        )
    first = await load(db, tmp_path)
    text = {"type": "text", "text": "from before"}
    assert first == [{"sessionUpdate": "agent_message_chunk", "content": text, "messageId": "r:1"}]
    assert await load(db, tmp_path) == first
    assert set(cached(db)) == {"r"}


class Record:
    def __init__(self, run_id: str, event: RuntimeEvent) -> None:
        self.run_id = run_id
        self.event = event


async def test_a_run_that_opens_with_a_tool_call_after_an_interrupted_run_keeps_its_tool_call_until_its_own_end() -> (
    None
):
    async def records() -> AsyncIterator[Record]:
        yield Record("cut", TextDelta("Working"))
        yield Record("next", ToolCallStarted("t9", "Read a.py", "read"))
        yield Record("next", ToolCallUpdated("t9", status="completed"))

    updates = [update async for update in replay_updates(records(), lambda run_id: run_id == "cut")]
    assert [u for u in updates if u.get("toolCallId") == "t9"] == [
        {"sessionUpdate": "tool_call", "toolCallId": "t9", "title": "Read a.py", "kind": "read", "status": "pending"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "t9", "status": "completed"},
    ]


TRICKY = ["", "plain", 'quote " and \\ backslash', "nul \x00 byte", "line\u2028sep\n", "é😀", "\ud800 lone"]


async def test_text_deltas_read_back_for_replay_as_they_read_back_as_records(tmp_path: Path) -> None:
    async with await Journal.open(tmp_path / "journal.db") as journal:
        await journal.create_session(SessionRecord(id=SID, cwd=str(tmp_path)))
        await journal.start_run(run_id="r", session_id=SID)
        for seq, text in enumerate(TRICKY):
            await journal.append(Envelope("r", SID, seq, TextDelta(text)), durable=True)
        records = [(rec.run_id, rec.seq, rec.event) async for rec in journal.events(SID)]
        pages = [entry async for page in journal.replay_pages(SID, 0, 0) for entry in page]
    assert pages == records
    assert [event for _, _, event in pages][:-1] == [TextDelta(text) for text in TRICKY[:-1]]


async def test_deleting_a_session_deletes_its_cached_replays(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    await build(db, tmp_path)
    await load(db, tmp_path)
    assert cached(db)
    async with await Journal.open(db) as journal:
        assert await journal.delete_session(SID)
    assert cached(db) == {}
