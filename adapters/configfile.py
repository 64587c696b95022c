"""The config file (`config.toml`): where it is, and reading it only when it is safe to.

The file names the programs acp-server starts (`[agents.NAME] command`) and the endpoint its
prompts go to, so only a regular file of at most `MAX_CONFIG_BYTES`, owned by the user and not
writable by group or others, is read. Anything else (`/dev/zero`, a FIFO, another user's file)
is a `ConfigFileError` whose message says in one line what is wrong and what to do.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

CONFIG_ENV = "ACP_SERVER_CONFIG"
MAX_CONFIG_BYTES = 1 << 20  # 1 MiB: a config file is a few lines; more is a mistake or an attack


class ConfigFileError(ValueError):
    """The config file exists but is not read; the message says why and what to do."""


def config_path(env: Mapping[str, str], explicit: str | os.PathLike[str] | None = None) -> str:
    """The config file: the explicit path, else `ACP_SERVER_CONFIG`, else the XDG location."""
    if explicit is not None:
        return os.fspath(explicit)
    if env.get(CONFIG_ENV):
        return env[CONFIG_ENV]
    base = env.get("XDG_CONFIG_HOME") or os.path.join(str(Path.home()), ".config")
    return os.path.join(base, "acp-server", "config.toml")


def read_config(path: str) -> bytes | None:
    """The config file's bytes, or None when there is no file; `ConfigFileError` when it may not
    be read. Opened without blocking (a FIFO with no writer would wait for ever), checked on the
    open descriptor (no swap between check and read), and read no further than the cap."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except PermissionError:
        if not os.access(os.path.dirname(path) or ".", os.X_OK):
            return None  # a directory we may not enter holds no file of ours we could see
        raise ConfigFileError(f"the config file {path} cannot be read: permission denied") from None
    except OSError as exc:
        raise ConfigFileError(f"the config file {path} cannot be read: {exc.strerror or exc}") from None
    try:
        if problem := unsafe(os.fstat(fd)):
            raise ConfigFileError(f"the config file {path} {problem}")
        raw = _read_at_most(fd, MAX_CONFIG_BYTES + 1)
    finally:
        os.close(fd)
    if len(raw) > MAX_CONFIG_BYTES:  # it grew after the check
        raise ConfigFileError(f"the config file {path} {_too_big()}")
    return raw


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    while limit > 0 and (chunk := os.read(fd, min(limit, 1 << 16))):
        chunks.append(chunk)
        limit -= len(chunk)
    return b"".join(chunks)


def unsafe(info: os.stat_result) -> str | None:
    """What makes a file with this status unfit to be the config file, as the end of a sentence."""
    if not stat.S_ISREG(info.st_mode):
        return f"is {_kind(info.st_mode)}, not a regular file; point {CONFIG_ENV} at a TOML file"
    if info.st_uid != os.geteuid():
        return f"belongs to another user (uid {info.st_uid}); use a config file of your own"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        mode = stat.S_IMODE(info.st_mode)
        return f"is writable by others (mode {mode:04o}); run chmod go-w on it"
    if info.st_size > MAX_CONFIG_BYTES:
        return _too_big()
    return None


def _too_big() -> str:
    return f"is larger than a config file may be ({MAX_CONFIG_BYTES // 1024} KiB); check what {CONFIG_ENV} names"


def _kind(mode: int) -> str:
    kinds = {
        stat.S_ISDIR: "a directory",
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
    }
    return next((name for test, name in kinds.items() if test(mode)), "a special file")
