"""Compacting a conversation that outgrows the model's window: the oldest part becomes a summary.

The summary is a model request of its own (no tools), streamed to the editor as
`compaction_summary_chunk`s when it advertised `session.compaction`; a `notice` tells an editor
with `session.notices`; otherwise a log line. The compacted history is saved with `base`, so a
reload starts from it. When the summary request fails, a plain digest of the old part stands in;
either is cut to the room set aside for it. Tool results cut to fit are saved the same way.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from contextlib import closing
from typing import Any

from adapters.base import AgentError, EditorFeatures, Sink
from adapters.openai import context
from adapters.openai.client import Abort, Endpoint
from adapters.openai.history import SUMMARY_MARK, History
from adapters.openai.jsonvalues import is_object, objects

log = logging.getLogger(__name__)

SUMMARIZER = """\
You compact the conversation of a coding agent with its user so the agent can go on with less \
context. Write a dense summary for the agent itself, at most {words} words: the user's goals and \
requests, decisions taken, files read or changed (paths, what was in or done to them), commands \
run and their results, errors met, and what is still to do. If the conversation starts with an \
earlier summary, fold it in. Facts only, no greeting."""
RENDER_OVERHEAD = 50  # tokens of the summary request around its two messages' texts
MIN_RENDER_CHARS = 1_000


class Compactor:
    """Compacts one turn's history through the turn's endpoint, model and sink."""

    def __init__(
        self, *, endpoint: Endpoint, model: str, sink: Sink, editor: EditorFeatures, abort: Abort, window: int | None
    ) -> None:
        self._endpoint, self._model, self._sink = endpoint, model, sink
        self._editor, self._abort, self._window = editor, abort, window

    def compact(
        self,
        history: History,
        *,
        room: int,
        budget: int,
        estimate: context.Estimate = context.DEFAULT,
        harder: bool = False,
    ) -> None:
        """Summarize what `context.plan` leaves out and cut what it cut; raises `context.CannotFit`."""
        share = context.HARD_KEEP_SHARE if harder else context.KEEP_SHARE
        reserve = context.summary_room(budget)
        messages, start = history.messages[1:], history.turn_start - 1
        plan = context.plan(messages, start, room=room, reserve=reserve, estimate=estimate, keep_share=share)
        if not plan.old:
            if plan.cut:  # the newest tool results, cut to fit: nothing to summarize
                history.replace([history.messages[0], *plan.kept], turn_start=1 + plan.prompt_at)
                history.save(self._sink)
            return
        compaction_id = f"compaction_{uuid.uuid4().hex[:12]}"
        if self._editor.compaction:
            self._sink.compaction(compaction_id, "in_progress")
        summary, fallback = self._summary(plan.old, budget, estimate, compaction_id)
        message = {"role": "user", "content": f"{SUMMARY_MARK}\n\n{summary}"}
        history.replace([history.messages[0], message, *plan.kept], turn_start=2 + plan.prompt_at)
        history.save(self._sink)
        self._announce(compaction_id, len(plan.old), summary if fallback else None)

    def _summary(
        self, old: Sequence[dict[str, Any]], budget: int, estimate: context.Estimate, compaction_id: str
    ) -> tuple[str, bool]:
        """The model's summary of `old`, or (when it cannot give one) a plain digest, cut to the
        room set aside for it. The summary request takes the budget, its answer that room."""
        reserve = context.summary_room(budget)
        system = SUMMARIZER.format(words=reserve // 2)
        limit = max(estimate.chars(budget - estimate.tokens(system) - RENDER_OVERHEAD), MIN_RENDER_CHARS)
        payload: dict[str, Any] = {
            "model": self._model,
            "stream": True,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": context.render(old, limit)},
            ],
        }
        try:
            text, fallback = self._stream(payload, compaction_id), False
        except AgentError as exc:
            log.warning("the model could not summarize the conversation: %s", exc)
            text, fallback = digest(old, str(exc)), True
        if not text.strip():
            text, fallback = digest(old, "the model answered nothing"), True
        return context.cut(text, estimate.chars(reserve)), fallback

    def _stream(self, payload: dict[str, Any], compaction_id: str) -> str:
        parts: list[str] = []
        with closing(self._endpoint.stream_chat(payload, sink=self._sink, abort=self._abort)) as chunks:
            for chunk in chunks:
                for choice in objects(chunk.get("choices")):
                    delta = choice.get("delta")
                    text = delta.get("content") if is_object(delta) else None
                    if isinstance(text, str) and text:
                        parts.append(text)
                        if self._editor.compaction:
                            self._sink.compaction_chunk(compaction_id, text)
        return "".join(parts)

    def _announce(self, compaction_id: str, count: int, fallback: str | None) -> None:
        window = f" of {self._window} tokens" if self._window else ""
        said = f"{count} earlier messages were summarized to fit the model's context window{window}."
        if self._editor.compaction:
            self._sink.compaction(compaction_id, "completed", summary=fallback)
        elif self._editor.notices:
            self._sink.notice("Context compacted", description=said)
        else:
            log.info("context compacted: %s", said)


def digest(old: Sequence[dict[str, Any]], reason: str) -> str:
    """A summary made without the model: the user's requests and the tools called."""
    lines = [f"(No model summary: {reason}.) The earlier requests of the user, and the tools called:"]
    for message in old:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            lines.append("- user: " + context.cut(message["content"], 300))
        for name, arguments in context.calls_of(message):
            lines.append(f"  - called {name}({context.cut(arguments, 200)})")
    return "\n".join(lines)
