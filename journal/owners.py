"""Which process owns a running run, and whether that process is still alive.

A run records its owner's pid and a token (boot id + the process's start time, from Linux
/proc), so a reused pid or a reboot reads as a dead owner. Where /proc is missing the token
is empty and only the pid is checked; where even that is unsafe (Windows, where signal 0
would be CTRL_C_EVENT) an owner always counts as alive: a run is never wrongly interrupted.
A zombie (killed, not yet reaped by its parent) is dead: it answers signal 0 all the same.
"""

from __future__ import annotations

import os
import sys
from functools import cache
from pathlib import Path


@cache
def own_token() -> str:
    return process_token(os.getpid())


def process_token(pid: int) -> str:
    """`boot_id:start_ticks` for a live pid on Linux; "" when it cannot be known."""
    try:
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""
    fields = _stat_fields(pid)
    return f"{boot_id}:{fields[19]}" if len(fields) > 19 else ""


def _stat_fields(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (field 3, the state, comes first);
    [] where that cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    # After the last ')': the command name may hold spaces and ')'.
    return stat.rpartition(")")[2].split()


def _exited(pid: int) -> bool:
    """A zombie (Z) or a dying process (X): it has ended, though its pid still answers."""
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] in ("Z", "X")


def is_alive(pid: int | None, token: str | None) -> bool:
    """Whether the process that wrote (pid, token) is still running."""
    if pid is None or pid <= 0:
        return False
    if pid == os.getpid():
        return not token or token == own_token()
    if sys.platform == "win32":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, owned by another user
    if _exited(pid):
        return False
    if not token:
        return True
    current = process_token(pid)
    return not current or current == token
