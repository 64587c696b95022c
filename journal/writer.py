"""Group commit: queued events go to SQLite in one transaction per batch, from one task.

`GroupCommitter` owns the queue and the background task (started by the journal, joined in
its `close`); a batch is committed when it reaches `BATCH_SIZE`, when someone waits for it
(a durable append, a flush) or `WINDOW` seconds after its first event, whichever comes first.
A durable event that finds nothing queued or under way is committed by the journal on the loop
instead (`Journal._committed_inline`); what queues behind a commit is batched here.
`write_batch` is the batch's SQL, run on the write connection's thread inside its transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

from adapters.frozen import frozen
from journal.errors import JournalClosedError

log = logging.getLogger("journal")

WINDOW = 0.025  # seconds a batch waits for company before it is committed anyway
BATCH_SIZE = 256


@frozen
class PendingEvent:
    run_id: str
    session_id: str
    seq: int
    type: str
    created_at: float
    terminal: bool
    payload: str


# Commits a batch and returns the refused events by index; raising fails the whole batch.
CommitBatch = Callable[[list[PendingEvent]], Awaitable[dict[int, Exception]]]


class GroupCommitter:
    def __init__(self, commit: CommitBatch) -> None:
        self._commit = commit
        self._queue: list[PendingEvent] = []
        self._waiters: list[asyncio.Future[None] | None] = []  # parallel to _queue
        # Resolves (with the batch's error or None) once the queued events are committed.
        self._queued_done: asyncio.Future[Exception | None] | None = None
        self._inflight_done: asyncio.Future[Exception | None] | None = None
        self._wake = asyncio.Event()
        self._now = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    @property
    def backlog(self) -> int:
        return len(self._queue)

    @property
    def idle(self) -> bool:
        """Nothing queued and no commit under way: an event committed now keeps its order."""
        return not self._queue and self._inflight_done is None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="journal-writer")

    def submit(self, item: PendingEvent, *, durable: bool) -> asyncio.Future[None] | None:
        """Queue one event; for a durable one, the future that resolves once it is committed."""
        if self._closing:
            raise JournalClosedError("the journal is closed")
        loop = asyncio.get_running_loop()
        if self._queued_done is None:
            self._queued_done = loop.create_future()
        waiter = loop.create_future() if durable else None
        self._queue.append(item)
        self._waiters.append(waiter)
        if durable or len(self._queue) >= BATCH_SIZE:
            self._now.set()
        self._wake.set()
        return waiter

    async def flush(self, *, raise_error: bool = True) -> None:
        """Wait until every event queued so far is committed; raises if the last batch failed."""
        done = self._queued_done or self._inflight_done
        if done is None:
            return
        if done is self._queued_done:
            self._now.set()
        error = await asyncio.shield(done)
        if error is not None and raise_error:
            raise error

    async def close(self) -> None:
        """Commit what is queued, then stop the task; later submits raise JournalClosedError."""
        self._closing = True
        self._now.set()
        self._wake.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        while True:
            if not self._queue:
                if self._closing:
                    return
                self._wake.clear()  # no await since the check: nothing can slip in between
                await self._wake.wait()
                continue
            if not self._now.is_set() and not self._closing:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(WINDOW):
                        await self._now.wait()
            await self._commit_queued()

    async def _commit_queued(self) -> None:
        self._now.clear()
        items, self._queue = self._queue, []
        waiters, self._waiters = self._waiters, []
        done, self._queued_done = self._queued_done, None
        if done is None:
            return
        self._inflight_done = done
        try:
            failures = await self._commit(items)
        except Exception as exc:
            log.error("journal lost %d events: %s", len(items), exc)
            _settle(items, waiters, dict.fromkeys(range(len(items)), exc), quiet=True)
            done.set_result(exc)
        else:
            _settle(items, waiters, failures, quiet=False)
            done.set_result(None)
        finally:
            self._inflight_done = None


def _settle(
    items: list[PendingEvent],
    waiters: list[asyncio.Future[None] | None],
    failures: dict[int, Exception],
    *,
    quiet: bool,
) -> None:
    for index, (item, waiter) in enumerate(zip(items, waiters, strict=True)):
        failure = failures.get(index)
        if waiter is not None and not waiter.done():  # done: its appender was cancelled
            if failure is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(failure)
        elif failure is not None and not quiet:
            log.warning("journal refused event %s:%s: %s", item.run_id, item.seq, failure)


# --- the batch's SQL ---------------------------------------------------------------------

# Through `runs`, so an event lands only in a run of its own session and takes the run's order.
_INSERT = """INSERT INTO events (run_id, seq, session_id, run_no, type, created_at, terminal, payload)
SELECT ?, ?, session_id, seq_no, ?, ?, ?, ? FROM runs WHERE id = ? AND session_id = ?"""


# Installed on the journal's write connections (TEMP: no schema change): each stored event moves
# its run's `last_seq` and its session's `updated_at` within the statement that inserts it, so a
# one-event batch is one statement: its own transaction, no BEGIN and COMMIT.
TOUCH_PARENTS = """CREATE TEMP TRIGGER IF NOT EXISTS events_touch_parents AFTER INSERT ON main.events
BEGIN
    UPDATE runs SET last_seq = max(coalesce(last_seq, NEW.seq), NEW.seq) WHERE id = NEW.run_id;
    UPDATE sessions SET updated_at = max(updated_at, NEW.created_at) WHERE id = NEW.session_id;
END"""


def write_batch(
    conn: sqlite3.Connection, items: list[PendingEvent], *, one_by_one: bool = False
) -> dict[int, Exception]:
    """Insert the batch (`TOUCH_PARENTS` keeps runs.last_seq / sessions.updated_at current);
    returns refusals.

    Synchronous, inside the caller's transaction, or for one event a transaction of its own.
    Raises sqlite3.IntegrityError on a duplicate (run_id, seq) unless `one_by_one`, which the
    caller then uses (in a fresh transaction) so only the duplicate is refused.
    """
    params = [
        (i.run_id, i.seq, i.type, i.created_at, int(i.terminal), i.payload, i.run_id, i.session_id) for i in items
    ]
    if one_by_one:
        return _insert_each(conn, params)
    cursor = conn.execute(_INSERT, params[0]) if len(params) == 1 else conn.executemany(_INSERT, params)
    return {} if cursor.rowcount == len(items) else _unknown_runs(conn, items)


def _unknown_runs(conn: sqlite3.Connection, items: list[PendingEvent]) -> dict[int, Exception]:
    run_ids = sorted({item.run_id for item in items})
    marks = ",".join("?" * len(run_ids))
    rows = conn.execute(f"SELECT id, session_id FROM runs WHERE id IN ({marks})", run_ids).fetchall()  # noqa: S608
    known = {(row[0], row[1]) for row in rows}
    return {
        index: LookupError(f"no run {item.run_id!r} in session {item.session_id!r}")
        for index, item in enumerate(items)
        if (item.run_id, item.session_id) not in known
    }


def _insert_each(conn: sqlite3.Connection, params: list[tuple[Any, ...]]) -> dict[int, Exception]:
    failures: dict[int, Exception] = {}
    for index, row in enumerate(params):
        try:
            cursor = conn.execute(_INSERT, row)
        except sqlite3.IntegrityError:
            failures[index] = ValueError(f"event {row[0]}:{row[1]} is already stored")
            continue
        if cursor.rowcount == 0:
            failures[index] = LookupError(f"no run {row[0]!r} in session {row[7]!r}")
    return failures
