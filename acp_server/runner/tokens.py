"""Who may use a runner's remote endpoint: the pairing tokens `acp-server pair` hands out, and
what a read-only one may send.

A token is 256 random bits (`secrets.token_urlsafe(32)`); only its SHA-256 is kept, in a 0600
file in the runner's private data directory, so the file alone opens nothing. A presented token
is compared in constant time with every stored digest. `pair --revoke` empties the file (and the
runner closes the connections those tokens opened). Tokens never pass through argv or the log.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path

from adapters.frozen import frozen
from journal.private import FILE_MODE

# What a read-only connection may send: everything that only reads or watches. Anything else
# (session/prompt, session/cancel, session/set_mode, session/set_config_option, session/close,
# session/new, ...) is refused with READ_ONLY_REFUSED, and its answers to our requests are dropped.
READ_ONLY_METHODS = frozenset(
    {
        "initialize",
        "authenticate",
        "session/load",
        "session/resume",
        "session/list",
        "$/cancel_request",  # withdraws only its own (read-only) requests
    }
)
READ_ONLY_REFUSED = -32003  # a server error (JSON-RPC's -32000..-32099 range), beside ACP's -32000 and -32002


@frozen
class Grant:
    """What a presented token allows, and which token it was (its digest: a connection opened
    with one token answers only to that token)."""

    read_only: bool
    digest: str


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenStore:
    """The runner's pairing tokens in `path`: `mint` adds one, `check` finds one, `revoke` ends all."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: tuple[int, int] | None = None  # (mtime_ns, size) of the file last read
        self._grants: dict[str, bool] = {}  # digest -> read-only

    def mint(self, *, read_only: bool) -> str:
        token = secrets.token_urlsafe(32)
        grants = self._load()
        grants[_digest(token)] = read_only
        self._write(grants)
        return token

    def check(self, token: str | None) -> Grant | None:
        """The grant of `token`, compared in constant time with every stored digest; None for none."""
        if not token:
            return None
        presented = _digest(token)
        found: bool | None = None
        for digest, read_only in self._load().items():
            if hmac.compare_digest(presented, digest):  # every digest is compared: no early exit
                found = read_only
        return None if found is None else Grant(read_only=found, digest=presented)

    def revoke(self) -> None:
        self._write({})

    def _load(self) -> dict[str, bool]:
        """The stored digests, read again whenever the file changed (`pair` in another process)."""
        try:
            info = self.path.stat()
        except FileNotFoundError:
            self._seen, self._grants = None, {}
            return {}
        if self._seen != (info.st_mtime_ns, info.st_size):
            with contextlib.suppress(ValueError, OSError):
                raw: object = json.loads(self.path.read_text())
                self._grants = _grants(raw)
            self._seen = (info.st_mtime_ns, info.st_size)
        return dict(self._grants)

    def _write(self, grants: dict[str, bool]) -> None:
        """Replace the file atomically, 0600 from its creation."""
        temporary = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        with os.fdopen(fd, "w") as file:
            json.dump({"tokens": [{"sha256": d, "readOnly": r} for d, r in grants.items()]}, file)
        os.replace(temporary, self.path)
        self._seen, self._grants = None, {}


def _grants(raw: object) -> dict[str, bool]:
    if not isinstance(raw, dict):
        return {}
    entries: object = raw.get("tokens")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not isinstance(entries, list):
        return {}
    grants: dict[str, bool] = {}
    for entry in entries:  # pyright: ignore[reportUnknownVariableType]
        if isinstance(entry, dict) and isinstance(entry.get("sha256"), str):  # pyright: ignore[reportUnknownMemberType]
            grants[str(entry["sha256"])] = bool(entry.get("readOnly"))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    return grants


def revoke_all(directory: Path) -> int:
    """Empty every runner's token file in `directory` (runners not running included); how many."""
    files = sorted(directory.glob("runner-*.tokens"))
    for path in files:
        TokenStore(path).revoke()
    return len(files)
