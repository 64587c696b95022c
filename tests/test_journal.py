"""The journal against real SQLite files: sessions, runs, append-only events, replay, recovery."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from adapters.base import Message
from adapters.events import (
    CompactionChunk,
    CompactionUpdated,
    DiffContent,
    Envelope,
    Location,
    NoticeShown,
    PermissionDecided,
    PlanEntry,
    PlanUpdated,
    PromptReceived,
    RuntimeEvent,
    StateSaved,
    TerminalContent,
    TerminalExited,
    TextContent,
    TextDelta,
    ThoughtDelta,
    TitleChanged,
    ToolCallStarted,
    ToolCallUpdated,
    TranscriptSaved,
    TurnFinished,
    UsageReported,
)
from journal import (
    TERMINAL_STATES,
    Journal,
    JournalClosedError,
    JournalVersionError,
    RunState,
    SessionRecord,
    decode_event,
    default_path,
    is_durable,
    normalize_state,
    owners,
)
from journal.checkpoint import ROWS
from journal.codec import EVENT_TYPES
from journal.schema import SCHEMA_VERSION

REPO = Path(__file__).resolve().parent.parent

EVERY_EVENT: list[RuntimeEvent] = [
    PromptReceived(blocks=({"type": "text", "text": "fix the bug"}, {"type": "resource_link", "uri": "file:///a"})),
    PromptReceived(blocks=({"type": "text", "text": "go on"},), origin="goal"),
    TextDelta("Looking"),
    ThoughtDelta("the bug is in parse()"),
    ToolCallStarted(
        tool_call_id="t1",
        title="Read parse.py",
        tool_kind="read",
        name="read_file",
        raw_input={"path": "parse.py", "lines": [1, 2], "opts": {"strict": True}},
        locations=("parse.py", Location("/w/parse.py", 12)),
        content=(TextContent("reading"), DiffContent("a.py", "new", "old"), TerminalContent("term-1")),
    ),
    ToolCallStarted(tool_call_id="t2", title="Think"),
    ToolCallUpdated(
        tool_call_id="t1",
        status="completed",
        title="Read parse.py (40 lines)",
        content=(DiffContent("b.py", "only new"),),
        raw_output={"lines": 40},
        locations=("parse.py", "util.py"),
    ),
    ToolCallUpdated(tool_call_id="t2"),
    ToolCallUpdated(tool_call_id="t2", content=(), locations=()),
    PlanUpdated(entries=(PlanEntry("read"), PlanEntry("fix", status="in_progress", priority="high"))),
    PlanUpdated(entries=()),
    UsageReported(input_tokens=120, output_tokens=30, cost_usd=0.25, context_used=150, context_size=200_000),
    UsageReported(),
    TitleChanged("Fix the parser"),
    StateSaved("agent.goal", {"goal": "fix it", "turns": 2, "subgoals": ["a"]}),
    StateSaved("agent.goal", None),
    TerminalExited("term-1", "3 passed\n", exit_code=0, tool_call_id="t1"),
    TerminalExited("term-2", "", signal="SIGKILL", truncated=True),
    TurnFinished(reason="error", message="boom"),
    TurnFinished(reason="end_turn"),
]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "journal.db"


async def new_session(journal: Journal, session_id: str = "s1", *, cwd: str = "/work", **times: float) -> None:
    await journal.create_session(SessionRecord(id=session_id, cwd=cwd, **times))


async def run_with_events(journal: Journal, session_id: str, run_id: str, count: int) -> None:
    await journal.start_run(run_id=run_id, session_id=session_id)
    for seq in range(count):
        await journal.append(Envelope(run_id, session_id, seq, TextDelta(f"{run_id}/{seq} ")))


async def collect(journal: Journal, *args: object, **kwargs: object) -> list[str]:
    return [rec.event_id async for rec in journal.events(*args, **kwargs)]  # type: ignore[arg-type]


def raw(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(db, isolation_level=None)


# --- states and codec ------------------------------------------------------------------------


def test_runtime_stop_reasons_and_aliases_normalize_to_run_states() -> None:
    expected = {
        "end_turn": RunState.COMPLETED,
        "refusal": RunState.REFUSED,
        "cancelled": RunState.CANCELLED,
        "canceled": RunState.CANCELLED,
        "done": RunState.COMPLETED,
        "finished": RunState.COMPLETED,
        "success": RunState.COMPLETED,
        "ok": RunState.COMPLETED,
        "failed": RunState.ERROR,
        "failure": RunState.ERROR,
        "exception": RunState.ERROR,
        "max_tokens": RunState.MAX_TOKENS,
        "max_turn_requests": RunState.MAX_TURN_REQUESTS,
        "interrupted": RunState.INTERRUPTED,
        "Completed": RunState.COMPLETED,
    }
    assert {name: normalize_state(name) for name in expected} == expected
    assert set(RunState) - {RunState.RUNNING} == TERMINAL_STATES
    with pytest.raises(ValueError):
        normalize_state("exploded")


def test_decoding_an_unknown_event_type_raises_value_error() -> None:
    with pytest.raises(ValueError):
        decode_event("telepathy", {})


# --- events: append and replay ---------------------------------------------------------------


async def test_every_event_kind_round_trips_through_append_and_replay(db: Path) -> None:
    async with await Journal.open(db) as journal:
        await new_session(journal)
        await journal.start_run(run_id="r1", session_id="s1")
        for seq, event in enumerate(EVERY_EVENT):
            await journal.append(Envelope("r1", "s1", seq, event, created_at=1000.0 + seq))
        records = [rec async for rec in journal.events("s1")]

    assert [rec.event for rec in records] == EVERY_EVENT
    assert [rec.type for rec in records] == [event.kind for event in EVERY_EVENT]
    assert [rec.event_id for rec in records] == [f"r1:{seq}" for seq in range(len(EVERY_EVENT))]
    assert [rec.created_at for rec in records] == [1000.0 + seq for seq in range(len(EVERY_EVENT))]
    assert [rec.terminal for rec in records] == [event.kind == "done" for event in EVERY_EVENT]
    assert {rec.session_id for rec in records} == {"s1"}


async def test_replay_follows_the_sessions_run_order_then_seq(db: Path) -> None:
    async with await Journal.open(db) as journal:
        await new_session(journal)
        # Run ids sort against their order on purpose: order comes from the session, not the id.
        await run_with_events(journal, "s1", "zz-first", 3)
        await run_with_events(journal, "s1", "mm-second", 2)
        await run_with_events(journal, "s1", "aa-third", 2)
        runs = await journal.runs("s1")
        replayed = await collect(journal, "s1")

    assert [(run.id, run.seq_no, run.last_seq) for run in runs] == [
        ("zz-first", 0, 2),
        ("mm-second", 1, 1),
        ("aa-third", 2, 1),
    ]
    assert replayed == [
        "zz-first:0", "zz-first:1", "zz-first:2", "mm-second:0", "mm-second:1", "aa-third:0", "aa-third:1",
    ]  # fmt: skip


async def test_replay_resumes_strictly_after_an_event_id_across_runs(db: Path) -> None:
    async with await Journal.open(db) as journal:
        await new_session(journal)
        await run_with_events(journal, "s1", "r1", 3)
        await run_with_events(journal, "s1", "r2", 2)
        from_middle = await collect(journal, "s1", after="r1:1")
        from_end_of_run = await collect(journal, "s1", after="r1:2")
        without_session = await collect(journal, after="r1:1")
        one_run_after_earlier_run = await collect(journal, run_id="r2", after="r1:0")
        one_run_after_later_run = await collect(journal, run_id="r1", after="r2:0")

    assert from_middle == ["r1:2", "r2:0", "r2:1"]
    assert from_end_of_run == ["r2:0", "r2:1"]
    assert without_session == from_middle
    assert one_run_after_earlier_run == ["r2:0", "r2:1"]
    assert one_run_after_later_run == []


async def test_replay_of_one_run_resumes_after_a_seq(db: Path) -> None:
    async with await Journal.open(db) as journal:
        await new_session(journal)
        await run_with_events(journal, "s1", "r1", 4)
        await run_with_events(journal, "s1", "r2", 4)
        whole_run = await collect(journal, run_id="r2")
        after_seq = await collect(journal, run_id="r2", after=1)
        with_session = await collect(journal, "s1", run_id="r2", after=2)

    assert whole_run == ["r2:0", "r2:1", "r2:2", "r2:3"]
    assert after_seq == ["r2:2", "r2:3"]
    assert with_session == ["r2:3"]


async def test_consumers_can_dedupe_overlapping_replays_by_event_id(db: Path) -> None:
    async with await Journal.open(db) as journal:
        await new_session(journal)
        await run_with_events(journal, "s1", "r1", 5)
        first = [rec async for rec in journal.events("s1")]
        overlap = [rec async for rec in journal.events("s1", after="r1:2")]

    seen: dict[str, RuntimeEvent] = {}
    for rec in [*first, *overlap]:
        seen.setdefault(rec.event_id, rec.event)
    assert list(seen) == [f"r1:{seq}" for seq in range(5)]
    assert all(seen[rec.event_id] == rec.event for rec in overlap)


async def test_replay_streams_long_histories_across_pages_in_order(db: Path) -> None:
    async with await Journal.open(db) as journal:
        await new_session(journal)
        await run_with_events(journal, "s1", "r1", 700)
        await run_with_events(journal, "s1", "r2", 600)
        replayed = await collect(journal, "s1")
        one_run = await collect(journal, run_id="r1", after=99)

    assert replayed == [f"r1:{n}" for n in range(700)] + [f"r2:{n}" for n in range(600)]
    assert one_run == [f"r1:{n}" for n in range(100, 700)]


async def test_replay_of_an_unknown_session_or_run_is_empty(db: Path) -> None:
    async with await Journal.open(db) as journal:
        assert await collect(journal, "nobody") == []
        assert await collect(journal, run_id="nothing") == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"session_id": "s1", "after": 3},
        {"session_id": "s1", "after": "no-seq-here"},
        {"session_id": "s1", "after": "r1:x"},
        {"session_id": "s1", "after": "gone:1"},
        {"session_id": "other", "after": "r1:0"},
        {"run_id": "r1", "after": 1.5},
        {},
    ],
)
async def test_bad_replay_arguments_raise_value_error(db: Path, kwargs: dict[str, object]) -> None:
    async with await Journal.open(db) as journal:
        await new_session(journal)
        await new_session(journal, "other")
        await run_with_events(journal, "s1", "r1", 1)
        with pytest.raises(ValueError):
            await collect(journal, **kwargs)


# --- durability --------------------------------------------------------------------------------


async def test_batched_appends_are_committed_by_flush(db: Path) -> None:
    async with await Journal.open(db) as journal:
        await new_session(journal)
        await run_with_events(journal, "s1", "r1", 300)
        await journal.flush()
        with raw(db) as conn:
            stored = conn.execute("SELECT count(*), max(seq) FROM events WHERE run_id = 'r1'").fetchone()
            last_seq = conn.execute("SELECT last_seq FROM runs WHERE id = 'r1'").fetchone()

    assert stored == (300, 299)
    assert last_seq == (299,)


async def test_a_durable_append_is_readable_from_another_connection_when_it_returns(db: Path) -> None:
    async with await Journal.open(db) as journal:
        await new_session(journal)
        await journal.start_run(run_id="r1", session_id="s1")
        await journal.append(Envelope("r1", "s1", 0, TextDelta("kept")), durable=True)
        with raw(db) as conn:
            rows = conn.execute("SELECT seq, type, payload FROM events").fetchall()

    assert rows == [(0, "text", '{"text":"kept"}')]


async def test_commits_never_stop_to_checkpoint_yet_the_pages_reach_the_database_file(db: Path, tmp_path: Path) -> None:
    # A checkpoint copies and syncs pages (milliseconds): inside a commit, every streamed update
    # waiting for that commit would wait as long. The journal checkpoints beside its commits.
    async with await Journal.open(db) as journal:
        setting = await journal._write.conn.execute_fetchall("PRAGMA wal_autocheckpoint")
        await new_session(journal)
        await journal.start_run(run_id="r1", session_id="s1")
        for seq in range(200):  # three rows a commit: past the checkpointer's ROWS
            await journal.append(Envelope("r1", "s1", seq, TextDelta("x")), durable=True)
        await collect(journal, "s1")  # the read connection answers after the checkpoint queued on it
        # No checkpoint may copy pages while the file is copied (one the last appends made due
        # would tear the copy): the checkpointer stops, letting a running one finish (grey box).
        await journal._checkpoints.close()
        shutil.copy(db, tmp_path / "main-file-only.db")  # the database file without its WAL
    with raw(tmp_path / "main-file-only.db") as conn:
        (checkpointed,) = conn.execute("SELECT count(*) FROM events").fetchone()

    assert [tuple(row) for row in setting] == [(0,)]
    assert checkpointed >= ROWS // 3


async def test_prompts_tool_starts_and_run_ends_are_durable_without_asking(db: Path) -> None:
    events = [
        PromptReceived(blocks=()),
        ToolCallStarted(tool_call_id="t", title="T"),
        TurnFinished("end_turn"),
    ]
    async with await Journal.open(db) as journal:
        await new_session(journal)
        await journal.start_run(run_id="r1", session_id="s1")
        seen = []
        for seq, event in enumerate(events):
            await journal.append(Envelope("r1", "s1", seq, event))
            with raw(db) as conn:
                seen.append(conn.execute("SELECT count(*) FROM events").fetchone()[0])

    assert seen == [1, 2, 3]


# Every event kind, and both sides of the tool update's dispatched rule: durable means committed
# when append returns (what the bridge's barrier before a tool runs relies on).
DURABILITY = [
    (PromptReceived(blocks=()), True),
    (ToolCallStarted(tool_call_id="t", title="T"), True),
    (ToolCallUpdated(tool_call_id="t", status="in_progress"), True),
    (PermissionDecided(tool_call_id="t", outcome="allowed", by="user"), True),
    (TurnFinished("end_turn"), True),
    (ToolCallUpdated(tool_call_id="t", status="pending"), False),
    (ToolCallUpdated(tool_call_id="t", status="completed"), False),
    (TextDelta("a"), False),
    (ThoughtDelta("b"), False),
    (PlanUpdated(entries=()), False),
    (UsageReported(input_tokens=1), False),
    (TitleChanged("t"), False),
    (TranscriptSaved("f", ({"role": "user"},)), False),
    (StateSaved("k", {"v": 1}), False),
    (TerminalExited("term-1", "ok\n", 0, tool_call_id="t"), False),
    (CompactionUpdated("c", "in_progress"), False),
    (CompactionChunk("c", "summary"), False),
    (NoticeShown("n"), False),
]


def test_the_durability_table_decides_for_every_event_kind() -> None:
    assert {event.kind for event, _ in DURABILITY} == set(EVENT_TYPES)
    assert [is_durable(event) for event, _ in DURABILITY] == [durable for _, durable in DURABILITY]


@pytest.mark.parametrize(("event", "durable"), DURABILITY, ids=lambda v: getattr(v, "kind", str(v)))
async def test_an_append_returns_committed_exactly_when_its_event_is_durable(
    db: Path, event: RuntimeEvent, durable: bool
) -> None:
    async with await Journal.open(db) as journal:
        await new_session(journal)
        await journal.start_run(run_id="r1", session_id="s1")
        await journal.append(Envelope("r1", "s1", 0, event))
        with raw(db) as conn:
            stored = conn.execute("SELECT count(*) FROM events").fetchone()[0]

    assert stored == (1 if durable else 0)


async def test_every_commit_moves_the_runs_last_event_and_the_sessions_time(db: Path) -> None:
    """One event alone is committed on the loop, a batch by the group commit: either way the run
    and the session say so in the same transaction."""
    async with await Journal.open(db) as journal:
        await new_session(journal)
        await journal.start_run(run_id="r1", session_id="s1")
        later = time.time() + 3600  # each event later than the session's last change
        with raw(db) as conn:
            for seq, durable in enumerate([True, False, False, True, True]):
                created = later + seq
                await journal.append(Envelope("r1", "s1", seq, TextDelta(f"{seq}"), created), durable=durable)
                if durable:
                    run = conn.execute("SELECT last_seq FROM runs WHERE id = 'r1'").fetchone()
                    session = conn.execute("SELECT updated_at FROM sessions WHERE id = 's1'").fetchone()
                    assert (run, session) == ((seq,), (created,))
        kept = [rec.seq async for rec in journal.events("s1")]

    assert kept == [0, 1, 2, 3, 4]


async def test_a_durable_append_waits_for_another_process_writing_then_commits(db: Path) -> None:
    holder = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
"""
    async with await Journal.open(db) as journal:
        await new_session(journal)
        await journal.start_run(run_id="r1", session_id="s1")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", holder, str(db), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        assert proc.stdin is not None and proc.stdout is not None
        assert await proc.stdout.readline() == b"held\n"
        append = asyncio.create_task(journal.append(Envelope("r1", "s1", 0, TextDelta("waited")), durable=True))
        done, _ = await asyncio.wait([append], timeout=0.5)
        assert not done  # neither stored nor failed while the other process writes
        proc.stdin.write(b"go\n")
        await proc.stdin.drain()
        assert await proc.wait() == 0
        async with asyncio.timeout(30):
            await append
        run = await journal.get_run("r1")
        kept = [rec.event async for rec in journal.events("s1")]

    assert run is not None and run.last_seq == 0
    assert kept == [TextDelta("waited")]


async def test_an_append_the_database_refuses_fails_alone(db: Path) -> None:
    async with await Journal.open(db) as journal:
        await new_session(journal)
        await journal.start_run(run_id="r1", session_id="s1")
        await journal.append(Envelope("r1", "s1", 0, TextDelta("a")))
        await journal.append(Envelope("ghost", "s1", 0, TextDelta("lost")))
        with pytest.raises(LookupError):
            await journal.append(Envelope("ghost", "s1", 1, TextDelta("lost")), durable=True)
        await journal.append(Envelope("r1", "s1", 1, TextDelta("b")))
        with pytest.raises(ValueError):
            await journal.append(Envelope("r1", "s1", 1, TextDelta("again")), durable=True)
        with pytest.raises(LookupError):
            await journal.append(Envelope("r1", "wrong-session", 2, TextDelta("c")), durable=True)
        kept = [rec.event async for rec in journal.events("s1")]

    assert kept == [TextDelta("a"), TextDelta("b")]


async def test_two_processes_append_to_one_file_at_once_without_lock_errors(db: Path) -> None:
    script = """
import asyncio, sys
from adapters.events import Envelope, TextDelta
from journal import Journal, SessionRecord

async def main(path, name):
    async with await Journal.open(path) as journal:
        await journal.create_session(SessionRecord(id=name, cwd="/work"))
        await journal.start_run(run_id=name + "-run", session_id=name)
        print("ready", flush=True)
        sys.stdin.readline()
        for seq in range(2000):
            envelope = Envelope(name + "-run", name, seq, TextDelta(f"{name} {seq}"))
            await journal.append(envelope, durable=seq % 20 == 0)
            if seq % 100 == 0:
                await asyncio.sleep(0)  # a yield, so the two writers interleave
        await journal.finish_run(name + "-run", "end_turn")
    print("done", flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""
    async with await Journal.open(db):
        pass  # create and migrate first, as a running server would have

    async def spawn(name: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-c", script, str(db), name, cwd=REPO,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip

    procs = [await spawn("left"), await spawn("right")]
    async with asyncio.timeout(120):
        for proc in procs:
            assert proc.stdout is not None
            assert await proc.stdout.readline() == b"ready\n"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            await proc.stdin.drain()
        outputs = [await proc.communicate() for proc in procs]

    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err.decode()
        assert b"locked" not in err
        assert out == b"done\n"
    async with await Journal.open(db) as journal:
        for name in ("left", "right"):
            seqs = [rec.seq async for rec in journal.events(name)]
            assert seqs == list(range(2000))
            run = await journal.get_run(f"{name}-run")
            assert run is not None
            assert (run.status, run.last_seq) == (RunState.COMPLETED, 1999)


# --- sessions ----------------------------------------------------------------------------------


async def test_sessions_list_newest_first_filtered_by_cwd_in_pages(db: Path) -> None:
    async with await Journal.open(db) as journal:
        for n in range(7):
            await new_session(journal, f"a{n}", cwd="/a", created_at=100.0 + n, updated_at=100.0 + n)
        await new_session(journal, "tie-x", cwd="/b", created_at=50.0, updated_at=200.0)
        await new_session(journal, "tie-y", cwd="/b", created_at=50.0, updated_at=200.0)
        pages, cursor = [], None
        while True:
            page, cursor = await journal.list_sessions(cwd="/a", limit=3, cursor=cursor)
            pages.append([rec.id for rec in page])
            if cursor is None:
                break
        everything, end = await journal.list_sessions()
        only_b, _ = await journal.list_sessions(cwd="/b")

    assert pages == [["a6", "a5", "a4"], ["a3", "a2", "a1"], ["a0"]]
    assert [rec.id for rec in everything] == ["tie-y", "tie-x", "a6", "a5", "a4", "a3", "a2", "a1", "a0"]
    assert end is None
    assert [rec.id for rec in only_b] == ["tie-y", "tie-x"]


@pytest.mark.parametrize(
    "cursor",
    [
        "not base64 at all!",
        base64.urlsafe_b64encode(b"no separator").decode(),
        base64.urlsafe_b64encode(b"yesterday|s1").decode(),
        base64.urlsafe_b64encode(b"nan|s1").decode(),
        base64.urlsafe_b64encode(b"\xff\xfe|s1").decode(),
    ],
)
async def test_an_invalid_session_cursor_raises_value_error(db: Path, cursor: str) -> None:
    async with await Journal.open(db) as journal:
        with pytest.raises(ValueError):
            await journal.list_sessions(cursor=cursor)


async def test_a_session_is_stored_updated_and_read_back(db: Path) -> None:
    async with await Journal.open(db) as journal:
        created = await journal.create_session(
            SessionRecord(
                id="s1",
                cwd="/w",
                title="t",
                adapter="echo",
                mode="ask",
                config={"model": "m"},
                permissions={"edit": "allow"},
                additional_dirs=("/x",),
            )
        )
        with pytest.raises(ValueError):
            await journal.create_session(SessionRecord(id="s1", cwd="/w"))
        updated = await journal.update_session(
            "s1",
            title="new",
            mode="code",
            config={"model": "n"},
            permissions={},
            additional_dirs=["/y", "/z"],
        )
        with pytest.raises(TypeError):
            await journal.update_session("s1", cwd="/elsewhere")
        missing = await journal.update_session("nobody", title="x")
        stored = await journal.get_session("s1")

    assert created.created_at == created.updated_at > 0
    assert stored == updated
    assert updated is not None
    assert (updated.title, updated.mode, updated.config, updated.permissions, updated.additional_dirs) == (
        "new", "code", {"model": "n"}, {}, ("/y", "/z"),
    )  # fmt: skip
    assert (updated.adapter, updated.cwd, updated.created_at) == ("echo", "/w", created.created_at)
    assert updated.updated_at >= created.updated_at
    assert missing is None


async def test_deleting_a_session_removes_its_runs_and_events(db: Path) -> None:
    async with await Journal.open(db) as journal:
        await new_session(journal)
        await new_session(journal, "keep")
        await run_with_events(journal, "s1", "r1", 10)
        await run_with_events(journal, "keep", "k1", 2)
        assert await journal.delete_session("s1") is True
        assert await journal.delete_session("s1") is False
        assert await journal.get_session("s1") is None
        assert await journal.runs("s1") == []
        assert await collect(journal, "keep") == ["k1:0", "k1:1"]
    with raw(db) as conn:
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM runs WHERE session_id = 's1'),"
            " (SELECT count(*) FROM events WHERE session_id = 's1')"
        ).fetchone()
    assert counts == (0, 0)


async def test_the_database_refuses_to_update_or_delete_events(db: Path) -> None:
    async with await Journal.open(db) as journal:
        await new_session(journal)
        await run_with_events(journal, "s1", "r1", 3)
    with raw(db) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        for statement in (
            "UPDATE events SET payload = '{}' WHERE run_id = 'r1'",
            "DELETE FROM events WHERE run_id = 'r1' AND seq = 0",
            "DELETE FROM events",
            "DELETE FROM runs WHERE id = 'r1'",
        ):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                conn.execute(statement)
        assert conn.execute("SELECT count(*) FROM events").fetchone() == (3,)


# --- schema and recovery -----------------------------------------------------------------------


async def test_migrations_set_user_version_and_reopening_changes_nothing(db: Path) -> None:
    async with await Journal.open(db) as journal:
        await new_session(journal)
    with raw(db) as conn:
        first = conn.execute("PRAGMA user_version").fetchone()
        schema = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
        mode = conn.execute("PRAGMA journal_mode").fetchone()
    async with await Journal.open(db) as journal:
        assert await journal.get_session("s1") is not None
    with raw(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == first == (SCHEMA_VERSION,)
        assert conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall() == schema
    assert mode == ("wal",)


async def test_opening_a_new_file_waits_for_another_process_switching_it_to_wal(db: Path) -> None:
    # Another server starting at the same moment holds the new file's write lock while it
    # switches it to WAL; SQLite answers a second switcher "database is locked" at once.
    db.parent.mkdir(parents=True)
    other = raw(db)
    other.execute("BEGIN IMMEDIATE")
    retried = asyncio.Event()

    class OnRetry(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "switching it to WAL" in record.getMessage():
                retried.set()

    handler = OnRetry(logging.DEBUG)
    logger = logging.getLogger("journal")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        async with asyncio.timeout(30):
            opening = asyncio.create_task(Journal.open(db))
            waiting = asyncio.create_task(retried.wait())
            await asyncio.wait({opening, waiting}, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            other.execute("COMMIT")
            journal = await opening
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        other.close()
    async with journal:
        await new_session(journal)
        assert await journal.get_session("s1") is not None
    with raw(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_a_database_from_a_newer_schema_is_refused(db: Path) -> None:
    async with await Journal.open(db):
        pass
    with raw(db) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(JournalVersionError):
        await Journal.open(db)


async def exited_pid() -> int:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    async with asyncio.timeout(30):
        await proc.wait()
    return proc.pid


def set_owner(db: Path, run_id: str, pid: int, token: str) -> None:
    with raw(db) as conn:
        conn.execute("UPDATE runs SET owner_pid = ?, owner_token = ? WHERE id = ?", (pid, token, run_id))


async def test_runs_left_running_by_a_dead_process_become_interrupted_at_open(db: Path) -> None:
    async with await Journal.open(db) as journal:
        await new_session(journal)
        for run_id in ("exited", "pid-reused", "finished"):
            await journal.start_run(run_id=run_id, session_id="s1")
        await journal.finish_run("finished", "end_turn")
        assert journal.recovered_runs == ()
    set_owner(db, "exited", await exited_pid(), "")
    set_owner(db, "pid-reused", os.getpid(), "another-boot:42")  # our pid, someone else's process

    async with await Journal.open(db) as journal:
        recovered = journal.recovered_runs
        runs = {run.id: run for run in await journal.runs("s1")}

    assert sorted(recovered) == ["exited", "pid-reused"]
    assert runs["exited"].status is RunState.INTERRUPTED
    assert runs["pid-reused"].status is RunState.INTERRUPTED
    assert runs["exited"].ended_at is not None
    assert runs["finished"].status is RunState.COMPLETED


async def test_a_live_owners_running_runs_are_not_interrupted(db: Path) -> None:
    sleeper = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import sys; sys.stdin.read()", stdin=asyncio.subprocess.PIPE
    )
    try:
        async with await Journal.open(db) as first:
            await new_session(first)
            await first.start_run(run_id="ours", session_id="s1")
            await first.start_run(run_id="other-process", session_id="s1")
            set_owner(db, "other-process", sleeper.pid, owners.process_token(sleeper.pid))
            # A second window's server opens the same file while both owners are alive.
            async with await Journal.open(db) as second:
                assert second.recovered_runs == ()
                statuses = {run.id: run.status for run in await second.runs("s1")}
    finally:
        assert sleeper.stdin is not None
        sleeper.stdin.close()
        async with asyncio.timeout(30):
            await sleeper.wait()

    assert statuses == {"ours": RunState.RUNNING, "other-process": RunState.RUNNING}


# --- runs ------------------------------------------------------------------------------------------


async def test_finishing_a_run_normalizes_its_state_and_records_why(db: Path) -> None:
    async with await Journal.open(db) as journal:
        await new_session(journal)
        await journal.start_run(run_id="r1", session_id="s1")
        await journal.start_run(run_id="r2", session_id="s1")
        await journal.finish_run("r1", "end_turn", stop_reason="end_turn")
        await journal.finish_run("r2", "failure", error="agent crashed")
        with pytest.raises(ValueError):
            await journal.finish_run("r2", "exploded")
        with pytest.raises(ValueError):
            await journal.finish_run("r2", RunState.RUNNING)
        with pytest.raises(LookupError):
            await journal.finish_run("ghost", "end_turn")
        with pytest.raises(LookupError):
            await journal.start_run(run_id="r3", session_id="ghost")
        with pytest.raises(ValueError):
            await journal.start_run(run_id="r1", session_id="s1")
        r1, r2 = await journal.runs("s1")

    assert (r1.status, r1.stop_reason, r1.error) == (RunState.COMPLETED, "end_turn", None)
    assert (r2.status, r2.stop_reason, r2.error) == (RunState.ERROR, None, "agent crashed")
    assert r1.ended_at is not None
    assert r1.ended_at >= r1.started_at
    assert (r1.owner_pid, r2.seq_no) == (os.getpid(), 1)


# --- redaction and history ---------------------------------------------------------------------


async def test_secrets_in_a_tool_input_are_redacted_in_the_stored_payload(db: Path) -> None:
    key = "sk-proj-" + "Ab3" * 12
    event = ToolCallStarted(
        tool_call_id="t1",
        title="Run curl",
        tool_kind="execute",
        raw_input={"command": f"curl -H 'Authorization: Bearer {key}' https://api", "api_key": key},
    )
    async with await Journal.open(db) as journal:
        await new_session(journal)
        await journal.start_run(run_id="r1", session_id="s1")
        await journal.append(Envelope("r1", "s1", 0, event))
        (replayed,) = [rec.event async for rec in journal.events("s1")]
    with raw(db) as conn:
        (payload,) = conn.execute("SELECT payload FROM events").fetchone()

    assert key not in payload
    assert json.loads(payload)["raw_input"] == {
        "command": "curl -H 'Authorization: [REDACTED]' https://api",
        "api_key": "[REDACTED]",
    }
    assert isinstance(replayed, ToolCallStarted)
    assert replayed.raw_input == json.loads(payload)["raw_input"]


async def test_history_is_the_conversation_as_messages(db: Path) -> None:
    async with await Journal.open(db) as journal:
        await new_session(journal)
        turns = [
            ("r1", "what is 2+2?", ["It is ", "4."]),
            ("r2", "and 3+3?", []),
            ("r3", "thanks", ["You're ", "welcome."]),
        ]
        for run_id, prompt, replies in turns:
            await journal.start_run(run_id=run_id, session_id="s1")
            events: list[RuntimeEvent] = [
                PromptReceived(blocks=({"type": "text", "text": prompt},)),
                ThoughtDelta("hidden"),
                *[TextDelta(text) for text in replies],
                TurnFinished("end_turn"),
            ]
            for seq, event in enumerate(events):
                await journal.append(Envelope(run_id, "s1", seq, event))
        history = (await journal.history("s1")).messages

    assert history == [
        Message("user", "what is 2+2?"),
        Message("agent", "It is 4."),
        Message("user", "and 3+3?"),
        Message("user", "thanks"),
        Message("agent", "You're welcome."),
    ]


# --- lifecycle -------------------------------------------------------------------------------------


async def test_close_is_idempotent_and_use_after_close_raises(db: Path) -> None:
    journal = await Journal.open(db)
    await new_session(journal)
    await journal.start_run(run_id="r1", session_id="s1")
    await journal.append(Envelope("r1", "s1", 0, TextDelta("queued, not yet committed")))
    await journal.close()
    await journal.close()
    with pytest.raises(JournalClosedError):
        await journal.append(Envelope("r1", "s1", 1, TextDelta("late")))
    with pytest.raises(JournalClosedError):
        await journal.get_session("s1")
    with raw(db) as conn:
        assert conn.execute("SELECT count(*) FROM events").fetchone() == (1,)


def test_the_default_path_is_journal_db_in_the_user_data_dir() -> None:
    path = default_path()
    assert path.name == "journal.db"
    assert "acp-server" in path.parts
    assert Journal.default_path() == path
