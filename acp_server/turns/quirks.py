"""Known mistakes of released clients, and what the server does differently for each.

`QUIRKS` is the one table: a client's `clientInfo.name`, the versions affected, and the quirk's
name, which the parts of a turn ask about (`Quirks.has`). `quirks_for` matches the `clientInfo`
that `initialize` brought; the handlers log what applies. Each entry has its test in
tests/test_quirks.py. A client fixed in a later version gets an upper bound, never a deletion.
"""

from __future__ import annotations

import re
from typing import Literal

from adapters.frozen import frozen

Quirk = Literal["terminal_shell_command_line"]
Version = tuple[int, ...]


@frozen(kw_only=True)
class KnownQuirk:
    quirk: Quirk
    client: str  # `clientInfo.name`, exactly
    below: Version | None  # the first version without the mistake; None: every version so far
    why: str  # what the client gets wrong, for the log and docs/protocol.md

    def matches(self, name: str, version: Version | None) -> bool:
        # A missing or unreadable version counts as affected: the quirk is the safer guess.
        return name == self.client and (self.below is None or version is None or version < self.below)


QUIRKS: tuple[KnownQuirk, ...] = (
    KnownQuirk(
        quirk="terminal_shell_command_line",
        client="vscode-acp-client",
        below=(0, 3),  # 0.2.0 was tried; the versions after 0.2.x are unknown
        why=(
            "runs terminal/create through a shell again, so `/bin/sh -c CMD` loses CMD: "
            "the whole command line is sent as `command`, with no `args`"
        ),
    ),
)


@frozen
class Quirks:
    """The quirks of the connected client: the entries of `QUIRKS` that matched it."""

    applied: tuple[KnownQuirk, ...] = ()

    def has(self, quirk: Quirk) -> bool:
        return any(entry.quirk == quirk for entry in self.applied)


def parse_version(text: str) -> Version | None:
    """`"0.2.0"` -> (0, 2, 0); `"v1.4-beta"` -> (1, 4); None when it starts with no number."""
    found = re.match(r"v?(\d+(?:\.\d+)*)", text.strip())
    return tuple(int(part) for part in found.group(1).split(".")) if found else None


def quirks_for(name: str | None, version: str | None) -> Quirks:
    """The entries of `QUIRKS` that match a client's `clientInfo` (none without a name)."""
    if not name:
        return Quirks()
    parsed = parse_version(version) if version else None
    return Quirks(tuple(entry for entry in QUIRKS if entry.matches(name, parsed)))
