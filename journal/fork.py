"""A session forked from another: a new session row whose runs and events are copies of the
parent's finished runs, in one transaction, so the fork's history (replay, the conversation an
agent is restored from) is the parent's up to the fork and the two grow apart from there.

A run still going is not copied: a fork is taken at the last finished turn. The parent's rows
are only read. Copied runs get new ids (events are keyed by run), keep their order and times.
An agent that forked its own session too (an agent below) has the fork's transcript appended
to the last copied run, so a restart brings back the agent's fork, not its parent.
"""

from __future__ import annotations

import os
import sqlite3
import time

from journal.records import SessionRecord, session_params

_FINISHED_RUNS = "SELECT id FROM runs WHERE session_id = ? AND status != 'running' ORDER BY seq_no"
_COPY_RUN = (
    "INSERT INTO runs (id, session_id, seq_no, status, stop_reason, error, started_at, ended_at, last_seq, "
    "owner_pid, owner_token) SELECT ?, ?, ?, status, stop_reason, error, started_at, ended_at, last_seq, "
    "owner_pid, owner_token FROM runs WHERE id = ?"
)
_COPY_EVENTS = (
    "INSERT INTO events (run_id, seq, session_id, run_no, type, created_at, terminal, payload) "
    "SELECT ?, seq, ?, ?, type, created_at, terminal, payload FROM events WHERE run_id = ? ORDER BY seq"
)


def new_run_id() -> str:
    return f"run_{os.urandom(16).hex()}"


def copy_session(
    conn: sqlite3.Connection, parent_id: str, rec: SessionRecord, columns: str, transcript: str | None = None
) -> int:
    """Insert `rec` (already redacted) and copies of `parent_id`'s finished runs; the number copied.
    `transcript` (an encoded, redacted `TranscriptSaved` payload) is appended to the last one.
    LookupError when the parent is not in the journal."""
    if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (parent_id,)).fetchone() is None:
        raise LookupError(f"no session {parent_id!r}")
    marks = ",".join("?" * len(session_params(rec)))
    conn.execute(f"INSERT INTO sessions ({columns}) VALUES ({marks})", session_params(rec))  # noqa: S608
    runs = [row[0] for row in conn.execute(_FINISHED_RUNS, (parent_id,)).fetchall()]
    for number, run_id in enumerate(runs):
        copy = new_run_id()
        conn.execute(_COPY_RUN, (copy, rec.id, number, run_id))
        conn.execute(_COPY_EVENTS, (copy, rec.id, number, run_id))
        if transcript is not None and number == len(runs) - 1:
            _append_transcript(conn, copy, rec.id, number, transcript)
    return len(runs)


def _append_transcript(conn: sqlite3.Connection, run_id: str, session_id: str, number: int, payload: str) -> None:
    (last,) = conn.execute("SELECT coalesce(max(seq), -1) FROM events WHERE run_id = ?", (run_id,)).fetchone()
    conn.execute(
        "INSERT INTO events (run_id, seq, session_id, run_no, type, created_at, terminal, payload) "
        "VALUES (?, ?, ?, ?, 'transcript', ?, 0, ?)",
        (run_id, last + 1, session_id, number, time.time(), payload),
    )
    conn.execute("UPDATE runs SET last_seq = ? WHERE id = ?", (last + 1, run_id))
