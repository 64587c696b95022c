"""How a run ends: the one vocabulary of run states, and the one place runtime aliases map to it.

Runtimes say `end_turn`, `canceled`, `failure` or `done`; the journal stores only `RunState`.
`normalize_state` is the single translation, so stop reasons never leak in as new states.
"""

from __future__ import annotations

from enum import StrEnum


class RunState(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    REFUSED = "refused"
    MAX_TOKENS = "max_tokens"
    MAX_TURN_REQUESTS = "max_turn_requests"
    ERROR = "error"


TERMINAL_STATES: frozenset[RunState] = frozenset(RunState) - {RunState.RUNNING}

_ALIASES: dict[str, RunState] = {
    "end_turn": RunState.COMPLETED,
    "done": RunState.COMPLETED,
    "finished": RunState.COMPLETED,
    "success": RunState.COMPLETED,
    "ok": RunState.COMPLETED,
    "refusal": RunState.REFUSED,
    "canceled": RunState.CANCELLED,
    "failed": RunState.ERROR,
    "failure": RunState.ERROR,
    "exception": RunState.ERROR,
}


def normalize_state(value: str) -> RunState:
    """The run state for a state name or a runtime's stop reason; unknown names raise ValueError."""
    key = value.strip().lower().replace("-", "_")
    if key in _ALIASES:
        return _ALIASES[key]
    try:
        return RunState(key)
    except ValueError:
        raise ValueError(f"unknown run state {value!r}") from None
