"""Hermes' own session titles: after a session's first exchange, Hermes' title generator names
the session in a thread of its own, as `hermes acp` does, with Hermes' settings
(`auxiliary.title_generation`: on by default; its model and provider as configured, else the
session's). The turn's end does not wait for it; the title reaches the editor when it comes.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from adapters.base import SessionNotes, TurnInput
from adapters.hermes.setup import hermes

log = logging.getLogger(__name__)
RUNTIME_FIELDS = ("model", "provider", "base_url", "api_key", "api_mode")


def first_exchange(messages: list[dict[str, Any]]) -> bool:
    """Whether a run on these earlier messages is the session's first exchange."""
    return not any(m.get("role") == "user" for m in messages)


def name_later(agent: Any, turn: TurnInput, answer: str) -> None:
    """Start naming the session from its first prompt and Hermes' answer."""
    if not answer.strip() or not turn.text.strip():
        return
    runtime = {name: getattr(agent, name, None) for name in RUNTIME_FIELDS}
    threading.Thread(
        target=_name, args=(turn.text, answer, runtime, turn.notes), name="hermes-title", daemon=True
    ).start()


def _name(prompt: str, answer: str, runtime: dict[str, Any], notes: SessionNotes) -> None:
    try:
        # Off in config.yaml, or a failed call: None (Hermes logs why).
        title = hermes("agent.title_generator").generate_title(prompt, answer, main_runtime=runtime)
    except Exception as exc:
        log.warning("Hermes could not name the session: %s", type(exc).__name__)
        return
    if isinstance(title, str) and title.strip():
        try:
            notes.title(title)
        except BaseException as exc:
            # The server stopped under it (its loop closed with the title on the way): nobody to
            # tell, and a CancelledError half-printed at exit is all a user would see of it.
            log.debug("the title of a session came after the server stopped: %r", exc)
