"""The journal's values: sessions, runs and stored events, and the opaque session-list cursor.

Rows become these frozen records here and nowhere else; the session list's cursor is the
urlsafe base64 of `updated_at|id`, which keyset pagination resumes from.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import sqlite3
from dataclasses import field
from typing import Any, overload

from adapters.events import RuntimeEvent
from adapters.frozen import frozen
from journal.states import RunState

SESSION_COLUMNS = (
    "id, cwd, title, adapter, mode, config_json, permissions_json, additional_dirs_json, created_at, updated_at, "
    "launch_json"
)
RUN_COLUMNS = "id, session_id, seq_no, status, stop_reason, error, started_at, ended_at, last_seq, owner_pid"


@frozen
class SessionRecord:
    """A session as stored; created_at/updated_at of 0.0 mean "now" when it is created."""

    id: str
    cwd: str
    title: str | None = None
    adapter: str = ""
    mode: str | None = None
    config: dict[str, Any] = field(default_factory=dict[str, Any])
    permissions: dict[str, Any] = field(default_factory=dict[str, Any])
    additional_dirs: tuple[str, ...] = ()
    created_at: float = 0.0
    updated_at: float = 0.0
    launch: dict[str, Any] = field(default_factory=dict[str, Any])  # the agent's name and settings


@frozen
class RunRecord:
    """One turn of a session; `seq_no` is its index in the session, `last_seq` its last event."""

    id: str
    session_id: str
    seq_no: int
    status: RunState
    stop_reason: str | None
    error: str | None
    started_at: float
    ended_at: float | None
    last_seq: int | None
    owner_pid: int | None


@frozen
class EventRecord:
    """One stored event; `event_id` (`run_id:seq`) is stable, so consumers can dedupe by it."""

    event_id: str
    run_id: str
    session_id: str
    seq: int
    type: str
    created_at: float
    terminal: bool
    event: RuntimeEvent
    payload: dict[str, Any]


@overload
def storable(text: str) -> str: ...
@overload
def storable(text: None) -> None: ...
def storable(text: str | None) -> str | None:
    """`text` as SQLite can store it: lone surrogates (valid in JSON strings, not in UTF-8)
    become U+FFFD instead of failing the whole write."""
    if text is None or text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def session_params(rec: SessionRecord) -> tuple[Any, ...]:
    return (
        rec.id,
        storable(rec.cwd),
        storable(rec.title),
        rec.adapter,
        rec.mode,
        json.dumps(rec.config),
        json.dumps(rec.permissions),
        json.dumps(list(rec.additional_dirs)),
        rec.created_at,
        rec.updated_at,
        json.dumps(rec.launch),
    )


def session_from_row(row: sqlite3.Row | tuple[Any, ...]) -> SessionRecord:
    return SessionRecord(
        id=row[0],
        cwd=row[1],
        title=row[2],
        adapter=row[3],
        mode=row[4],
        config=json.loads(row[5]),
        permissions=json.loads(row[6]),
        additional_dirs=tuple(json.loads(row[7])),
        created_at=row[8],
        updated_at=row[9],
        launch=json.loads(row[10]),
    )


def run_from_row(row: sqlite3.Row | tuple[Any, ...]) -> RunRecord:
    return RunRecord(
        id=row[0],
        session_id=row[1],
        seq_no=row[2],
        status=RunState(row[3]),
        stop_reason=row[4],
        error=row[5],
        started_at=row[6],
        ended_at=row[7],
        last_seq=row[8],
        owner_pid=row[9],
    )


def encode_cursor(updated_at: float, session_id: str) -> str:
    raw = f"{updated_at!r}|{session_id}".encode()
    return base64.urlsafe_b64encode(raw).decode("ascii")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """(updated_at, id) of the last session of the previous page; anything else is ValueError."""
    try:
        raw = base64.b64decode(cursor.encode("ascii"), altchars=b"-_", validate=True).decode()
        stamp, sep, session_id = raw.partition("|")
        updated_at = float(stamp)
    except (UnicodeError, binascii.Error, ValueError):
        raise ValueError(f"invalid session cursor {cursor!r}") from None
    if not sep or not math.isfinite(updated_at):
        raise ValueError(f"invalid session cursor {cursor!r}")
    return updated_at, session_id
