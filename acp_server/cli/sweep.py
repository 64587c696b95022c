"""Old runner files: every configuration gets a log (in the data directory) and a lock (beside
its socket), and nothing removed them, so they piled up (34 logs, half of them empty, and 33
locks after 25 minutes of tests). A runner sweeps them as it starts, keeping everything of a
runner that is listening and of its own configuration.

A log goes a week after its runner last started (a start appends to it), an empty one after an
hour. A lock goes once its configuration has no socket and no log left, is over an hour old and
nobody holds it: a front that starts a runner holds the lock while it does, and writes the log.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from pathlib import Path

log = logging.getLogger(__name__)

OLD_LOG = 7 * 24 * 3600.0  # seconds after its runner's last start
EMPTY_LOG = 3600.0
OLD_LOCK = 3600.0


def sweep(*, logs: Path, root: Path, keep: str, now: float | None = None) -> list[Path]:
    """Remove the old files of runners other than `keep`; returns what was removed."""
    now = time.time() if now is None else now
    removed = [path for path in sorted(logs.glob("runner-*.log")) if _old_log(path, root, keep, now)]
    for path in removed:
        path.unlink(missing_ok=True)
    for path in sorted(root.glob("runner-*.lock")):
        key = path.stem
        if key == keep or (root / f"{key}.sock").exists() or (logs / f"{key}.log").exists():
            continue
        if _age(path, now) > OLD_LOCK and _unlink_unheld(path):
            removed.append(path)
    if removed:
        log.info("removed %d old runner files", len(removed))
    return removed


def _old_log(path: Path, root: Path, keep: str, now: float) -> bool:
    if path.stem == keep or (root / f"{path.stem}.sock").exists():
        return False
    try:
        size = path.stat().st_size
    except OSError:
        return False
    age = _age(path, now)
    return age > OLD_LOG or (size == 0 and age > EMPTY_LOG)


def _age(path: Path, now: float) -> float:
    try:
        return now - path.stat().st_mtime
    except OSError:
        return 0.0


def _unlink_unheld(path: Path) -> bool:
    """Unlink the lock file if no front holds it (checked under the lock itself)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    try:
        path.unlink(missing_ok=True)
        return True
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
