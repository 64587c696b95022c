"""One model request of a turn, fitted to the context window first.

Before sending, the request's estimated size is checked against the budget (the window minus
room for the answer, or below a size the endpoint refused before); over it, the history is
compacted. When the endpoint still answers "context length exceeded", the agent remembers the
size, compacts harder and retries once. What cannot fit ends the turn with `Overflow`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from adapters.base import Sink, TurnInput
from adapters.openai import context
from adapters.openai.client import Abort, ContextTooLong
from adapters.openai.compaction import Compactor
from adapters.openai.history import History
from adapters.openai.stream import Reply

LEARNED_SHARE = 0.7  # after a refusal, requests stay under this share of the refused size


class Overflow(Exception):
    """The turn cannot go on within the model's context window; the message says why."""


class Asker(Protocol):
    """What a request needs of the agent (`OpenAIAdapter`)."""

    def payload(
        self, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], config: Any
    ) -> dict[str, Any]: ...
    def complete(self, payload: dict[str, Any], sink: Sink, abort: Abort) -> Reply: ...
    def compactor(self, turn: TurnInput, sink: Sink, model: str, abort: Abort) -> Compactor: ...
    def budget(self, model: str) -> int | None: ...
    def learn_budget(self, model: str, tokens: int) -> None: ...


@dataclass(slots=True)
class Request:
    agent: Asker
    turn: TurnInput
    sink: Sink
    model: str
    abort: Abort
    tools: list[dict[str, Any]]

    def send(self, history: History) -> Reply:
        budget = self.agent.budget(self.model)
        if budget is not None and self._size(history) > budget:
            self._compact(history, budget)
        try:
            return self.agent.complete(self._payload(history), self.sink, self.abort)
        except ContextTooLong as exc:
            refused = self._size(history)
            self.agent.learn_budget(self.model, int(refused * LEARNED_SHARE))
            self._compact(history, int(refused * LEARNED_SHARE), harder=True, why=str(exc))
        try:
            return self.agent.complete(self._payload(history), self.sink, self.abort)
        except ContextTooLong as exc:
            raise Overflow(
                f"The model endpoint still refuses the conversation as too long after compacting it ({exc}). "
                "Start a new session, or set context_window in [openai] of the config file."
            ) from None

    def _payload(self, history: History) -> dict[str, Any]:
        return self.agent.payload(self.model, history.outgoing(), self.tools, self.turn.config)

    def _size(self, history: History) -> int:
        return context.estimate(history.outgoing()) + context.estimate(self.tools)

    def _compact(self, history: History, budget: int, *, harder: bool = False, why: str = "") -> None:
        fixed = context.estimate(history.messages[0]) + context.estimate(self.tools)
        room = budget - fixed - context.SUMMARY_ROOM
        try:
            self.agent.compactor(self.turn, self.sink, self.model, self.abort).compact(
                history, room=room, budget=budget, harder=harder
            )
        except context.CannotFit as exc:
            said = f" (the endpoint said: {why})" if why else ""
            raise Overflow(
                f"This turn cannot go on: its prompt and newest tool result alone need about {exc.needed} "
                f"tokens, and the model's context window leaves {max(room, 0)} for them{said}. "
                "Ask for a smaller piece (fewer lines of a file, a narrower search)."
            ) from None
