"""JSON-RPC error codes and the one exception type that becomes a wire error.

Handlers raise `RpcError`; the dispatcher turns it into `{"code", "message", "data"}`. Any
other exception becomes -32603 with a safe message, its traceback going to the log only.
"""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800
AUTH_REQUIRED = -32000
RESOURCE_NOT_FOUND = -32002


class RpcError(Exception):
    """An error answer for a request, safe to show to the peer as it is."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_wire(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class PeerClosedError(Exception):
    """The connection closed before an outbound request was answered."""


class RequestTimeoutError(Exception):
    """An outbound request was not answered before its deadline."""
