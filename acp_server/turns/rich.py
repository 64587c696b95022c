"""Where HAUI sits: between a run's runtime events and the one mapper. The journal keeps the
agent's raw text; what the editor is shown passes through one `RichReply` per run, live
(acp.prompting) and on replay (turns.replay) alike, so a reload draws the same blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from adapters.events import RuntimeEvent, TextDelta, TurnFinished

if TYPE_CHECKING:
    from acp_server.haui import ReplyFilter

HAUI_OPTION = "haui"  # the per-session config option; its values are "on" and "off"
HAUI_VALUES = ("on", "off")


def haui_on(config: Mapping[str, Any], default: bool) -> bool:
    """The session's choice if it made one, else the server's `--haui`."""
    value = config.get(HAUI_OPTION)
    return default if value not in HAUI_VALUES else value == "on"


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
            shown = self.text(event)
            return [shown] if shown is not None else []
        if isinstance(event, TurnFinished):
            return [*self.finish(), event]
        return [event]

    def text(self, delta: TextDelta) -> TextDelta | None:
        """`shown` for a text delta (the replay's most common event): the delta to map, or None."""
        if self._filter is None:
            return delta
        text = self._filter.feed(delta.text)
        if text and text is delta.text:
            return delta  # let through as it came (the filter's fast path): no new event
        return replace(delta, text=text) if text else None

    def finish(self) -> list[RuntimeEvent]:
        """What is still held back (a fence the reply ended inside), drawn as it stands."""
        text = self._filter.finish() if self._filter is not None else ""
        return [TextDelta(text)] if text else []
