"""The simplest runtime: it says the prompt's text back and ends the turn.

Useful as a smoke test for editors and as the fallback of the scripted agent; it talks only
to its sink.
"""

from __future__ import annotations

from adapters.base import AdapterCapabilities, Health, Sink, TurnInput
from adapters.events import StopReason


class EchoAdapter:
    """Echoes the prompt text as one agent message chunk."""

    name = "echo"

    def capabilities(self) -> AdapterCapabilities:
        return AdapterCapabilities()

    def health(self) -> Health:
        return Health(True, "nothing to check: it says the prompt back")

    def run_turn(self, turn: TurnInput, sink: Sink) -> StopReason:
        text = turn.text
        # An empty chunk would render as an empty agent message in some editors.
        if text:
            sink.text(text)
        return "end_turn"

    def cancel(self, session_id: str) -> None:
        # Nothing runs between sink calls, and the sink raises TurnCancelled on its own.
        return None
