"""What acp-server writes for itself is the user's alone: the journal with its -wal and -shm, its
directory, the wire trace, the log file, runner mode's directories and logs. Directories 0700,
files 0600, an older looser one tightened once, a symlink or another user's path refused; a
second user (`nobody`, via setpriv, when the tests run as root) cannot read any of it. A runtime
directory another user made first sends runners to a private one the user's fronts all find."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import running
from runner_fronts import Front, cli, gone, runners, short_runtime_dir

from acp_server.acp.handlers import AcpAgent
from acp_server.runner.front import RunnerStartError, start_runner
from acp_server.runner.paths import data_dir, place_for, runtime_dir
from adapters.echo import EchoAdapter
from journal import Journal, JournalFileError
from journal.private import UnsafePathError, private_dir

NOBODY = ("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups")
as_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="acting as a second user needs root and setpriv"
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def as_nobody(*command: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NOBODY, *map(str, command)], capture_output=True, text=True, timeout=30)


def serve(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A server that reads EOF at once and exits, with `args`."""
    return subprocess.run(
        [sys.executable, "-m", "acp_server", "--agent", "echo", *args],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


@pytest.fixture
def shared(monkeypatch) -> Iterator[Path]:
    """A directory every user may enter (pytest's own are 0700), holding the user data dir."""
    path = Path(tempfile.mkdtemp(prefix="acp-shared-"))
    path.chmod(0o755)
    monkeypatch.setenv("XDG_DATA_HOME", str(path / "data"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def one_turn(journal: Journal, cwd: Path) -> None:
    async with running(AcpAgent(EchoAdapter(), journal=journal)) as editor:
        await editor.initialize()
        session = await editor.new_session(cwd)
        await editor.prompt(session, "my secret plans")


async def test_the_journal_its_wal_and_shm_and_its_directory_are_the_users_alone_after_a_turn(shared):
    journal = await Journal.open(Journal.default_path())
    try:
        await one_turn(journal, shared)
        files = [journal.path, *(journal.path.with_name(journal.path.name + s) for s in ("-wal", "-shm"))]
        assert [(file.name, mode(file)) for file in files] == [(file.name, 0o600) for file in files]
        assert mode(journal.path.parent) == 0o700
    finally:
        await journal.close()


@as_root
async def test_another_user_cannot_read_the_journal_or_list_its_directory(shared):
    journal = await Journal.open(Journal.default_path())
    try:
        await one_turn(journal, shared)
        assert "Permission denied" in as_nobody("cat", journal.path).stderr
        assert "Permission denied" in as_nobody("cat", journal.path.with_name("journal.db-wal")).stderr
        assert "Permission denied" in as_nobody("ls", journal.path.parent).stderr
    finally:
        await journal.close()


async def test_an_older_journal_open_to_other_users_is_tightened_once_with_a_warning(shared, caplog):
    folder = Journal.default_path().parent
    folder.mkdir(parents=True, mode=0o755)
    folder.chmod(0o755)
    with sqlite3.connect(folder / "journal.db") as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE old (x)")
    (folder / "journal.db").chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="journal.private"):
        await (await Journal.open(Journal.default_path())).close()
        assert mode(folder) == 0o700 and mode(folder / "journal.db") == 0o600
        assert [r.getMessage() for r in caplog.records] == [
            f"{folder} was open to other users (mode 0755); it is now 0700",
            f"{folder / 'journal.db'} was open to other users (mode 0644); it is now 0600",
        ]
        caplog.clear()
        await (await Journal.open(Journal.default_path())).close()
        assert caplog.records == []


async def test_a_user_chosen_directory_keeps_its_mode_while_the_journal_in_it_is_private(tmp_path):
    folder = tmp_path / "project"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    await (await Journal.open(folder / "journal.db")).close()
    assert (mode(folder), mode(folder / "journal.db")) == (0o755, 0o600)


async def test_a_journal_path_that_is_a_symlink_is_refused_and_what_it_points_to_is_untouched(tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("mine")
    (tmp_path / "journal.db").symlink_to(target)
    with pytest.raises(
        JournalFileError, match=r"journal\.db is a symbolic link; acp-server does not write through one"
    ):
        await Journal.open(tmp_path / "journal.db")
    assert target.read_text() == "mine" and mode(target) == 0o644


@as_root
async def test_a_journal_file_of_another_user_is_refused(tmp_path):
    (tmp_path / "journal.db").touch()
    os.chown(tmp_path / "journal.db", 65534, 65534)
    with pytest.raises(JournalFileError, match=r"journal\.db belongs to another user \(uid 65534\)"):
        await Journal.open(tmp_path / "journal.db")


@pytest.mark.parametrize("option", ["--trace", "--log-file"])
def test_a_symlink_planted_at_the_trace_or_log_path_is_refused_and_its_target_untouched(tmp_path, option):
    target = tmp_path / "victim.txt"
    target.write_text("precious\n")
    (tmp_path / "out.log").symlink_to(target)
    done = serve(option, str(tmp_path / "out.log"), cwd=tmp_path)
    assert done.returncode == 2
    assert f"{tmp_path / 'out.log'} is a symbolic link; acp-server does not write through one" in done.stderr
    assert "Traceback" not in done.stderr
    assert target.read_text() == "precious\n"


@as_root
def test_the_trace_and_the_log_file_are_created_0600_and_an_older_one_tightened(shared):
    trace, log = shared / "trace.jsonl", shared / "server.log"
    log.write_text("an older log\n")
    log.chmod(0o644)
    done = serve("--trace", str(trace), "--log-file", str(log), "--log-level", "info", cwd=shared)
    assert done.returncode == 0, done.stderr
    assert (mode(trace), mode(log)) == (0o600, 0o600)
    assert log.read_text().startswith("an older log\n")
    assert "Permission denied" in as_nobody("cat", log).stderr and "Permission denied" in as_nobody("cat", trace).stderr


def test_a_runners_log_and_its_data_directory_are_private(tmp_path, monkeypatch):
    run_dir = short_runtime_dir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", run_dir)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    place = place_for({"agent": "no-such-agent"})
    try:
        with pytest.raises(RunnerStartError):
            start_runner(place, ["runner", "serve", "--agent", "no-such-agent", "--db", str(tmp_path / "j.db")])
        assert (mode(place.log), mode(data_dir()), mode(runtime_dir())) == (0o600, 0o700, 0o700)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def test_a_private_directory_is_never_a_symlink_nor_a_file(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "file").touch()
    with pytest.raises(UnsafePathError, match="link is a symbolic link"):
        private_dir(tmp_path / "link")
    with pytest.raises(UnsafePathError, match="file is not a directory"):
        private_dir(tmp_path / "file")


# --- the runtime directory of runner mode -----------------------------------------------------


@pytest.fixture
def temp_base(monkeypatch) -> Iterator[Path]:
    """No $XDG_RUNTIME_DIR, a temp dir of the test's own (as $TMPDIR) and a short cache dir."""
    base = Path(tempfile.mkdtemp(prefix="acpt-", dir="/tmp"))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(base))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    monkeypatch.setenv("XDG_CACHE_HOME", str(base / "c"))
    yield base
    shutil.rmtree(base, ignore_errors=True)


def planted(base: Path, how: str) -> Path:
    """`acp-server-UID` in the temp dir, made first by another user (or a symlink planted there)."""
    path = base / f"acp-server-{os.getuid()}"
    if how == "symlink":
        (base / "attacker").mkdir()
        path.symlink_to(base / "attacker")
    else:
        path.mkdir(mode=0o777)
        os.chown(path, 65534, 65534)
    return path


@pytest.mark.parametrize("how", ["symlink", pytest.param("another user's", marks=as_root)])
def test_a_runtime_directory_planted_by_another_user_is_left_for_a_private_one_with_one_line(temp_base, how, caplog):
    path = planted(temp_base, how)
    with caplog.at_level(logging.WARNING, logger="acp_server.runner.paths"):
        found = runtime_dir()
    assert found == temp_base / "c" / "acp-server" / "run" and mode(found) == 0o700
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"{path} ") and line.endswith(f"; runners use {found} instead")
    assert list((temp_base / "attacker").iterdir() if how == "symlink" else path.iterdir()) == []


@as_root
def test_fronts_and_runner_status_find_the_runner_in_the_fallback_directory(temp_base, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    planted(temp_base, "another user's")
    front = Front("--agent", "echo", "--db", str(tmp_path / "journal.db"), cwd=str(tmp_path))
    try:
        front.start_session(str(tmp_path))
        [runner] = runners()
        assert runner["socket"].startswith(str(temp_base / "c" / "acp-server" / "run"))
        front.close_stdin()
        assert front.wait() == 0
        assert "runners use" in front.stderr.decode() and "Traceback" not in front.stderr.decode()
    finally:
        front.kill()
        started = [r["pid"] for r in runners()]
        cli("runner", "stop")
        for pid in started:
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)
