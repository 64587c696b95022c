"""A session's conversation as agents get it back: the plain history (prompts and replies as
text, every turn), when the agent saved one, its own transcript (the messages exactly as its
model saw them, with tool calls and results) plus the turns since that it has not seen, and the
values it keeps with the session (`Sink.save_state`), the latest of each key.

One fold, used for a live session after each turn and by the journal for a restored one, so a
restart hands an agent the same conversation it had.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from adapters.base import Message, Transcript
from adapters.events import StateSaved, TranscriptSaved


class Conversation:
    """Folds turns in order; each turn is its prompt, its reply and the saves it made (transcript
    and state)."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._format: str | None = None
        self._saved: list[Any] = []
        self._since: list[Message] = []
        self._state: dict[str, Any] = {}

    def add_turn(self, prompt: str, reply: str, saves: Iterable[TranscriptSaved | StateSaved] = ()) -> None:
        plain = [Message("user", prompt)] if prompt else []
        if reply:
            plain.append(Message("agent", reply))
        self.messages.extend(plain)
        saved = False
        for save in saves:
            if isinstance(save, StateSaved):
                self._state[save.key] = save.value
                continue
            if save.base or save.format != self._format:
                self._format, self._saved = save.format, []
            self._saved.extend(save.messages)
            saved = True
        if saved:
            self._since.clear()
        elif self._format is not None:
            self._since.extend(plain)

    def state(self) -> dict[str, Any]:
        return dict(self._state)

    def transcript(self) -> Transcript | None:
        if self._format is None:
            return None
        return Transcript(self._format, tuple(self._saved), tuple(self._since))
