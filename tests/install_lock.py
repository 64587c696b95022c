"""A file lock that serializes installs (npm ci, venvs) across concurrent test runs on this
machine. The standard library only: `.ci/run` runs tests/agent_installs.py before any venv."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: installs are not serialized across concurrent runs
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def install_lock(name: str) -> Iterator[None]:
    if fcntl is None:
        yield
        return
    path = Path(tempfile.gettempdir()) / f"acp-server-tests-{os.getuid()}-{name}.lock"
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
