"""HAUI on a streamed reply. ACP message chunks are append-only, so `ReplyFilter` lets text
through as it comes, holds a HAUI fence back from its opening line to its closing line, then
emits the fence's Markdown once. It works line by line on CommonMark fences (up to three
spaces, three or more backticks or tildes), so a fence inside another fence is left alone.
Each character is looked at a bounded number of times, so a reply of a million deltas on one
line costs linear time (live and on replay).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

from acp_server.haui.native import draw_fence
from acp_server.haui.render import fence_kind

_OPENER = re.compile(r"( {0,3})(`{3,}|~{3,})([^\n]*)\n?")


@dataclass(frozen=True, slots=True)
class Piece:
    """Reply text that belongs to a HAUI fence: its Markdown with the blocks it drew, or (no
    text, `opened`) the news that a fence opened and is held back until it closes."""

    text: str
    blocks: tuple[dict[str, Any], ...] = ()
    opened: bool = False


Out = str | Piece


def joined(pieces: list[Out]) -> str:
    return "".join(p if isinstance(p, str) else p.text for p in pieces)


@dataclass(slots=True)
class _Fence:
    char: str
    length: int
    kind: str | None  # "haui", "vivid" or "json" when held back; None: an ordinary fence, streamed
    opener: str
    lines: list[str]

    def closes(self, line: str) -> bool:
        stripped = line.rstrip("\n")
        indent = len(stripped) - len(stripped.lstrip(" "))
        run = stripped.lstrip(" ")
        marks = len(run) - len(run.lstrip(self.char))
        return indent <= 3 and marks >= self.length and not run[marks:].strip()


def _opener(line: str) -> _Fence | None:
    match = _OPENER.fullmatch(line)
    if match is None or (match.group(2)[0] == "`" and "`" in match.group(3)):
        return None  # a backtick fence's info string may not contain a backtick
    marks = match.group(2)
    return _Fence(marks[0], len(marks), fence_kind(match.group(3)), line, [])


# Whether an unfinished line may still open a fence shows in its first characters: up to three
# spaces, then three marks or what ends their run (`_may_open` of them is `_may_open` of it).
_HEAD = 8


def _may_open(partial: str) -> bool:
    """Whether an unfinished line could still turn out to open a fence."""
    rest = partial.lstrip(" ")
    if len(partial) - len(rest) > 3:
        return False
    if not rest:
        return True
    marks = len(rest) - len(rest.lstrip(rest[0]))
    return rest[0] in "`~" and (marks == len(rest) or marks >= 3)


class _Line:
    """The unfinished line, written to a buffer (never copied whole per delta), with what decides
    whether it may go out while it grows: its first characters and whether it is blank so far."""

    __slots__ = ("_buffer", "blank", "head", "size")

    def __init__(self) -> None:
        self._buffer = io.StringIO()
        self.head = ""
        self.blank = True
        self.size = 0

    def add(self, piece: str) -> None:
        self._buffer.write(piece)
        self.size += len(piece)
        if len(self.head) < _HEAD:
            self.head = (self.head + piece[:_HEAD])[:_HEAD]
        self.blank = self.blank and not piece.strip()

    def text(self) -> str:
        return self._buffer.getvalue()


class ReplyFilter:
    """One reply's text: `feed` each delta and emit what it returns; `finish` at the reply's end."""

    def __init__(self) -> None:
        self._line = _Line()  # the unfinished line
        self._sent = 0  # how much of it was emitted already
        self._fence: _Fence | None = None
        self._gap = False  # a drawn block was emitted: a non-blank line after it needs a blank one
        self._last_blank = True  # the last emitted line was blank (or nothing was emitted yet)

    def feed(self, delta: str) -> str:
        return joined(self.pieces(delta))

    def pieces(self, delta: str) -> list[Out]:
        """`feed`'s text in order, with each fence's text a `Piece` of its own."""
        if self._sent and "\n" not in delta:
            # More of a line already let through (most deltas): a line that went out as it came
            # can no longer open a fence, or is in an ordinary one, so it goes on as it comes.
            self._line.add(delta)
            self._sent += len(delta)
            return [delta]
        return [p for p in self._lines(delta) if p != ""]

    def _lines(self, delta: str) -> list[Out]:
        out: list[Out] = []
        for piece in delta.splitlines(keepends=True):
            self._line.add(piece)
            if piece.endswith("\n"):
                out.append(self._complete(self._line.text()))
                self._line, self._sent = _Line(), 0
            else:
                out.append(self._partial(piece))
        return out

    def finish(self) -> str:
        return joined(self.finish_pieces())

    def finish_pieces(self) -> list[Out]:
        """The rest: an unfinished last line, and a fence the reply ended inside, drawn as it stands."""
        out = [self._complete(self._line.text())] if self._line.size else []
        self._line, self._sent = _Line(), 0
        fence, self._fence = self._fence, None
        if fence is not None and fence.kind is not None:
            out.append(self._draw(fence, closer=""))
        return [p for p in out if p != ""]

    def _partial(self, piece: str) -> str:
        """Text of the unfinished line that can go now (never part of a held fence), `piece`
        being its latest: once some of a line went out, the rest goes as it comes."""
        if self._fence is not None and self._fence.kind is not None:
            return ""
        if self._fence is None and (_may_open(self._line.head) or self._line.blank):
            return ""  # may open a fence, or is blank so far (blank lines are the gap after a block)
        return self._emit_line_part(piece if self._sent else self._line.text())

    def _emit_line_part(self, text: str) -> str:
        lead = ""
        if self._sent == 0 and self._gap:
            self._gap = False
            lead = "\n" if text.strip() else ""  # a line right after a table would join it
        self._sent += len(text)
        return lead + text

    def _complete(self, line: str) -> Out:
        """A finished line (or the last one, unterminated)."""
        out = self._route(line)
        if self._fence is None or self._fence.kind is None:
            emitted = out if isinstance(out, str) else out.text
            self._last_blank = not line.strip() if emitted else self._last_blank
        return out

    def _route(self, line: str) -> Out:
        fence = self._fence
        if fence is None:
            opened = _opener(line) if self._sent == 0 else None
            if opened is not None and opened.kind is not None:
                self._fence = opened
                # a ```json fence may be no envelope at all: only a HAUI one is announced
                return "" if opened.kind == "json" else Piece("", opened=True)
            self._fence = opened
            return self._rest_of(line)
        if fence.kind is None:
            if fence.closes(line):
                self._fence = None
            return self._rest_of(line)
        if fence.closes(line):
            self._fence = None
            return self._draw(fence, closer=line)
        fence.lines.append(line)
        return ""

    def _rest_of(self, line: str) -> str:
        rest = line[self._sent :]
        if self._sent == 0 and self._gap and not line.strip():
            self._gap = False  # the line is blank: it is the gap
        return self._emit_line_part(rest) if rest else ""

    def _draw(self, fence: _Fence, *, closer: str) -> Out:
        assert fence.kind is not None
        body = "".join(fence.lines)
        drawn = draw_fence(fence.kind, body, cut=not closer)
        if drawn is None:  # an ordinary ```json fence after all: as the model wrote it
            return fence.opener + body + closer
        if not drawn.markdown:
            return Piece("")  # nothing to show: what was announced ends with nothing
        lead = "" if self._last_blank else "\n"
        self._gap, self._last_blank = True, False
        return Piece(lead + drawn.markdown + ("\n" if closer.endswith("\n") else ""), drawn.blocks)


def render_reply(text: str) -> str:
    """A whole reply with every HAUI fence drawn as Markdown."""
    reply = ReplyFilter()
    return reply.feed(text) + reply.finish()
