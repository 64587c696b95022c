"""Reading a session's events back, in order, a page at a time, and its conversation.

Order is the session's runs (by `seq_no`) then `seq` within a run; pages are keyset queries
on `(run_no, seq)`, so memory stays flat however long the history. `after` is an event id
(`run_id:seq`, resume strictly after it) or, with a run, a plain seq.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from json import decoder
from typing import Any, cast

import aiosqlite

from adapters.base import TurnInput
from adapters.conversation import Conversation
from adapters.events import PromptReceived, RuntimeEvent, StateSaved, TextDelta, TranscriptSaved
from adapters.frozen import frozen
from journal.codec import decode_event
from journal.records import EventRecord

PAGE_SIZE = 500
_MIN_SEQ = -(2**63)
_RECORD_COLUMNS = "run_id, seq, session_id, type, created_at, terminal, payload, run_no"
_TEXT_PAYLOAD = '{"text":"'  # how journal.store encodes a text delta's payload

Replayed = tuple[str, int, RuntimeEvent]  # run_id, seq, event

# The C string scanner under `json.loads` (typeshed leaves it out): a text payload is one string.
_scan_string = cast(Callable[[str, int], tuple[str, int]], decoder.scanstring)  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]


@frozen
class Span:
    """Which events to read: one session, maybe one run of it, strictly after `start` (and,
    with `last_run`, up to the end of that run)."""

    session_id: str
    run_no: int | None = None
    start: tuple[int, int] = (-1, 0)
    last_run: int | None = None


def runs_span(session_id: str, first: int, last: int) -> Span:
    """Every event of the session's runs `first` to `last` (by `seq_no`)."""
    return Span(session_id, None, (first, _MIN_SEQ), last)


async def resolve_span(
    conn: aiosqlite.Connection,
    *,
    session_id: str | None,
    run_id: str | None,
    after: object,
) -> Span | None:
    """The span a replay request names; None when its session or run does not exist.

    `after` is checked here, whatever its static type: a str event id, an int seq or None.
    """
    start = (-1, 0)
    if isinstance(after, str):
        start_run, seq = parse_event_id(after)
        found = await _run_position(conn, start_run)
        if found is None:
            raise ValueError(f"unknown event id {after!r}")
        if session_id is not None and found[0] != session_id:
            raise ValueError(f"event {after!r} is not in session {session_id!r}")
        session_id, start = found[0], (found[1], seq)
    elif after is not None and (isinstance(after, bool) or not isinstance(after, int)):
        raise ValueError(f"after must be an event id or an int seq, not {after!r}")
    elif after is not None and run_id is None:
        raise ValueError("an int `after` needs a run_id")
    if run_id is None:
        if session_id is None:
            raise ValueError("events() needs a session_id, a run_id or an event id")
        return Span(session_id, None, start)
    run = await _run_position(conn, run_id)
    if run is None or (session_id is not None and run[0] != session_id):
        return None
    if isinstance(after, int):
        start = (run[1], after)
    elif start[0] < run[1]:
        start = (run[1], _MIN_SEQ)
    elif start[0] > run[1]:
        return None  # resuming after a later run of the session: nothing of this run is left
    return Span(run[0], run[1], start)


def parse_event_id(event_id: str) -> tuple[str, int]:
    run_id, sep, seq = event_id.rpartition(":")
    if not sep or not run_id:
        raise ValueError(f"invalid event id {event_id!r}")
    try:
        return run_id, int(seq)
    except ValueError:
        raise ValueError(f"invalid event id {event_id!r}") from None


async def stream(
    conn: aiosqlite.Connection,
    span: Span,
    *,
    types: Sequence[str] = (),
) -> AsyncIterator[EventRecord]:
    """The span's events in order, fetched `PAGE_SIZE` rows per query."""
    async for rows in _pages(conn, span, _RECORD_COLUMNS, types):
        for row in rows:
            yield _record(row)


async def event_pages(conn: aiosqlite.Connection, span: Span) -> AsyncIterator[list[Replayed]]:
    """The span's events in order, a page of `PAGE_SIZE` at a time, with only what a replay
    needs: it reads every event of a session, so each one's cost counts."""
    async for rows in _pages(conn, span, "run_id, seq, type, payload, run_no", ()):
        yield [(row[0], row[1], _event(row[2], row[3])) for row in rows]


async def _pages(
    conn: aiosqlite.Connection, span: Span, columns: str, types: Sequence[str]
) -> AsyncIterator[list[Any]]:
    """Rows of `columns` (the first two `run_id, seq`, the last `run_no`) by keyset pages."""
    sql, params = _page_query(span, types, columns)
    key: tuple[int, int] = span.start
    while True:
        # Within one run the key is the seq alone, so the index serves the order with no sort.
        key_params: tuple[int, ...] = key if span.run_no is None else key[1:]
        rows = list(await conn.execute_fetchall(sql, (*params, *key_params, PAGE_SIZE)))
        if rows:
            yield rows
        if len(rows) < PAGE_SIZE:
            return
        key = (rows[-1][-1], rows[-1][1])


async def conversation(conn: aiosqlite.Connection, session_id: str) -> Conversation:
    """The session's conversation, folded run by run as a live session folds it after each turn:
    the prompt as text, the run's agent text as one reply, and the transcript and state the agent saved."""
    folded = Conversation()
    run_id: str | None = None
    prompt, reply, saves = "", list[str](), list[TranscriptSaved | StateSaved]()
    async for rec in stream(conn, Span(session_id), types=("prompt", "text", "transcript", "state")):
        if rec.run_id != run_id:
            if run_id is not None:
                folded.add_turn(prompt, "".join(reply), saves)
            run_id, prompt, reply, saves = rec.run_id, "", [], []
        event = rec.event
        if isinstance(event, PromptReceived):
            prompt = TurnInput(session_id=session_id, cwd="", prompt=event.blocks).text
        elif isinstance(event, TextDelta):
            reply.append(event.text)
        elif isinstance(event, TranscriptSaved | StateSaved):
            saves.append(event)
    if run_id is not None:
        folded.add_turn(prompt, "".join(reply), saves)
    return folded


def _page_query(span: Span, types: Sequence[str], columns: str) -> tuple[str, tuple[object, ...]]:
    where = ["session_id = ?"]
    params: list[object] = [span.session_id]
    if span.run_no is not None:
        where.append("run_no = ?")
        params.append(span.run_no)
    if span.last_run is not None:
        where.append("run_no <= ?")
        params.append(span.last_run)
    if types:
        where.append(f"type IN ({','.join('?' * len(types))})")
        params.extend(types)
    if span.run_no is None:
        where.append("(run_no, seq) > (?, ?)")
        order = "run_no, seq"
    else:
        where.append("seq > ?")
        order = "seq"
    sql = (
        f"SELECT {columns} FROM events "  # noqa: S608
        f"WHERE {' AND '.join(where)} ORDER BY {order} LIMIT ?"
    )
    return sql, tuple(params)


def _event(type_: str, payload: str) -> RuntimeEvent:
    """A stored event's runtime event; a text delta, most of any history, without a parser."""
    if type_ == "text" and payload.startswith(_TEXT_PAYLOAD):
        text, end = _scan_string(payload, len(_TEXT_PAYLOAD))
        if end == len(payload) - 1 and payload[end] == "}":
            return TextDelta(text)
    return decode_event(type_, json.loads(payload))


def _record(row: Any) -> EventRecord:
    payload = json.loads(row[6])
    return EventRecord(
        event_id=f"{row[0]}:{row[1]}",
        run_id=row[0],
        session_id=row[2],
        seq=row[1],
        type=row[3],
        created_at=row[4],
        terminal=bool(row[5]),
        event=decode_event(row[3], payload),
        payload=payload,
    )


async def _run_position(conn: aiosqlite.Connection, run_id: str) -> tuple[str, int] | None:
    rows = list(await conn.execute_fetchall("SELECT session_id, seq_no FROM runs WHERE id = ?", (run_id,)))
    return (rows[0][0], rows[0][1]) if rows else None
