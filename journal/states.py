"""How a run ends: the one vocabulary of run states, and the one place runtime aliases map to it.

Runtimes say `end_turn`, `canceled`, `failure` or `done`; the journal stores only `RunState`.
`normalize_state` is the single translation, so stop reasons never leak in as new states;
`final_state` adds what the stop reason cannot say: the turn said nothing, or its client left.
"""

from __future__ import annotations

from enum import StrEnum


class RunState(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"  # the server process died during the run
    CONNECTION_LOST = "connection_lost"  # the client went away during the run
    NO_RESPONSE = "no_response"  # the run ended normally without any agent output
    REFUSED = "refused"
    MAX_TOKENS = "max_tokens"
    MAX_TURN_REQUESTS = "max_turn_requests"
    ERROR = "error"


TERMINAL_STATES: frozenset[RunState] = frozenset(RunState) - {RunState.RUNNING}

# The runtime event kinds that answer a prompt; a completed run with none is `no_response`.
RESPONSE_KINDS = frozenset({"text", "thought", "tool_started", "tool_updated", "plan"})

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
    "no_output": RunState.NO_RESPONSE,
    "empty": RunState.NO_RESPONSE,
    "disconnected": RunState.CONNECTION_LOST,
    "client_disconnected": RunState.CONNECTION_LOST,
    "connection_closed": RunState.CONNECTION_LOST,
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


def final_state(stop_reason: str, *, responded: bool, client_left: bool) -> RunState:
    """The state of a run that ended with `stop_reason`: `connection_lost` when its client went
    away before it ended, `no_response` when it completed without a `RESPONSE_KINDS` event."""
    if client_left:
        return RunState.CONNECTION_LOST
    state = normalize_state(stop_reason)
    return RunState.NO_RESPONSE if state is RunState.COMPLETED and not responded else state
