"""A journal that cannot be used is said in one line naming the file, what is wrong and what to do:
at start-up (serving, `sessions`, `show`, a runner) on stderr with exit 2 and no traceback; while
serving (disk full, made read-only) as the JSON-RPC error the editor shows, the server serving on
and the cut-short run ending as an error rather than left `running`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from harness import RemoteError, running
from runner_fronts import Front, short_runtime_dir

from acp_server.acp.handlers import AcpAgent
from acp_server.protocol import methods
from acp_server.rpc.errors import INTERNAL_ERROR
from adapters.scripted import ScriptedAdapter
from journal import Journal, RunState, SessionRecord

NOBODY = ("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups")
NOT_A_DATABASE = "is not a SQLite database; move it aside or pass --db FILE"
SCRIPT = {
    "scenarios": [
        {
            "match": "edit",
            "steps": [{"tool": "Edit notes", "kind": "edit", "ask": True, "result": "ok"}, {"say": "done"}],
        },
        {"match": "", "steps": [{"say": "noted"}]},
    ]
}


def acp_server(*args: str, cwd: Path, user: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}},
    }
    return subprocess.run(
        [*user, sys.executable, "-m", "acp_server", *args],
        input=json.dumps(init) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    return done.stderr


def stored_journal(path: Path, sessions: int) -> None:
    async def fill() -> None:
        async with await Journal.open(path) as journal:
            for n in range(sessions):
                await journal.create_session(SessionRecord(id=f"s{n}", cwd="/work/" + "x" * 500, adapter="echo"))

    anyio.run(fill)


@pytest.mark.parametrize(
    "command", [("--agent", "echo"), ("sessions",), ("show", "sess_1"), ("runs", "sess_1")], ids=" ".join
)
def test_a_file_that_is_not_a_database_is_named_in_one_line_at_start_up(tmp_path, command):
    db = tmp_path / "journal.db"
    db.write_text("my shopping list\n" * 100)
    line = one_line(acp_server(*command, "--db", str(db), cwd=tmp_path))
    assert line == f"acp-server: the journal {db} {NOT_A_DATABASE}\n"
    assert db.read_text() == "my shopping list\n" * 100


def test_a_truncated_journal_is_reported_as_damaged(tmp_path):
    db = tmp_path / "journal.db"
    stored_journal(db, sessions=300)
    with open(db, "r+b") as file:
        file.truncate(os.path.getsize(db) // 4)
    line = one_line(acp_server("sessions", "--db", str(db), cwd=tmp_path))
    damaged = "is damaged (database disk image is malformed); move it aside or pass --db FILE"
    assert line == f"acp-server: the journal {db} {damaged}\n"


def test_a_directory_given_as_the_journal_is_reported_as_such(tmp_path):
    line = one_line(acp_server("--agent", "echo", "--db", str(tmp_path), cwd=tmp_path))
    assert line == f"acp-server: the journal {tmp_path} is a directory; pass --db with the path of a file\n"


def test_a_journal_whose_directory_cannot_be_made_is_reported_with_that_directory(tmp_path):
    (tmp_path / "notes").write_text("a file, not a directory")
    db = tmp_path / "notes" / "sub" / "journal.db"
    line = one_line(acp_server("--agent", "echo", "--db", str(db), cwd=tmp_path))
    assert line.startswith(f"acp-server: the journal {db} cannot be created ({tmp_path / 'notes'}")
    assert line.endswith("; pass --db FILE in a directory this user can write\n")


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to act as nobody")
def test_a_read_only_journal_is_reported_as_read_only(tmp_path):
    folder = Path(short_runtime_dir())  # every user may enter /tmp; pytest's directories are 0700
    try:
        db = folder / "journal.db"
        stored_journal(db, sessions=1)
        folder.chmod(0o755)
        os.chown(folder, 65534, 65534)
        os.chown(db, 65534, 65534)
        db.chmod(0o400)
        line = one_line(acp_server("--agent", "echo", "--db", str(db), cwd=folder, user=NOBODY))
        assert line == (
            f"acp-server: the journal {db} is read-only; make it and its directory writable by this user, "
            "or pass --db FILE\n"
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_front_whose_runner_finds_a_bad_journal_says_so_from_the_runners_log(tmp_path, monkeypatch):
    run_dir = short_runtime_dir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", run_dir)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    db = tmp_path / "journal.db"
    db.write_text("not a journal")
    try:
        front = Front("--agent", "echo", "--db", str(db), cwd=str(tmp_path))
        assert front.wait(timeout=60) == 1
        stderr = front.stderr.decode()
        assert f"acp-server: the journal {db} {NOT_A_DATABASE}" in stderr and "Traceback" not in stderr
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


# --- while serving -------------------------------------------------------------------------------


@asynccontextmanager
async def serving(db: Path):
    journal = await Journal.open(db)
    try:
        async with running(AcpAgent(ScriptedAdapter.from_data(SCRIPT), journal=journal)) as editor:
            await editor.initialize()
            yield editor, journal
    finally:
        await journal.close()


async def on_write_connections(journal: Journal, pragma: str) -> None:
    """The test hook (no root, no tiny file system needed): a per-connection pragma on both of the
    journal's write connections, the group commit's and the one-event commits' on the loop."""
    await journal._write.conn.execute(pragma)
    assert journal._inline is not None
    journal._inline.execute(pragma)


async def fill_the_disk(journal: Journal) -> None:
    """SQLite's own page limit on the journal's write connections: as a full disk, new pages fail."""
    [(pages,)] = await journal._write.conn.execute_fetchall("PRAGMA page_count")
    await on_write_connections(journal, f"PRAGMA max_page_count = {pages}")


async def test_a_full_disk_during_a_turn_is_said_as_such_the_run_ends_failed_and_the_server_serves_on(tmp_path):
    db = tmp_path / "journal.db"
    async with serving(db) as (editor, journal):
        session = await editor.new_session(tmp_path)
        await fill_the_disk(journal)
        with pytest.raises(RemoteError) as failed:
            await editor.prompt(session, "remember this: " + "x" * 100_000)
        assert failed.value.code == INTERNAL_ERROR
        assert failed.value.message == (
            f"Journal error: the journal {db} cannot be written: the disk is full; free some space"
        )
        [run] = await journal.runs(session)
        assert run.status is RunState.ERROR
        assert run.error == "the journal could not store all of this run: it cannot be written: the disk is full"
        listed = await editor.request("session/list", {})
        assert [s["sessionId"] for s in listed["sessions"]] == [session]
        await on_write_connections(journal, "PRAGMA max_page_count = 1073741823")  # space again
        assert (await editor.prompt(session, "and now?"))["stopReason"] == "end_turn"


async def test_a_journal_made_read_only_mid_turn_has_the_run_ended_as_an_error_once_it_takes_writes(tmp_path):
    db = tmp_path / "journal.db"
    async with serving(db) as (editor, journal):
        session = await editor.new_session(tmp_path)

        async def read_only_then_allow(params):
            await on_write_connections(journal, "PRAGMA query_only = ON")  # as a file made read-only
            return await editor.allow_once(params)

        editor.handlers[methods.REQUEST_PERMISSION] = read_only_then_allow
        with pytest.raises(RemoteError) as failed:
            await editor.prompt(session, "edit the notes")
        assert failed.value.message == (
            f"Journal error: the journal {db} is read-only; make it and its directory writable by this user, "
            "or pass --db FILE"
        )
        assert [run.status for run in await journal.runs(session)] == [RunState.RUNNING]  # nothing could say otherwise
        await on_write_connections(journal, "PRAGMA query_only = OFF")
    async with await Journal.open(db) as reopened:
        [run] = await reopened.runs(session)
        assert (run.status, run.error) == (
            RunState.ERROR,
            "the journal could not store all of this run: it is read-only",
        )
