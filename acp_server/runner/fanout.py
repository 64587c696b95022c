"""What the runner's fan-out sends a session's v2 connections: each update its routes send,
rewritten once for all of them (as one connection's `V2Dialect` rewrites it for that one).

A runner's turn is shared: the connection that prompted knows its turn started and ended (v2
answers the prompt and says so itself), the others learn it from the routes' echo, the prompt's
`user_message_chunk`s as the turn starts and a `turnEnded` note as it ends. For v2 connections
those become the turn's lifecycle: `state_update` running before the prompt, idle with its stop
reason after the end. A cancel of the session's turn, from any connection, ends the tool calls
it leaves open `cancelled` for every v2 connection.
"""

from __future__ import annotations

from typing import Any

from acp_server.acp.v2 import Notice, V2Dialect, as_object
from acp_server.protocol import methods
from acp_server.rpc.errors import INTERNAL_ERROR
from acp_server.turns import mapping_v2


class FanOut:
    """The v2 form of the routes' notifications, shared by every v2 connection of the runner."""

    def __init__(self) -> None:
        self._dialect = V2Dialect(busy=lambda _: False)  # its state updates carry no background list

    def cancelling(self, session_id: str) -> None:
        self._dialect.cancelling(session_id)

    def notification(self, method: str, params: dict[str, Any]) -> list[Notice]:
        if method != methods.SESSION_UPDATE:
            return [(method, params)]
        shown = self._dialect.notification(method, params)
        update = params["update"]
        kind = update.get("sessionUpdate")
        if kind == "user_message_chunk":  # only the echo sends it live: a turn another one started
            return [_state(params, mapping_v2.state_update("running")), *shown]
        ended = _turn_ended(update) if kind == "session_info_update" else None
        if ended is not None:
            return [*shown, *self._dialect.notification(method, {**params, "update": idle(ended)})]
        return shown


def _turn_ended(update: dict[str, Any]) -> dict[str, Any] | None:
    """The echo's note that a turn ended (`{runId, stopReason}`), if `update` is one."""
    ended = as_object(as_object(update.get("_meta")).get("acp-server")).get("turnEnded")
    return as_object(ended) if ended is not None else None


def idle(ended: dict[str, Any]) -> dict[str, Any]:
    """The idle `state_update` of a turn that ended with `ended["stopReason"]`."""
    reason = ended.get("stopReason") or "end_turn"
    if reason != "error":
        return mapping_v2.state_update("idle", stop_reason=reason)
    error = {"code": INTERNAL_ERROR, "message": "The agent failed"}
    return mapping_v2.state_update("idle", stop_reason="error", error=error)


def _state(params: dict[str, Any], update: dict[str, Any]) -> Notice:
    return methods.SESSION_UPDATE, {"sessionId": params["sessionId"], "update": update}
