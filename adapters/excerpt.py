"""The lines of a text file a read asks for, in bounded memory: `fs/read_text_file` semantics
(from 1-based `line`, at most `limit` lines; a line ends at `\\n`) read from a binary stream.

Lines before `line` are skipped a chunk at a time and reading stops after the last line asked
for, so lines 1-5 of a 500 MB file cost a few KiB. What is kept is capped at `MAX_READ_BYTES`:
a range of lines that goes on past it is cut there with a note saying how to read on; a read of
the whole file (no line, no limit) that big is refused, since an agent may write back what it
read and a cut file would lose the rest. Shared by the server's local fallback, its agents and
the `prompt` client serving `fs/*`, so both ends of the protocol slice the same way.
"""

from __future__ import annotations

import codecs
from typing import BinaryIO

from adapters.base import ToolRefused

MAX_READ_BYTES = 16 << 20  # 16 MiB: a source file an agent edits whole is far smaller
_CHUNK = 1 << 16


def read_lines(
    stream: BinaryIO,
    *,
    line: int | None = None,
    limit: int | None = None,
    name: str,
    errors: str = "replace",
    max_bytes: int = MAX_READ_BYTES,
) -> str:
    """The text of lines `line`.. (at most `limit`) of `stream`, decoded as UTF-8 with `errors`;
    cut with a note past `max_bytes`, or ToolRefused when the whole file was asked for. `name`
    is the path as the caller names it, for messages."""
    first = max(line or 1, 1)
    _skip_lines(stream, first - 1)
    data, cut = _take_lines(stream, limit, max_bytes)
    if not cut:
        return data.decode("utf-8", errors)
    if line is None and limit is None:
        raise ToolRefused(
            f"Cannot read {name} whole: it is larger than {max_bytes >> 20} MiB; read it in parts with line and limit"
        )
    decoder = codecs.getincrementaldecoder("utf-8")(errors)
    text = decoder.decode(data, final=False)  # a character cut in two is left out
    shown = text.count("\n")
    return (
        f"{text}\n[cut: the lines asked for go on past {max_bytes >> 20} MiB; "
        f"read on from line {first + shown} with a smaller limit]"
    )


def _skip_lines(stream: BinaryIO, count: int) -> None:
    while count > 0:
        piece = stream.readline(_CHUNK)  # at most a chunk: a line of 500 MB is skipped in pieces
        if not piece:
            return
        if piece.endswith(b"\n"):
            count -= 1


def _take_lines(stream: BinaryIO, limit: int | None, max_bytes: int) -> tuple[bytes, bool]:
    """Up to `limit` lines (all when None) and whether they went on past `max_bytes`."""
    kept = bytearray()
    taken = 0
    while limit is None or taken < limit:
        piece = stream.readline(min(_CHUNK, max_bytes + 1 - len(kept)))
        if not piece:
            break
        kept += piece
        if len(kept) > max_bytes:
            return bytes(kept[:max_bytes]), True
        if piece.endswith(b"\n"):
            taken += 1
    return bytes(kept), False
