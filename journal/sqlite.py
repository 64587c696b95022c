"""SQLite connections for the journal and the one way to run a write transaction.

Writes go through `WriteConnection.transaction` (or `run`, a synchronous body in one trip to the
connection's thread): one asyncio lock (one writer per journal), `BEGIN IMMEDIATE` so a second
process waits on `busy_timeout` instead of failing mid-way, and a bounded retry when SQLite still
reports the file locked or busy; what is still wrong with the file after that (disk full, read-only)
leaves as a `JournalFileError`. Opening retries the switch to WAL the same way: on a new file
another process may be mid-switch, and SQLite then refuses at once instead of waiting.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import aiosqlite

from journal.errors import READ_ONLY, JournalFileError, classified
from journal.private import check_private, private_dir, say_tightened, tighten

T = TypeVar("T")
log = logging.getLogger("journal")

BUSY_TIMEOUT_MS = 10_000
_RETRIES = 6
_BACKOFF_S = 0.05


def private_database(file: Path, *, own_dir: bool) -> None:
    """Before SQLite opens it: the file created 0600 when missing (SQLite gives a new `-wal` and
    `-shm` the file's mode), those three refused when a symlink or another user's. Its directory is
    made 0700 when missing, or tightened when `own_dir` (the default one); a directory the user
    chose, like /tmp, is left as it is."""
    if own_dir or not file.parent.is_dir():
        private_dir(file.parent)
    for path in database_files(file):
        check_private(path, create=path == file)
    if not os.access(file, os.W_OK):  # SQLite would open it read-only and fail only at the first write
        raise JournalFileError(file, *READ_ONLY)


def tighten_database(file: Path) -> None:
    """Once SQLite has found it a database: the three files 0600 (an older journal's were 0644),
    said in one line."""
    tightened = [old for path in database_files(file) if (old := tighten(path)) is not None]
    say_tightened(file, tightened[0] if tightened else None)


def database_files(file: Path) -> tuple[Path, Path, Path]:
    return file, file.with_name(file.name + "-wal"), file.with_name(file.name + "-shm")


async def connect(
    path: str | os.PathLike[str], *, readonly: bool = False, autocheckpoint: bool = True
) -> aiosqlite.Connection:
    """A connection in autocommit mode (we issue BEGIN ourselves) with the journal's pragmas;
    without `autocheckpoint` its commits never checkpoint (journal/checkpoint.py does)."""
    conn = await aiosqlite.connect(os.fspath(path), isolation_level=None)
    try:
        # busy_timeout first: switching to WAL itself waits for other processes' locks.
        await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS:d}")
        await conn.execute("PRAGMA foreign_keys = ON")
        if readonly:
            await conn.execute("PRAGMA query_only = ON")
        else:
            await _enter_wal(conn)
            await conn.execute("PRAGMA synchronous = NORMAL")
            await conn.execute("PRAGMA temp_store = MEMORY")  # its TEMP trigger needs no file
            if not autocheckpoint:
                await conn.execute("PRAGMA wal_autocheckpoint = 0")
    except BaseException:
        await conn.close()
        raise
    return conn


_INLINE_PRAGMAS = (
    "busy_timeout = 0",
    "foreign_keys = ON",
    "synchronous = NORMAL",
    "wal_autocheckpoint = 0",
    "temp_store = MEMORY",
)


def inline_connection(path: Path) -> sqlite3.Connection:
    """A second write connection, for the loop's own thread (only: sqlite3 checks), for commits
    that must not wait: no busy timeout (a lock held elsewhere fails at once), no checkpoints."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for pragma in _INLINE_PRAGMAS:
            conn.execute(f"PRAGMA {pragma}")
    except BaseException:
        conn.close()
        raise
    return conn


async def _enter_wal(conn: aiosqlite.Connection) -> None:
    """Switch the file to WAL, waiting (up to the busy timeout) for another process doing so.

    A file still in rollback mode is switched under a write lock, and SQLite answers a second
    switcher "database is locked" at once, ignoring busy_timeout (its deadlock rule): two
    servers starting on a new journal together would have one of them fail to start.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = _BACKOFF_S
    while True:
        try:
            await conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if not is_lock_error(exc) or time.monotonic() >= deadline:
                raise
            log.debug("journal open waits for another process switching it to WAL: %s", exc)
        # Jittered, so two processes that collided do not retry in step.
        await asyncio.sleep(delay * (0.5 + random.random()))  # noqa: S311 - timing jitter, not a secret
        delay = min(delay * 2, 0.5)


def is_lock_error(exc: BaseException) -> bool:
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    message = str(exc).lower()
    return "locked" in message or "busy" in message


class WriteConnection:
    """The journal's single write connection; every write transaction passes through here."""

    def __init__(self, conn: aiosqlite.Connection, path: Path, *, wrote: Callable[[int], None] | None = None) -> None:
        self.conn = conn
        self.path = path
        self._lock = asyncio.Lock()
        self._wrote = wrote  # told the rows each transaction changed (the checkpointer counts them)

    @property
    def busy(self) -> bool:
        """A write transaction is queued or under way here."""
        return self._lock.locked()

    def wrote(self, rows: int) -> None:
        """Count rows changed outside `transaction` and `run` too (the journal's one-event commits)."""
        if self._wrote is not None:
            self._wrote(rows)

    async def transaction(self, body: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T:
        """Run `body` in `BEGIN IMMEDIATE ... COMMIT`; rolled back and re-run if the file is locked."""
        return await self._retrying(lambda: self._attempt(body))

    async def run(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """`transaction` for a synchronous body: BEGIN, body and COMMIT in one trip to the
        connection's thread (the group commit's path: the editor waits for every batch)."""
        return await self._retrying(lambda: self._on_thread(body))

    async def _retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        async with self._lock:
            changes = self.conn.total_changes
            try:
                with classified(self.path):
                    return await self._attempts(attempt)
            finally:
                self.wrote(self.conn.total_changes - changes)

    async def _attempts(self, attempt: Callable[[], Awaitable[T]]) -> T:
        for n in range(_RETRIES):
            try:
                return await attempt()
            except sqlite3.OperationalError as exc:
                if not is_lock_error(exc) or n == _RETRIES - 1:
                    raise
                log.debug("journal write retried after %s", exc)
                await asyncio.sleep(_BACKOFF_S * 2**n)
        raise AssertionError("unreachable")

    async def _on_thread(self, body: Callable[[sqlite3.Connection], T]) -> T:
        # aiosqlite has no public call for "run this on the connection's thread"; its own methods
        # all go through `_execute`, one queue and one thread, so this keeps their order. One trip
        # instead of one per statement (BEGIN, the batch's, COMMIT): a batch's commit from about
        # 0.37 to 0.12 ms. (A streamed update alone does not come here: `Journal._committed_inline`.)
        execute: Callable[..., Awaitable[T]] = self.conn._execute  # pyright: ignore[reportPrivateUsage, reportUnknownMemberType, reportUnknownVariableType]
        raw: sqlite3.Connection = self.conn._conn  # pyright: ignore[reportPrivateUsage]
        return await execute(_in_transaction, raw, body)

    async def _attempt(self, body: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T:
        try:
            await self.conn.execute("BEGIN IMMEDIATE")
            result = await body(self.conn)
            await self.conn.execute("COMMIT")
        except BaseException:
            # Shielded: a cancelled caller must still leave the connection outside a transaction.
            await asyncio.shield(self._rollback())
            raise
        return result

    async def _rollback(self) -> None:
        # Queued behind any statement a cancellation left running, so no in_transaction check.
        try:
            await self.conn.execute("ROLLBACK")
        except sqlite3.OperationalError as exc:
            if "no transaction" not in str(exc):
                raise

    async def close(self) -> None:
        async with self._lock:
            await self.conn.close()


def _in_transaction(raw: sqlite3.Connection, body: Callable[[sqlite3.Connection], T]) -> T:
    """On the connection's thread: a cancelled caller cannot interrupt it half-way."""
    raw.execute("BEGIN IMMEDIATE")
    try:
        result = body(raw)
        raw.execute("COMMIT")
    except BaseException:
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise
    return result
