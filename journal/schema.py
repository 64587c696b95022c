"""The journal's tables and their numbered migrations, tracked in `PRAGMA user_version`.

Migration N is `MIGRATIONS[N - 1]`, a tuple of statements (not a script: `executescript`
would commit behind our back). `migrate` runs inside the caller's write transaction and
re-reads the version there, so two processes opening one new file apply it once.
"""

from __future__ import annotations

import aiosqlite

from journal.errors import JournalVersionError

_V1 = (
    """CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        cwd TEXT NOT NULL,
        title TEXT,
        adapter TEXT NOT NULL DEFAULT '',
        mode TEXT,
        config_json TEXT NOT NULL DEFAULT '{}',
        permissions_json TEXT NOT NULL DEFAULT '{}',
        additional_dirs_json TEXT NOT NULL DEFAULT '[]',
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    )""",
    "CREATE INDEX sessions_by_update ON sessions (updated_at, id)",
    "CREATE INDEX sessions_by_cwd ON sessions (cwd, updated_at, id)",
    """CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        seq_no INTEGER NOT NULL,
        status TEXT NOT NULL,
        stop_reason TEXT,
        error TEXT,
        started_at REAL NOT NULL,
        ended_at REAL,
        last_seq INTEGER,
        owner_pid INTEGER,
        owner_token TEXT,
        UNIQUE (session_id, seq_no)
    )""",
    "CREATE INDEX runs_running ON runs (status) WHERE status = 'running'",
    # run_no copies runs.seq_no so one index serves replay in session order (keyset pages).
    """CREATE TABLE events (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        session_id TEXT NOT NULL,
        run_no INTEGER NOT NULL,
        type TEXT NOT NULL,
        created_at REAL NOT NULL,
        terminal INTEGER NOT NULL DEFAULT 0,
        payload TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID""",
    "CREATE INDEX events_by_session ON events (session_id, run_no, seq)",
    """CREATE TRIGGER events_no_update BEFORE UPDATE ON events
       BEGIN SELECT RAISE(ABORT, 'journal events are append-only'); END""",
    # The cascade from a deleted session runs after its row is gone; any other delete aborts.
    """CREATE TRIGGER events_no_delete BEFORE DELETE ON events
       WHEN EXISTS (SELECT 1 FROM sessions WHERE id = OLD.session_id)
       BEGIN SELECT RAISE(ABORT, 'journal events are append-only'); END""",
)

# What a caller derived from a finished run (journal.cache): one row per run, replaced freely.
_V2 = (
    """CREATE TABLE run_cache (
        run_id TEXT PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
        variant TEXT NOT NULL,
        status TEXT NOT NULL,
        last_seq INTEGER,
        ended_at REAL,
        body TEXT NOT NULL
    )""",
)

# How the session's agent was started (`--agent` and its settings), so that a later `prompt
# --session` continues it with the same agent.
_V3 = ("ALTER TABLE sessions ADD COLUMN launch_json TEXT NOT NULL DEFAULT '{}'",)

MIGRATIONS: tuple[tuple[str, ...], ...] = (_V1, _V2, _V3)
SCHEMA_VERSION = len(MIGRATIONS)


async def user_version(conn: aiosqlite.Connection) -> int:
    rows = list(await conn.execute_fetchall("PRAGMA user_version"))
    return int(rows[0][0])


async def migrate(conn: aiosqlite.Connection) -> int:
    """Bring the schema to `SCHEMA_VERSION` inside the open transaction; returns the old version."""
    version = await user_version(conn)
    if version > SCHEMA_VERSION:
        raise JournalVersionError(
            f"journal schema {version} is newer than this server's {SCHEMA_VERSION}; upgrade acp-server"
        )
    for number in range(version + 1, SCHEMA_VERSION + 1):
        for statement in MIGRATIONS[number - 1]:
            await conn.execute(statement)
    if version != SCHEMA_VERSION:
        await conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION:d}")
    return version
