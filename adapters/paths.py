"""The one path opener: every local file access of the server and its agents stays inside the
session's directories (cwd plus additional directories), however the path is spelled or swapped.

A path is first located with `realpath` (only a hint: the tree may change under us), then opened
from its root's descriptor following no symlink at all: `openat2(RESOLVE_BENEATH |
RESOLVE_NO_SYMLINKS)` where Linux has it, else an `O_NOFOLLOW` walk, one component at a time. So
a symlink inside the workspace is followed only when it leads to a place inside, and a directory
swapped for a symlink meanwhile makes the open fail (retried, then refused); it never leads out.

`target` is the one place where a path an agent gives becomes the path that is used: checked,
asked of the editor, shown in titles, `locations` and diffs. It is the path's real location
(every symlink below the root resolved, then `..`), so a spelling whose `..` would cancel a
symlink's name never names another file than the one checked.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
import sys
import threading
from collections.abc import Callable, Generator, Sequence
from typing import Any, TypeVar

from adapters.base import ToolRefused
from adapters.excerpt import read_lines
from adapters.frozen import frozen

T = TypeVar("T")

# A directory we only walk through (O_PATH: search permission is enough where Linux has it).
_DIR = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC
# A file we read: never blocking on a FIFO, never becoming our controlling terminal.
READ = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
# What a concurrent rename can make an open fail with; worth another try from the start.
_RACES = frozenset({errno.ELOOP, errno.EXDEV, errno.EAGAIN, errno.ENOTDIR, errno.EINVAL})
ATTEMPTS = 3


@frozen
class Place:
    """Where a path led when it was located: a root (its real path) and the names below it."""

    root: str
    parts: tuple[str, ...]

    @property
    def relative(self) -> str:
        return "/".join(self.parts) or "."


@frozen
class Target:
    """A path as it is used: `path`, absolute, is what is checked and what the editor is asked
    for; `shown` names the same place for people (relative to the cwd when it lies there)."""

    path: str
    shown: str


def target(path: str, *, cwd: str, roots: Sequence[str] = ()) -> Target:
    """Where `path` (relative to cwd) really is, beneath one of the roots (cwd when none are
    given): the root as the session names it, then the real names below it. A path whose
    spelling and real location disagree (`link/../x` where `link` points elsewhere) is taken as
    its real location, and shown as that. ToolRefused when it escapes the roots through `..`, a
    symlink or an absolute path. A check only: open through `opened`, which does not trust it."""
    try:
        place, named = _retried(lambda: _find(path, cwd, roots))
    except OSError as exc:
        raise ToolRefused(f"Cannot resolve {path}: {exc.strerror or exc}") from None
    absolute = os.path.join(named, *place.parts)
    return Target(absolute, place.relative if named == os.path.abspath(cwd) else absolute)


@contextlib.contextmanager
def opened(path: str, *, cwd: str, roots: Sequence[str] = (), flags: int = READ) -> Generator[tuple[int, Place]]:
    """A descriptor of `path` opened with `flags` inside the roots (cwd when none are given),
    closed on leaving, and where it was found. Raises ToolRefused when the path leads outside
    the roots, OSError when it cannot be opened (after retrying what a rename can cause)."""

    def attempt() -> tuple[int, Place]:
        place = _locate(path, cwd, roots)
        with _root(place) as root_fd:
            return _open_at(root_fd, place.parts, flags), place

    fd, place = _retried(attempt)
    try:
        yield fd, place
    finally:
        os.close(fd)


def read_text(
    path: str, *, cwd: str, roots: Sequence[str] = (), line: int | None = None, limit: int | None = None
) -> str:
    """The text of a file inside the roots (undecodable bytes replaced), from 1-based `line` for
    at most `limit` lines, read no further than those (`adapters.excerpt`); ToolRefused otherwise."""
    try:
        with opened(path, cwd=cwd, roots=roots) as (fd, _):
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                raise ToolRefused(f"{path} is a directory")
            if not stat.S_ISREG(mode):
                raise ToolRefused(f"Cannot read {path}: it is not a regular file")
            with open(fd, "rb", closefd=False) as f:
                return read_lines(f, line=line, limit=limit, name=path)
    except FileNotFoundError:
        raise ToolRefused(f"No such file: {path}") from None
    except OSError as exc:
        raise ToolRefused(f"Cannot read {path}: {exc.strerror or exc}") from None


def write_text(path: str, content: str, *, cwd: str, roots: Sequence[str] = ()) -> None:
    """Replace (or create) a file inside the roots, creating missing parent directories, through
    a symlink that stays inside, keeping the old file's mode. Readers see the old text or the
    new, never half of it; the temporary file lives in the target's directory. ToolRefused when
    it cannot be done."""
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolRefused(f"Cannot write {path}: the text is not valid Unicode") from None

    def attempt() -> None:
        place = _locate(path, cwd, roots)
        if not place.parts:
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        with _root(place) as root_fd:
            try:
                parent = _open_at(root_fd, place.parts[:-1], _DIR)
            except FileNotFoundError:
                parent = _directory(root_fd, place.parts[:-1], create=True)
        try:
            _replace_at(parent, place.parts[-1], data)
        finally:
            os.close(parent)

    try:
        _retried(attempt)
    except IsADirectoryError:
        raise ToolRefused(f"{path} is a directory") from None
    except OSError as exc:
        raise ToolRefused(f"Cannot write {path}: {exc.strerror or exc}") from None


# --- locating ----------------------------------------------------------------------------


def _locate(path: str, cwd: str, roots: Sequence[str]) -> Place:
    return _find(path, cwd, roots)[0]


def _find(path: str, cwd: str, roots: Sequence[str]) -> tuple[Place, str]:
    """Where `path` leads (its root's real path and the names below), and that root as named."""
    try:
        real = os.path.realpath(os.path.join(cwd, path))
        named = [os.path.abspath(root) for root in roots or (cwd,)]
        real_roots = [os.path.realpath(root) for root in named]
    except ValueError:  # a NUL character
        raise ToolRefused(f"Refused: {path!r} is not a valid path") from None
    for root, name in zip(real_roots, named, strict=True):
        if real == root:
            return Place(root, ()), name
        if real.startswith(root.rstrip(os.sep) + os.sep):
            return Place(root, tuple(real[len(root) :].strip(os.sep).split(os.sep))), name
    raise ToolRefused(f"Refused: {path} is outside the session's workspace ({cwd})")


def _retried(attempt: Callable[[], T]) -> T:
    for _ in range(ATTEMPTS - 1):
        try:
            return attempt()
        except OSError as exc:
            if exc.errno not in _RACES:
                raise
    return attempt()


@contextlib.contextmanager
def _root(place: Place) -> Generator[int]:
    fd = os.open(place.root, _DIR)
    try:
        yield fd
    finally:
        os.close(fd)


# --- opening beneath a directory descriptor, following no symlink ------------------------


def _open_at(dir_fd: int, parts: tuple[str, ...], flags: int) -> int:
    openat2 = _openat2()
    if openat2 is not None:
        return openat2(dir_fd, "/".join(parts) or ".", flags | os.O_CLOEXEC)
    parent = _directory(dir_fd, parts[:-1], create=False)
    try:
        return os.open(parts[-1] if parts else ".", flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    finally:
        os.close(parent)


def _directory(dir_fd: int, parts: tuple[str, ...], *, create: bool) -> int:
    """The directory `parts` below `dir_fd`, each step refusing a symlink (ELOOP or ENOTDIR)."""
    fd = os.dup(dir_fd)
    try:
        for name in parts:
            try:
                below = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, dir_fd=fd)
                below = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = below
    except BaseException:
        os.close(fd)
        raise
    return fd


def _replace_at(dir_fd: int, name: str, data: bytes) -> None:
    # Per thread: two writes of one file at once must not share a temporary file.
    tmp = f"{name}.acp-{os.getpid()}-{threading.get_ident()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp, dir_fd=dir_fd)  # left by a write that was killed
    try:
        old: os.stat_result | None = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=dir_fd)
    try:
        with open(fd, "wb") as f:
            if old is not None and stat.S_ISREG(old.st_mode):
                os.fchmod(f.fileno(), stat.S_IMODE(old.st_mode))
            f.write(data)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


# --- openat2(2) through ctypes -------------------------------------------------------------

_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437}  # only where we know the number
_RESOLVE_NO_MAGICLINKS, _RESOLVE_NO_SYMLINKS, _RESOLVE_BENEATH = 0x02, 0x04, 0x08


@functools.cache
def _openat2() -> Callable[[int, str, int], int] | None:
    """openat2 confined beneath its directory, following no symlink; None when the kernel (or a
    seccomp filter) does not offer it, or we do not know its number here. ctypes loads here, with
    the first file opened, not with the first turn (about 5 ms)."""
    import ctypes
    import platform

    class _OpenHow(ctypes.Structure):
        _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]

    number = _SYS_OPENAT2.get(platform.machine()) if sys.platform == "linux" else None
    if number is None:
        return None
    syscall: Any = ctypes.CDLL(None, use_errno=True).syscall
    syscall.restype = ctypes.c_long
    resolve = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS

    def openat2(dir_fd: int, path: str, flags: int) -> int:
        how = _OpenHow(flags, 0, resolve)
        args = (ctypes.c_int(dir_fd), os.fsencode(path), ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
        fd = int(syscall(ctypes.c_long(number), *args))
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), path)
        return fd

    root = os.open(os.sep, _DIR)
    try:
        os.close(openat2(root, ".", _DIR))
    except OSError:
        return None
    finally:
        os.close(root)
    return openat2
