"""The agent a session was made with, kept in the journal for `prompt --session`: stored with
the session, read back as written, and redacted like the rest of the session record."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from journal.records import SessionRecord
from journal.store import Journal

KEY = "sk-abcdefghijklmnopqrstuvwxyz0123"


async def test_a_sessions_agent_and_settings_are_kept_and_read_back(tmp_path: Path) -> None:
    journal = await Journal.open(tmp_path / "j.db")
    try:
        launch = {"agent": "acp", "command": ["my-agent", "--acp"], "script": "/w/s.json"}
        await journal.create_session(SessionRecord(id="sess_a", cwd="/w", adapter="acp", launch=launch))
        stored = await journal.get_session("sess_a")
    finally:
        await journal.close()
    assert stored is not None and stored.launch == launch


async def test_a_secret_in_the_agents_settings_never_reaches_the_file(tmp_path: Path) -> None:
    journal = await Journal.open(tmp_path / "j.db")
    try:
        launch = {"agent": "acp", "command": ["my-agent", "--api-key", KEY]}
        await journal.create_session(SessionRecord(id="sess_b", cwd="/w", launch=launch))
    finally:
        await journal.close()
    raw = sqlite3.connect(tmp_path / "j.db").execute("SELECT launch_json FROM sessions").fetchone()[0]
    assert KEY not in raw and "my-agent" in raw
