"""One model request of a turn, fitted to the context window first.

Before sending, the request's estimated size is checked against the budget (the window minus
room for the answer, or below a size the endpoint refused before); over it, the history is
compacted. The `prompt_tokens` the endpoint reports for each request calibrate the session's
estimate. When the endpoint still answers "context length exceeded", the agent remembers the
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
    def budget(self, model: str, estimate: context.Estimate) -> int | None: ...
    def learn_budget(self, model: str, chars: int) -> None: ...


@dataclass(slots=True)
class Request:
    agent: Asker
    turn: TurnInput
    sink: Sink
    model: str
    abort: Abort
    tools: list[dict[str, Any]]
    estimate: context.Estimate = context.DEFAULT  # the session's, calibrated by each reply

    def send(self, history: History) -> Reply:
        budget = self.agent.budget(self.model, self.estimate)
        if budget is not None and self._size(history) > budget:
            self._compact(history, budget)
        try:
            return self._complete(history)
        except ContextTooLong as exc:
            refused = int(self._chars(history.outgoing()) * LEARNED_SHARE)
            self.agent.learn_budget(self.model, refused)
            self._compact(history, self.estimate.tokens_for(refused), harder=True, why=str(exc))
        try:
            return self._complete(history)
        except ContextTooLong as exc:
            raise Overflow(
                f"The model endpoint still refuses the conversation as too long after compacting it ({exc}). "
                "Start a new session, or set context_window in [openai] of the config file."
            ) from None

    def _complete(self, history: History) -> Reply:
        """Send the request; the endpoint's count of its tokens calibrates the estimate."""
        messages = history.outgoing()
        reply = self.agent.complete(self._payload(messages), self.sink, self.abort)
        prompt_tokens = (reply.usage or {}).get("prompt_tokens")
        if isinstance(prompt_tokens, int) and not context.has_images(messages):
            self.estimate = self.estimate.calibrated(self._chars(messages), prompt_tokens)
        return reply

    def _payload(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        return self.agent.payload(self.model, messages, self.tools, self.turn.config)

    def _chars(self, messages: list[dict[str, Any]]) -> int:
        return context.chars_of(messages) + context.chars_of(self.tools)

    def _size(self, history: History) -> int:
        return self.estimate.tokens(history.outgoing()) + self.estimate.tokens(self.tools)

    def _compact(self, history: History, budget: int, *, harder: bool = False, why: str = "") -> None:
        fixed = self.estimate.tokens(history.framing()) + self.estimate.tokens(self.tools)
        room = budget - fixed
        try:
            self.agent.compactor(self.turn, self.sink, self.model, self.abort).compact(
                history, room=room, budget=budget, estimate=self.estimate, harder=harder
            )
        except context.CannotFit as exc:
            said = f" (the endpoint said: {why})" if why else ""
            raise Overflow(
                f"This turn cannot go on: {exc.what} about {exc.needed} tokens, and the model's "
                f"context window leaves {max(exc.room, 0)} for them{said}. Send a shorter prompt or smaller "
                "attachments; if the model takes more, set context_window in [openai] of the config file."
            ) from None
