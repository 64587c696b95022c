"""Where a runner lives: its private directory, the socket and lock named after its configuration,
its log file (all only the user's: `journal.private`); and the peer-credential check every
accepted connection passes.

One runner per user and per configuration: the options that change what a runner does (agent,
script, model, database, ...) hash to its name, so fronts with different options never share one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import struct
import sys
import tempfile
from pathlib import Path

import platformdirs

from adapters.frozen import frozen
from journal.private import private_dir

log = logging.getLogger(__name__)

DIR_NAME = "acp-server"
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_SOL_LOCAL, _LOCAL_PEERCRED, _XUCRED_SIZE = 0, 1, 76  # macOS <sys/un.h>, <sys/ucred.h>
_XUCRED_HEAD = struct.Struct("2I")


def runtime_dir() -> Path:
    """Where runners listen, mode 0700: `$XDG_RUNTIME_DIR/acp-server`, else `acp-server-UID` in the
    temp dir. When that one is not ours (another user made it first, or planted a symlink), one line
    says so and the user's cache dir holds it instead: a place every front, runner and `runner
    status` of the user finds again, as a random `mkdtemp` name would not be."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    first = Path(base) / DIR_NAME if base else Path(tempfile.gettempdir()) / f"{DIR_NAME}-{os.getuid()}"
    try:
        return private_dir(first)
    except OSError as exc:
        fallback = Path(platformdirs.user_cache_dir(DIR_NAME, appauthor=False)) / "run"
        log.warning("%s; runners use %s instead", exc, fallback)
        return private_dir(fallback)


def data_dir() -> Path:
    """Where runners' logs go, beside the default journal; 0700."""
    return private_dir(Path(platformdirs.user_data_dir(DIR_NAME, appauthor=False)))


@frozen
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

    @property
    def tokens(self) -> Path:
        """The digests of the remote endpoint's pairing tokens (kept across runner restarts)."""
        return data_dir() / f"{self.key}.tokens"


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
