"""The journal: durable sessions and append-only per-run event logs in one SQLite file.

`Journal` owns one write connection (group-committed appends, short `BEGIN IMMEDIATE`
transactions, so several server processes can share the file), a second one on the loop's own
thread for a durable event when no other write is queued or under way (one statement that never
waits: the streaming path's commit without two thread hops), and one read connection for
lookups and streaming replay. Every text it stores (events, titles, paths, config values,
permission keys, errors) passes through `journal.redact` first. It imports the runtime event
types and nothing of ACP.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import aiosqlite
import platformdirs

from adapters.conversation import Conversation
from adapters.events import Envelope, TranscriptSaved
from journal import cache, owners, replay, schema
from journal.cache import CachedRun
from journal.checkpoint import Checkpointer
from journal.codec import encode_event
from journal.durability import is_durable
from journal.errors import JournalClosedError, JournalFileError, classified
from journal.fork import copy_session
from journal.records import (
    RUN_COLUMNS,
    SESSION_COLUMNS,
    EventRecord,
    RunRecord,
    SessionRecord,
    decode_cursor,
    encode_cursor,
    run_from_row,
    session_from_row,
    session_params,
    storable,
)
from journal.redact import redact, redact_text
from journal.sqlite import WriteConnection, connect, inline_connection, private_database, tighten_database
from journal.states import RunState, normalize_state
from journal.unfinished import OpenRuns, recover
from journal.writer import TOUCH_PARENTS, GroupCommitter, PendingEvent, write_batch

MAX_BACKLOG = 8192
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _redact_optional(text: str | None) -> str | None:
    return None if text is None else redact_text(text)


_SESSION_FIELDS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "title": ("title", lambda v: storable(_redact_optional(v))),
    "mode": ("mode", _redact_optional),
    "config": ("config_json", lambda v: json.dumps(redact(v))),
    "permissions": ("permissions_json", lambda v: json.dumps(redact(v))),
    "additional_dirs": ("additional_dirs_json", lambda v: json.dumps(redact(list(v)))),
}


def _redacted_session(rec: SessionRecord) -> SessionRecord:
    """The record as stored: a secret in a title, a path or a config value never reaches the file."""
    return replace(
        rec,
        cwd=redact_text(rec.cwd),
        title=_redact_optional(rec.title),
        adapter=redact_text(rec.adapter),
        mode=_redact_optional(rec.mode),
        config=redact(rec.config),
        permissions=redact(rec.permissions),
        additional_dirs=tuple(redact_text(path) for path in rec.additional_dirs),
        launch=redact(rec.launch),
    )


def default_path() -> Path:
    """Where the journal lives unless configured: the user data dir of "acp-server"."""
    return Path(platformdirs.user_data_dir("acp-server", appauthor=False)) / "journal.db"


class Journal:
    """Open with `await Journal.open(path)`; close with `close()` or `async with`.

    Reads see your writes: every read first commits what `append` has queued. Only `flush`
    and durable appends raise when a batch could not be committed; otherwise it is logged.
    """

    default_path = staticmethod(default_path)

    def __init__(self, path: Path, write: aiosqlite.Connection, read: aiosqlite.Connection) -> None:
        self.path = path
        self.recovered_runs: tuple[str, ...] = ()
        self._checkpoints = Checkpointer(read)
        self._write = WriteConnection(write, path, wrote=self._checkpoints.wrote)
        self._read = read
        self._committer = GroupCommitter(self._commit_batch)
        self._runs = OpenRuns(self._write)
        self._inline: sqlite3.Connection | None = None
        self._closed = False

    @classmethod
    async def open(cls, path: str | os.PathLike[str]) -> Journal:
        """Open (creating 0600, migrating) the file, recover runs of dead processes, start the writer.
        A file that cannot be used (not a database, read-only, disk full ...) raises `JournalFileError`."""
        if os.fspath(path) in ("", ":memory:"):
            raise ValueError("the journal needs a file: its connections must share one database")
        file = Path(path)
        with classified(file):
            private_database(file, own_dir=file.parent == default_path().parent)
            write = await connect(file, autocheckpoint=False)
            try:
                read = await connect(file, readonly=True)
            except BaseException:
                await write.close()
                raise
            journal = cls(file, write, read)
            try:
                await journal._prepare()
                tighten_database(file)
            except BaseException:
                if journal._inline is not None:
                    journal._inline.close()
                await read.close()
                await write.close()
                raise
        journal._committer.start()
        journal._checkpoints.start()
        return journal

    async def _prepare(self) -> None:
        if await schema.user_version(self._write.conn) != schema.SCHEMA_VERSION:
            await self._write.transaction(schema.migrate)
        await self._write.conn.execute(TOUCH_PARENTS)
        self._inline = inline_connection(self.path)
        self._inline.execute(TOUCH_PARENTS)
        self.recovered_runs = await self.recover_runs()

    async def recover_runs(self, session_id: str | None = None) -> tuple[str, ...]:
        """Mark `interrupted` the running runs (of one session, or all) whose owner process is
        gone: at open, and before a replay, so no replay shows a dead run as still going."""
        self._check_open()
        return await recover(self._write, session_id)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Commit what is queued and close both connections; calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._committer.close()
            await self._runs.close()
            await self._checkpoints.close()
        finally:
            if self._inline is not None:
                self._inline.close()
            await self._read.close()
            await self._write.close()

    # --- sessions -------------------------------------------------------------------------

    async def create_session(self, rec: SessionRecord) -> SessionRecord:
        """Store a new session (timestamps of 0.0 become now); an existing id raises ValueError."""
        self._check_open()
        now = time.time()
        stored = _redacted_session(replace(rec, created_at=rec.created_at or now, updated_at=rec.updated_at or now))
        marks = ",".join("?" * len(session_params(stored)))

        async def insert(conn: aiosqlite.Connection) -> None:
            sql = f"INSERT INTO sessions ({SESSION_COLUMNS}) VALUES ({marks})"  # noqa: S608
            await conn.execute(sql, session_params(stored))

        try:
            await self._write.transaction(insert)
        except sqlite3.IntegrityError:
            raise ValueError(f"session {rec.id!r} already exists") from None
        return stored

    async def update_session(self, session_id: str, **fields: Any) -> SessionRecord | None:
        """Change title, mode, config, permissions or additional_dirs; None if no such session."""
        self._check_open()
        unknown = set(fields) - set(_SESSION_FIELDS)
        if unknown:
            raise TypeError(f"update_session() cannot change {', '.join(sorted(unknown))}")
        sets = [f"{_SESSION_FIELDS[name][0]} = ?" for name in fields]
        values = [_SESSION_FIELDS[name][1](value) for name, value in fields.items()]
        sql = f"UPDATE sessions SET {', '.join([*sets, 'updated_at = max(updated_at, ?)'])} WHERE id = ?"  # noqa: S608

        async def update(conn: aiosqlite.Connection) -> int:
            cursor = await conn.execute(sql, (*values, time.time(), session_id))
            return cursor.rowcount

        try:
            if not await self._write.transaction(update):
                return None
        except JournalFileError as exc:
            await self._runs.refused(exc, session_id=session_id)
            raise
        return await self.get_session(session_id)

    async def fork_session(
        self, parent_id: str, rec: SessionRecord, *, transcript: TranscriptSaved | None = None
    ) -> int:
        """Store `rec` as a fork of `parent_id`: its finished runs and their events copied
        (`journal.fork`), `transcript` (the agent's own fork) after them; returns how many runs.
        LookupError when the parent is unknown."""
        self._check_open()
        await self._sync()  # the parent's queued events belong to the runs being copied
        now = time.time()
        stored = _redacted_session(replace(rec, created_at=rec.created_at or now, updated_at=rec.updated_at or now))
        saved = None if transcript is None else storable(_JSON.encode(redact(encode_event(transcript)[1])))
        return await self._write.run(lambda conn: copy_session(conn, parent_id, stored, SESSION_COLUMNS, saved))

    async def get_session(self, session_id: str) -> SessionRecord | None:
        await self._sync()
        rows = await self._fetch(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,))  # noqa: S608
        return session_from_row(rows[0]) if rows else None

    async def list_sessions(
        self, *, cwd: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> tuple[list[SessionRecord], str | None]:
        """Sessions, most recently updated first, and the cursor of the next page (None at the end).

        `cwd` is redacted as stored cwds are, so a directory whose name looks like a secret matches.
        """
        await self._sync()
        if limit < 1:
            raise ValueError("limit must be at least 1")
        where: list[str] = []
        params: list[object] = []
        if cwd is not None:
            where.append("cwd = ?")
            params.append(redact_text(cwd))
        if cursor is not None:
            where.append("(updated_at, id) < (?, ?)")
            params.extend(decode_cursor(cursor))
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        sql = f"SELECT {SESSION_COLUMNS} FROM sessions {clause} ORDER BY updated_at DESC, id DESC LIMIT ?"  # noqa: S608
        rows = await self._fetch(sql, (*params, limit + 1))
        page = [session_from_row(row) for row in rows[:limit]]
        more = len(rows) > limit
        return page, encode_cursor(page[-1].updated_at, page[-1].id) if more else None

    async def delete_session(self, session_id: str) -> bool:
        """Delete a session with its runs and events; False if there was none."""
        await self._sync()

        async def delete(conn: aiosqlite.Connection) -> int:
            cursor = await conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
            return cursor.rowcount

        return bool(await self._write.transaction(delete))

    # --- runs -----------------------------------------------------------------------------

    async def start_run(self, *, run_id: str, session_id: str) -> None:
        """Record a new running run as the session's next; committed before it returns."""
        self._check_open()
        now = time.time()

        async def insert(conn: aiosqlite.Connection) -> None:
            await conn.execute(
                "INSERT INTO runs (id, session_id, seq_no, status, started_at, owner_pid, owner_token) "
                "SELECT ?, ?, coalesce(max(seq_no), -1) + 1, 'running', ?, ?, ? "
                "FROM runs WHERE session_id = ?",
                (run_id, session_id, now, os.getpid(), owners.own_token(), session_id),
            )
            await conn.execute("UPDATE sessions SET updated_at = max(updated_at, ?) WHERE id = ?", (now, session_id))

        try:
            await self._write.transaction(insert)
        except sqlite3.IntegrityError as exc:
            if "FOREIGN KEY" in str(exc):
                raise LookupError(f"no session {session_id!r}") from None
            raise ValueError(f"run {run_id!r} already exists") from None
        self._runs.started(run_id, session_id)

    async def finish_run(
        self, run_id: str, state: RunState | str, *, stop_reason: str | None = None, error: str | None = None
    ) -> None:
        """Record how a run ended (after committing its queued events); durable on return."""
        self._check_open()
        final = normalize_state(state)
        if final is RunState.RUNNING:
            raise ValueError("finish_run() needs a terminal state")
        await self._sync()  # the run's events before its end; their failures were already reported
        broken = self._runs.broken(run_id)
        if broken is not None:  # however it ended, some of it is missing
            final, error = RunState.ERROR, broken

        async def update(conn: aiosqlite.Connection) -> int:
            cursor = await conn.execute(
                "UPDATE runs SET status = ?, stop_reason = ?, error = ?, ended_at = ? WHERE id = ?",
                (final.value, _redact_optional(stop_reason), storable(_redact_optional(error)), time.time(), run_id),
            )
            return cursor.rowcount

        try:
            found = await self._write.transaction(update)
        except JournalFileError as exc:
            await self._runs.refused(exc, run_id=run_id)
            raise
        self._runs.finished(run_id)
        if not found:
            raise LookupError(f"no run {run_id!r}")

    async def runs(self, session_id: str) -> list[RunRecord]:
        """The session's runs in order."""
        await self._sync()
        rows = await self._fetch(f"SELECT {RUN_COLUMNS} FROM runs WHERE session_id = ? ORDER BY seq_no", (session_id,))  # noqa: S608
        return [run_from_row(row) for row in rows]

    async def get_run(self, run_id: str) -> RunRecord | None:
        await self._sync()
        rows = await self._fetch(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,))  # noqa: S608
        return run_from_row(rows[0]) if rows else None

    async def run_ids_starting(self, prefix: str, *, limit: int) -> list[str]:
        """The ids of up to `limit` runs that start with `prefix`, in order."""
        await self._sync()
        sql = "SELECT id FROM runs WHERE substr(id, 1, ?) = ? ORDER BY id LIMIT ?"
        return [row[0] for row in await self._fetch(sql, (len(prefix), prefix, limit))]

    # --- events ---------------------------------------------------------------------------

    async def append(self, envelope: Envelope, *, durable: bool = False, redacted: bool = False) -> None:
        """Queue one event (redacted, unless the caller did that with `redact.RunRedactor`, as
        the server's publish path does: `redacted`) for the next group commit.

        With `durable` (the server's every append: it writes the event to the editor next),
        or for an event durable by `journal.durability` (a prompt, a tool start or dispatch, a
        permission, the run's end), returns only once committed, and raises if the database
        refused it; otherwise at once, the batch being committed within `writer.WINDOW`.
        """
        self._check_open()
        kind, payload = encode_event(envelope.event)
        item = PendingEvent(
            run_id=envelope.run_id,
            session_id=envelope.session_id,
            seq=envelope.seq,
            type=kind,
            created_at=envelope.created_at or time.time(),
            terminal=kind == "done",
            payload=storable(_JSON.encode(payload if redacted else redact(payload))),
        )
        durable = durable or is_durable(envelope.event)
        if durable and self._committed_inline(item):
            return
        waiter = self._committer.submit(item, durable=durable)
        if waiter is not None:
            try:
                await waiter
            except JournalFileError as exc:
                await self._runs.refused(exc, session_id=envelope.session_id)
                raise
        elif self._committer.backlog >= MAX_BACKLOG:
            await self._committer.flush(raise_error=False)  # back-pressure: never queue without bound

    async def flush(self) -> None:
        """Commit every event appended so far (raises if their batch failed)."""
        self._check_open()
        await self._committer.flush()

    async def events(
        self, session_id: str | None = None, *, run_id: str | None = None, after: str | int | None = None
    ) -> AsyncIterator[EventRecord]:
        """Stored events in order (runs by session order, then seq), streamed page by page.

        `after` is an event id `run_id:seq` (resume strictly after it) or, with `run_id`, a seq.
        Bad arguments raise ValueError (at the first iteration: this is an async generator).
        """
        await self._sync()
        with classified(self.path):
            span = await replay.resolve_span(self._read, session_id=session_id, run_id=run_id, after=after)
            if span is None:
                return
            async for record in replay.stream(self._read, span):
                yield record

    async def history(self, session_id: str) -> Conversation:
        """The conversation (prompts, each run's agent text, the agent's own transcript) to restore an agent."""
        await self._sync()
        with classified(self.path):
            return await replay.conversation(self._read, session_id)

    # --- the per-run cache (journal.cache) -------------------------------------------------

    async def cached_runs(self, session_id: str, variant: str) -> AsyncIterator[CachedRun]:
        """The session's runs in order, each with its cached text of `variant` if still current."""
        await self._sync()
        async for entry in cache.cached_runs(self._read, session_id, variant):
            yield entry

    async def cache_runs(self, variant: str, entries: Sequence[tuple[RunRecord, str]]) -> None:
        """Keep texts derived from finished runs, one transaction; a run changed since is skipped.
        Not redacted again: they come from events that were (journal.cache)."""
        self._check_open()
        await self._write.run(lambda conn: cache.store(conn, variant, entries))

    async def replay_pages(self, session_id: str, first: int, last: int) -> AsyncIterator[list[replay.Replayed]]:
        """The events of the session's runs `first` to `last` (`seq_no`), in order, page by page,
        as `(run_id, seq, event)`: a replay's view, without the rest of their records."""
        await self._sync()
        async for page in replay.event_pages(self._read, replay.runs_span(session_id, first, last)):
            yield page

    # --- internals ------------------------------------------------------------------------

    def _committed_inline(self, item: PendingEvent) -> bool:
        """Commit one event here, on the loop, when no other write is queued or under way: one
        statement that does not wait for a lock (another process's write, a checkpoint of
        SQLite's own). False when it did not: anything unusual (a lock, a duplicate, an unknown
        run, a full disk) takes the queued path, which waits, retries and says what went wrong."""
        if self._inline is None or not self._committer.idle or self._write.busy:
            return False
        try:
            changes = self._inline.total_changes
            if write_batch(self._inline, [item]):
                return False
            self._write.wrote(self._inline.total_changes - changes)
        except sqlite3.Error:  # a ProgrammingError too, on another thread than the loop's
            return False
        return True

    async def _commit_batch(self, items: list[PendingEvent]) -> dict[int, Exception]:
        try:
            return await self._write.run(lambda conn: write_batch(conn, items))
        except sqlite3.IntegrityError:
            # A duplicate (run_id, seq) in the batch: redo it row by row so only that one fails.
            return await self._write.run(lambda conn: write_batch(conn, items, one_by_one=True))

    async def _fetch(self, sql: str, params: tuple[object, ...]) -> list[sqlite3.Row]:
        with classified(self.path):
            return list(await self._read.execute_fetchall(sql, params))

    async def _sync(self) -> None:
        """Wait for queued events before reading; a failed batch was already logged."""
        self._check_open()
        await self._committer.flush(raise_error=False)

    def _check_open(self) -> None:
        if self._closed:
            raise JournalClosedError("the journal is closed")
