"""Old runner files do not pile up: a runner, as it starts, removes the logs of runners not
started for a week, empty logs over an hour old, and locks with no socket and no log that nobody
holds; a listening runner's files, its own, a recent log and a held lock stay. Real files, a real
runner started by a real front."""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from pathlib import Path

import pytest
from runner_fronts import Front, short_runtime_dir, stop_runners

from acp_server.cli.sweep import sweep

DAY = 24 * 3600


def aged(path: Path, seconds: float, text: str = "") -> Path:
    path.write_text(text)
    then = time.time() - seconds
    os.utime(path, (then, then))
    return path


def test_sweep_removes_what_is_old_and_keeps_what_is_live_recent_or_held(tmp_path):
    logs, root = tmp_path / "data", tmp_path / "run"
    logs.mkdir()
    root.mkdir()
    old = aged(logs / "runner-old.log", 8 * DAY, "started\n")
    empty = aged(logs / "runner-empty.log", 2 * 3600)
    recent = aged(logs / "runner-recent.log", 3600, "started\n")
    live = aged(logs / "runner-live.log", 30 * DAY, "started\n")
    (root / "runner-live.sock").write_text("")
    own = aged(logs / "runner-own.log", 30 * DAY)
    stale_lock = aged(root / "runner-gone.lock", 2 * 3600)
    fresh_lock = aged(root / "runner-fresh.lock", 60)
    held_lock = aged(root / "runner-held.lock", 2 * 3600)
    logged_lock = aged(root / "runner-recent.lock", 2 * 3600)
    fd = os.open(held_lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        removed = sweep(logs=logs, root=root, keep="runner-own")
    finally:
        os.close(fd)
    assert sorted(removed) == sorted([old, empty, stale_lock])
    assert all(p.exists() for p in (recent, live, own, fresh_lock, held_lock, logged_lock))


@pytest.fixture
def runner_dirs(tmp_path, monkeypatch):
    run_dir = short_runtime_dir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", run_dir)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    yield Path(run_dir) / "acp-server", tmp_path / "data" / "acp-server"
    stop_runners()
    shutil.rmtree(run_dir, ignore_errors=True)


def test_a_runner_that_starts_removes_old_runner_logs_and_locks(tmp_path, runner_dirs):
    root, logs = runner_dirs
    root.mkdir(parents=True, mode=0o700)
    logs.mkdir(parents=True, mode=0o700)
    old = [aged(logs / f"runner-{n:016x}.log", 8 * DAY, "x\n") for n in range(3)]
    empty = aged(logs / "runner-00000000000000ee.log", 2 * 3600)
    lock = aged(root / "runner-00000000000000aa.lock", 2 * 3600)
    front = Front("--agent", "echo", "--db", str(tmp_path / "j.db"), cwd=str(tmp_path))
    try:
        front.start_session(str(tmp_path))  # the runner is up: it swept before it listened
    finally:
        front.kill()
    assert not any(p.exists() for p in [*old, empty, lock])
    assert len(list(logs.glob("runner-*.log"))) == 1  # its own
