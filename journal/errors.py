"""The journal's own exceptions; callers catch these, never sqlite3's.

`classified` turns what SQLite and the file system say about the journal's file (not a
database, damaged, read-only, disk full, a directory, a symlink ...) into a `JournalFileError`
whose message names the file, what is wrong and what to do, in one line.
"""

from __future__ import annotations

import contextlib
import errno
import sqlite3
from collections.abc import Generator
from pathlib import Path

from journal.private import UnsafePathError


class JournalError(Exception):
    """Base of the journal's exceptions."""


class JournalClosedError(JournalError):
    """The journal was used after `close()`."""


class JournalVersionError(JournalError):
    """The database was written by a newer journal schema than this code knows."""


class JournalFileError(JournalError):
    """The journal's file cannot be used: `problem` says why, `remedy` what to do."""

    def __init__(self, path: Path, problem: str, remedy: str) -> None:
        super().__init__(f"the journal {path} {problem}; {remedy}")
        self.path = path
        self.problem = problem
        self.remedy = remedy


ELSEWHERE = "move it aside or pass --db FILE"
WRITABLE = "make it and its directory writable by this user, or pass --db FILE"
FULL = "cannot be written: the disk is full"
READ_ONLY = ("is read-only", WRITABLE)

# SQLite's primary result codes that are about the file, not about the statement.
_SQLITE: dict[int, tuple[str, str]] = {
    sqlite3.SQLITE_NOTADB: ("is not a SQLite database", ELSEWHERE),
    sqlite3.SQLITE_CORRUPT: ("is damaged (database disk image is malformed)", ELSEWHERE),
    sqlite3.SQLITE_FULL: (FULL, "free some space"),
    sqlite3.SQLITE_READONLY: READ_ONLY,
    sqlite3.SQLITE_PERM: ("cannot be opened: permission denied", WRITABLE),
    sqlite3.SQLITE_CANTOPEN: ("cannot be opened (unable to open database file)", WRITABLE),
    sqlite3.SQLITE_IOERR: (
        "cannot be read or written (disk I/O error)",
        "check the disk and the permissions of its files",
    ),
    sqlite3.SQLITE_BUSY: ("is locked by another process", "try again once it is done"),
    sqlite3.SQLITE_LOCKED: ("is locked by another process", "try again once it is done"),
}

_OS: dict[int, tuple[str, str]] = {
    errno.ENOSPC: (FULL, "free some space"),
    errno.EDQUOT: ("cannot be written: the disk quota is used up", "free some space"),
    errno.EACCES: ("cannot be opened: permission denied", WRITABLE),
    errno.EPERM: ("cannot be opened: permission denied", WRITABLE),
    errno.EROFS: ("is on a read-only file system", "pass --db FILE on a writable one"),
    errno.EISDIR: ("is a directory", "pass --db with the path of a file"),
}


def file_error(exc: BaseException, path: Path) -> JournalFileError | None:
    """What `exc` says about the journal at `path`; None for an error of a statement (a bug, a
    constraint), which the journal's own code handles or lets through."""
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        known = _SQLITE.get(code & 0xFF) if isinstance(code, int) else None
        if known is None:
            return None
        return JournalFileError(path, *known)
    if isinstance(exc, UnsafePathError):
        if exc.path == path:
            return JournalFileError(path, exc.problem, ELSEWHERE)
        return JournalFileError(path, f"cannot be used: {exc}", "pass --db FILE in a directory of this user's")
    if isinstance(exc, OSError):
        known = _OS.get(exc.errno or 0)
        if exc.filename is None or Path(exc.filename) == path:
            return JournalFileError(path, *(known or (f"cannot be opened ({exc.strerror or exc})", ELSEWHERE)))
        # Its directory: missing and not creatable, or a file where a directory should be.
        problem = f"cannot be created ({exc.filename}: {exc.strerror or exc})"
        return JournalFileError(path, problem, "pass --db FILE in a directory this user can write")
    return None


@contextlib.contextmanager
def classified(path: Path) -> Generator[None]:
    """Let the journal's file problems out as `JournalFileError`s, everything else unchanged."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        error = file_error(exc, path)
        if error is None:
            raise
        raise error from exc
