"""Runs that did not end as recorded: those of dead processes, and those the file cut short.

`recover` (at open) ends the `running` runs whose process is gone as `interrupted`. `OpenRuns`
follows the runs this journal started: when the file refuses a write of a run's session (disk
full, read-only), the run's record is incomplete and it ends as `error` saying so, at once if the
file still takes that small update, else when it finishes or the journal closes; if the file
never does, the next start's `recover` finds it.
"""

from __future__ import annotations

import logging
import time

import aiosqlite

from journal import owners
from journal.errors import JournalFileError
from journal.sqlite import WriteConnection

log = logging.getLogger(__name__)

INTERRUPTED_ERROR = "the server process ended while the run was in progress"
_END = "UPDATE runs SET status = ?, ended_at = ?, error = ? WHERE id = ? AND status = 'running'"


async def recover(write: WriteConnection, session_id: str | None = None) -> tuple[str, ...]:
    """End the running runs (of one session, or all) of dead processes as `interrupted`; their ids."""
    rows = await write.conn.execute_fetchall(
        "SELECT id, owner_pid, owner_token FROM runs WHERE status = 'running' AND (?1 IS NULL OR session_id = ?1)",
        (session_id,),
    )
    dead = [row[0] for row in rows if not owners.is_alive(row[1], row[2])]
    if dead:
        await _end(write, [("interrupted", run_id, INTERRUPTED_ERROR) for run_id in dead])
    return tuple(dead)


class OpenRuns:
    """The runs this journal started and has not finished, and why some cannot end as they did."""

    def __init__(self, write: WriteConnection) -> None:
        self._write = write
        self._sessions: dict[str, str] = {}  # run id -> its session's id
        self._broken: dict[str, str] = {}  # run id -> what of it the file refused

    def started(self, run_id: str, session_id: str) -> None:
        self._sessions[run_id] = session_id

    def broken(self, run_id: str) -> str | None:
        """Why the run's record is incomplete, or None; it then ends as `error` with this."""
        return self._broken.get(run_id)

    def finished(self, run_id: str) -> None:
        self._sessions.pop(run_id, None)
        self._broken.pop(run_id, None)

    async def refused(self, exc: JournalFileError, *, session_id: str | None = None, run_id: str | None = None) -> None:
        """The file refused a write of `session_id`'s (or of `run_id`'s session): its runs are broken."""
        session_id = session_id or self._sessions.get(run_id or "")
        runs = [run for run, session in self._sessions.items() if session == session_id]
        for run in runs:
            self._broken.setdefault(run, f"the journal could not store all of this run: it {exc.problem}")
        await self._mark(runs)

    async def close(self) -> None:
        """Last chance for broken runs that never finished (the file may take it by now)."""
        await self._mark(list(self._broken))

    async def _mark(self, runs: list[str]) -> None:
        if not runs:
            return
        try:
            await _end(self._write, [("error", run, self._broken[run]) for run in runs])
        except JournalFileError as again:
            log.warning("%d run(s) stay 'running' in the journal for now: %s", len(runs), again)


async def _end(write: WriteConnection, ends: list[tuple[str, str, str]]) -> None:
    now = time.time()

    async def update(conn: aiosqlite.Connection) -> None:
        await conn.executemany(_END, [(status, now, error, run_id) for status, run_id, error in ends])

    await write.transaction(update)
