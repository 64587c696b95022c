"""Where HAUI sits: between a run's runtime events and the one mapper. The journal keeps the
agent's raw text; what the editor is shown passes through one `RichReply` per run, live
(acp.prompting) and on replay (turns.replay) alike, so a reload draws the same blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from adapters.events import RuntimeEvent, TextDelta, TurnFinished
from adapters.frozen import frozen

if TYPE_CHECKING:
    from acp_server.haui import ReplyFilter
    from acp_server.haui.stream import Out

HAUI_OPTION = "haui"  # the per-session config option; its values are "on" and "off"
HAUI_VALUES = ("on", "off")


def haui_on(config: Mapping[str, Any], default: bool) -> bool:
    """The session's choice if it made one, else the server's `--haui`."""
    value = config.get(HAUI_OPTION)
    return default if value not in HAUI_VALUES else value == "on"


@frozen
class DrawnDelta(TextDelta):
    """A HAUI fence's text: its Markdown (`text`, what every editor shows) with the blocks drawn
    from it, which the mapper carries in the chunk's `_meta` for a client that draws them
    itself; or, `opened`, no text yet: a fence opened and is held back until it closes."""

    blocks: tuple[dict[str, Any], ...] = ()
    opened: bool = False

    def meta(self) -> dict[str, Any]:
        return {"opened": True} if self.opened else {"blocks": list(self.blocks)}


class RichReply:
    """One run's text as shown: HAUI fences drawn as Markdown (`enabled`), or untouched."""

    def __init__(self, *, enabled: bool) -> None:
        self._filter: ReplyFilter | None = None
        if enabled:
            from acp_server.haui import ReplyFilter  # on the first turn, not in the start-up path

            self._filter = ReplyFilter()

    def shown(self, event: RuntimeEvent) -> list[RuntimeEvent]:
        """The events to map for `event`: a delta's text safe to show now (maybe none), and,
        at the end of the run, whatever was held back, before the end itself."""
        if self._filter is None:
            return [event]
        if isinstance(event, TextDelta):
            return list(self.text(event))
        if isinstance(event, TurnFinished):
            return [*self.finish(), event]
        return [event]

    def text(self, delta: TextDelta) -> list[TextDelta]:
        """`shown` for a text delta (the replay's most common event): the deltas to map."""
        if self._filter is None:
            return [delta]
        pieces = self._filter.pieces(delta.text)
        if len(pieces) == 1 and pieces[0] is delta.text:
            return [delta]  # let through as it came (the filter's fast path): no new event
        return _deltas(pieces, delta)

    def finish(self) -> list[TextDelta]:
        """What is still held back (a fence the reply ended inside), drawn as it stands."""
        return _deltas(self._filter.finish_pieces(), TextDelta("")) if self._filter is not None else []


def _deltas(pieces: list[Out], like: TextDelta) -> list[TextDelta]:
    """Plain text next to plain text as one delta; each fence's piece a `DrawnDelta` of its own."""
    out: list[TextDelta] = []
    text = ""
    for piece in pieces:
        if isinstance(piece, str):
            text += piece
            continue
        if text:
            out.append(replace(like, text=text))
            text = ""
        out.append(DrawnDelta(piece.text, like.message_id, blocks=piece.blocks, opened=piece.opened))
    return [*out, replace(like, text=text)] if text else out
