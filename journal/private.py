"""Files and directories only their owner may read: the journal and its directory, the log file,
the wire trace, runner mode's directories and logs (used by `journal` and `acp_server` alike).

Directories are 0700 and files 0600, as `~/.ssh` and shell history are, set on each one and never
through the process umask: the files an agent writes for the user keep their usual modes. A
symlink where one of ours should be, or one another user owns, is refused, never followed.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600
_OTHERS = 0o077  # the group's and everyone else's bits
_SYMLINK = "is a symbolic link; acp-server does not write through one"
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePathError(PermissionError):
    """A path that must be private is a symlink, not ours, or not what it should be."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        super().__init__(f"{os.fspath(path)} {problem}")
        self.path = Path(path)
        self.problem = problem


def private_dir(path: Path) -> Path:
    """`path` as a directory only we may enter: created 0700 (missing parents as usual), or an
    existing one of ours tightened to 0700 with one warning; another user's, or a symlink, refused."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=DIR_MODE, parents=True)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePathError(path, "is a symbolic link" if path.is_symlink() else "is not a directory") from None
        raise
    try:
        _own(fd, path)
    finally:
        os.close(fd)
    return path


def open_private_append(path: str | os.PathLike[str]) -> int:
    """A descriptor appending to `path`, created 0600 (an existing file of ours is tightened to 0600);
    a symlink there, or another user's file, is refused. A device (`/dev/null`) is written as it is."""
    try:
        fd = os.open(path, _APPEND, FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(path, _SYMLINK) from None
        raise
    try:
        _own(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


# The journal's files are checked and tightened through their paths, never by opening them: closing
# any descriptor of a file drops every POSIX lock this process holds on it, and SQLite relies on those.


def check_private(path: Path, *, create: bool) -> None:
    """A regular file of ours at `path`, or none (created empty and 0600 when `create`); a symlink
    or another user's file is refused. Its mode is left for `tighten`."""
    if create:
        try:
            os.close(os.open(path, _NEW, FILE_MODE))
        except FileExistsError:
            pass
        else:
            return
    with contextlib.suppress(FileNotFoundError):
        _ours(_regular(path), path)


def tighten(path: Path) -> int | None:
    """Take the group and other bits away from an existing file of ours; its old mode when it had
    any, for the caller's `say_tightened` (one line for a file and its companions)."""
    try:
        info = _regular(path)
    except FileNotFoundError:
        return None
    _ours(info, path)
    return _tighten(info, lambda mode: os.chmod(path, mode))


def say_tightened(path: str | os.PathLike[str], old: int | None) -> None:
    if old is not None:
        log.warning("%s was open to other users (mode %04o); it is now %04o", os.fspath(path), old, old & ~_OTHERS)


def _regular(path: Path) -> os.stat_result:
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePathError(path, _SYMLINK)
    if not stat.S_ISREG(info.st_mode):
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        raise UnsafePathError(path, "is not a regular file")
    return info


def _own(fd: int, path: str | os.PathLike[str]) -> None:
    info = os.fstat(fd)
    if stat.S_ISCHR(info.st_mode):
        return  # a device the user named (/dev/null, a terminal): not ours to chmod
    _ours(info, path)
    say_tightened(path, _tighten(info, lambda mode: os.fchmod(fd, mode)))


def _ours(info: os.stat_result, path: str | os.PathLike[str]) -> None:
    if info.st_uid != os.geteuid():
        raise UnsafePathError(path, f"belongs to another user (uid {info.st_uid})")


def _tighten(info: os.stat_result, chmod: Callable[[int], None]) -> int | None:
    mode = stat.S_IMODE(info.st_mode)
    if not mode & _OTHERS or not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        return None
    chmod(mode & ~_OTHERS)
    return mode
