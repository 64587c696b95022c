"""Checkpoints of the journal's WAL, kept off the commit path.

SQLite checkpoints by itself inside the commit that takes the WAL past 1,000 pages: that commit
then copies the pages into the database and syncs both files (3-7 ms here), and every streamed
update waiting for it waits that long too (the tail of update latency). The journal's write
connection turns that off (`wal_autocheckpoint = 0`) and reports the rows each of its
transactions changed; past `ROWS` of them `Checkpointer` runs a PASSIVE checkpoint on the read
connection's thread, which SQLite lets run beside the writer's next commits. What is durable,
and when, is unchanged: a commit is in the WAL before it returns, checkpointed or not.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3

import aiosqlite

log = logging.getLogger("journal")

ROWS = 500  # rows changed between checkpoints: about SQLite's own 1,000 pages for small events


class Checkpointer:
    """`wrote` counts rows from the loop; one task checkpoints when they pass `ROWS`."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn
        self._rows = 0
        self._due = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="journal-checkpoint")

    def wrote(self, rows: int) -> None:
        self._rows += rows
        if self._rows >= ROWS:
            self._due.set()

    async def close(self) -> None:
        """Let a running checkpoint finish, then stop (closing the last connection checkpoints)."""
        self._closing = True
        self._due.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        while True:
            await self._due.wait()
            if self._closing:
                return
            self._due.clear()
            self._rows = 0
            try:
                await self._conn.execute_fetchall("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error as exc:  # the next one tries again; SQLite's own at close too
                log.debug("journal checkpoint failed: %s", exc)
