"""Where a runner lives: its private directory, the socket and lock named after its configuration,
its log file; and the peer-credential check every accepted connection passes.

One runner per user and per configuration: the options that change what a runner does (agent,
script, model, database, ...) hash to its name, so fronts with different options never share one.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

import platformdirs

DIR_NAME = "acp-server"
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_SOL_LOCAL, _LOCAL_PEERCRED, _XUCRED_SIZE = 0, 1, 76  # macOS <sys/un.h>, <sys/ucred.h>
_XUCRED_HEAD = struct.Struct("2I")


def runtime_dir() -> Path:
    """`$XDG_RUNTIME_DIR/acp-server`, else a per-user directory in the temp dir; mode 0700."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    root = Path(base) / DIR_NAME if base else Path(f"/tmp/{DIR_NAME}-{os.getuid()}")  # noqa: S108
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = root.lstat()
    if info.st_uid != os.getuid() or not root.is_dir() or root.is_symlink():
        raise PermissionError(f"{root} is not a directory owned by this user")
    if info.st_mode & 0o077:
        root.chmod(0o700)
    return root


def data_dir() -> Path:
    path = Path(platformdirs.user_data_dir("acp-server", appauthor=False))
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass(frozen=True, slots=True)
class RunnerPlace:
    """The files of the runner for one configuration."""

    key: str
    config: dict[str, object]
    root: Path

    @property
    def socket(self) -> Path:
        return self.root / f"{self.key}.sock"

    @property
    def control(self) -> Path:
        return self.root / f"{self.key}.ctl"

    @property
    def lock(self) -> Path:
        return self.root / f"{self.key}.lock"

    @property
    def log(self) -> Path:
        return data_dir() / f"{self.key}.log"


def place_for(config: dict[str, object]) -> RunnerPlace:
    canonical = json.dumps(config, sort_keys=True, default=str)
    key = "runner-" + hashlib.sha256(canonical.encode()).hexdigest()[:16]
    return RunnerPlace(key, config, runtime_dir())


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (None where unknown)."""
    try:
        if hasattr(socket, "SO_PEERCRED"):  # Linux
            raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
            _pid, uid, _gid = _UCRED.unpack(raw)
            return uid
        if sys.platform == "darwin":  # struct xucred: version, uid, ngroups, groups[16]
            raw = sock.getsockopt(_SOL_LOCAL, _LOCAL_PEERCRED, _XUCRED_SIZE)
            _version, uid = _XUCRED_HEAD.unpack_from(raw)
            return uid
    except OSError:
        return None
    return None


def same_user(uid: int | None, *, own: int | None = None) -> bool:
    """Only the runner's own user may connect; an unknown peer is refused too."""
    return uid is not None and uid == (os.getuid() if own is None else own)
