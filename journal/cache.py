"""A text the caller derived from a finished run, kept beside it: the journal knows nothing of
what it holds (acp-server keeps each run's replay there, so a long session loads fast).

A cached text belongs to one run and one `variant` (the caller's name for how it was derived)
and stays current while the run is as it was when the text was stored: the same status, last
seq and end time. A running run is never cached. Each run keeps one text; storing another
variant replaces it. The text is not redacted here: the caller derives it from events the
journal already redacted when they were stored, and must not put anything else in it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Sequence

import aiosqlite

from adapters.frozen import frozen
from journal.records import RUN_COLUMNS, RunRecord, run_from_row

PAGE_RUNS = 64  # runs (each with its cached text) per query of `cached_runs`

_PAGE = (
    "SELECT "  # noqa: S608 - the columns are constants
    + ", ".join(f"r.{column.strip()}" for column in RUN_COLUMNS.split(","))
    + """, c.body FROM runs r LEFT JOIN run_cache c ON c.run_id = r.id AND c.variant = ?
        AND c.status = r.status AND c.last_seq IS r.last_seq AND c.ended_at IS r.ended_at
    WHERE r.session_id = ? AND r.seq_no > ? ORDER BY r.seq_no LIMIT ?"""
)

# Through `runs`: stored only while the run is finished and still as the caller read it.
_STORE = """INSERT OR REPLACE INTO run_cache (run_id, variant, status, last_seq, ended_at, body)
SELECT id, ?, status, last_seq, ended_at, ? FROM runs
WHERE id = ? AND status != 'running' AND status = ? AND last_seq IS ? AND ended_at IS ?"""


@frozen
class CachedRun:
    """One run of a session, with its cached text when there is a current one."""

    run: RunRecord
    body: str | None


async def cached_runs(conn: aiosqlite.Connection, session_id: str, variant: str) -> AsyncIterator[CachedRun]:
    """The session's runs in order, `PAGE_RUNS` a query, each with its current text of `variant`."""
    after = -1
    while True:
        rows = list(await conn.execute_fetchall(_PAGE, (variant, session_id, after, PAGE_RUNS)))
        for row in rows:
            yield CachedRun(run_from_row(row), row[-1])
        if len(rows) < PAGE_RUNS:
            return
        after = rows[-1][2]  # seq_no


def store(conn: sqlite3.Connection, variant: str, entries: Sequence[tuple[RunRecord, str]]) -> None:
    """Keep each text for its run as the record describes it (skipped if the run changed since).

    Synchronous, for `WriteConnection.run`: one transaction, one trip, however many runs.
    """
    conn.executemany(
        _STORE,
        [(variant, body, run.id, run.status.value, run.last_seq, run.ended_at) for run, body in entries],
    )
