"""Inbound request dispatch: a method table, and the one place where exceptions become wire errors.

`Dispatcher.dispatch` takes one request or notification the peer has already checked (its
params an object, an array or absent) and returns the response object, or None for a
notification. Handlers receive the params object (`{}` when there are none) and return a JSON
value; `RpcError` becomes its own error, anything else -32603 with a safe message, its
traceback going to the log only.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

from acp_server.rpc.errors import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, RpcError

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[Any]]


class Dispatcher:
    def __init__(self, handlers: Mapping[str, Handler]) -> None:
        self._handlers = dict(handlers)

    async def dispatch(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Serve one message. The handler runs in this very task (no extra task hop), so
        messages are handled in the order the peer starts them."""
        outcome = await self._call(message["method"], message.get("params"))
        if "id" not in message:
            return None
        return {"jsonrpc": "2.0", "id": message["id"], **outcome}

    async def _call(self, method: str, params: Any) -> dict[str, Any]:
        """`{"result": ...}` or `{"error": ...}`."""
        handler = self._handlers.get(method)
        if handler is None:
            return {"error": {"code": METHOD_NOT_FOUND, "message": "Method not found"}}
        if isinstance(params, list) and params:  # by position: our handlers take named params
            return {"error": {"code": INVALID_PARAMS, "message": "Invalid params: params must be an object"}}
        try:
            return {"result": await handler(cast(dict[str, Any], params) if isinstance(params, dict) else {})}
        except RpcError as exc:
            error: dict[str, Any] = {"code": exc.code, "message": exc.message}
            if _json_data(exc.data):
                error["data"] = exc.data
            return {"error": error}
        except Exception:
            log.exception("handler for %s failed", method)
            return {"error": {"code": INTERNAL_ERROR, "message": "Internal error"}}


def _json_data(value: object) -> bool:
    """An error's `data` of another type (None included) is left out."""
    return isinstance(value, dict | list | str | int | float | bool)
