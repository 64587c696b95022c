"""JSON-RPC error codes and the one exception type that becomes a wire error.

Handlers raise `RpcError`; the dispatcher turns it into `{"code", "message", "data"}`. Any
other exception becomes -32603 with a safe message, its traceback going to the log only.
`invalid_params` is the one place the -32602 shape (`{"errors": [{"field", "problem"}]}`) is made.
"""

from __future__ import annotations

from typing import Any, NamedTuple

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800
RESOURCE_NOT_FOUND = -32002
AUTH_REQUIRED = -32000

SUMMARIZED_PROBLEMS = 3  # a message names this many failing fields; `data` names them all


class RpcError(Exception):
    """An error answer for a request, safe to show to the peer as it is."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class FieldProblem(NamedTuple):
    """One failing field of a request: its path on the wire and what is wrong, never its value."""

    field: str
    problem: str


def invalid_params(*problems: FieldProblem, message: str | None = None) -> RpcError:
    """-32602 naming every failing field; the message says `message`, or lists the first few."""
    summary = message or "; ".join(f"{p.field} {p.problem}" for p in problems[:SUMMARIZED_PROBLEMS])
    errors = [{"field": p.field, "problem": p.problem} for p in problems]
    return RpcError(INVALID_PARAMS, f"Invalid params: {summary}", {"errors": errors})


class PeerClosedError(Exception):
    """The connection closed: an outbound request went unanswered, or work was spawned too late."""


class RequestTimeoutError(Exception):
    """An outbound request was not answered before its deadline."""
