"""Hermes' conversation kept in our journal: each turn saves the messages it added to Hermes'
list (tool calls, tool results, reasoning) through `Sink.save_transcript`, and every turn, live
or after a restart, runs on the saved transcript plus the turns Hermes never saw (`since`, as
plain text), or on the plain history when there is no Hermes transcript. Saves are JSON copies
without Hermes' private `_` keys: Hermes mutates the lists and dicts it is given.
"""

from __future__ import annotations

import json
from typing import Any, cast

from adapters.base import Message, Sink, TurnInput
from adapters.frozen import frozen

FORMAT = "hermes"  # OpenAI chat messages as Hermes keeps them (run_conversation's "messages")


@frozen
class History:
    """What one run starts from: `messages` (Hermes gets a deep copy), of which the first
    `saved` are already in the journal's transcript."""

    messages: list[dict[str, Any]]
    saved: int


def conversation(turn: TurnInput) -> History:
    kept = turn.transcript
    if kept is not None and kept.format == FORMAT:
        saved = [cast(dict[str, Any], m) for m in kept.messages if isinstance(m, dict)]
        return History([*saved, *map(_plain, kept.since)], len(saved))
    return History([_plain(m) for m in turn.history], 0)  # the next save starts the transcript


def save(sink: Sink, history: History, messages: Any) -> None:
    """Journal what this run added: the new tail, or, when Hermes rewrote earlier messages
    (context compression, sequence repair) or nothing was saved yet, the whole list as a base."""
    if not isinstance(messages, list) or not messages:
        return
    clean = [_clean(cast(dict[Any, Any], m)) for m in cast(list[Any], messages) if isinstance(m, dict)]
    kept = history.saved
    if kept and clean[:kept] == history.messages[:kept]:
        sink.save_transcript(FORMAT, clean[kept:])
    else:
        sink.save_transcript(FORMAT, clean, base=True)


def keep_out(sink: Sink, turn: TurnInput) -> None:
    """Leave this turn's exchange (a command the adapter answered itself) out of what Hermes sees
    next: save what Hermes has not seen yet (the turns since its last save), and nothing more."""
    history = conversation(turn)
    unseen = [_clean(m) for m in history.messages[history.saved :]]
    kept = turn.transcript
    sink.save_transcript(FORMAT, unseen, base=kept is None or kept.format != FORMAT)


def _plain(message: Message) -> dict[str, Any]:
    return {"role": "user" if message.role == "user" else "assistant", "content": message.text}


def _clean(message: dict[Any, Any]) -> dict[str, Any]:
    """A JSON copy; `_`-prefixed keys are Hermes' bookkeeping (its wire sanitizer drops them too)."""
    public = {str(k): v for k, v in message.items() if not str(k).startswith("_")}
    return json.loads(json.dumps(public, ensure_ascii=False, default=str))
