"""Inbound request dispatch; the only module that imports jsonrpcserver.

`Dispatcher.dispatch` takes one parsed request or notification and returns the response
object (or None for a notification). Handlers receive the params object and return a JSON
value; `RpcError` becomes its own error, anything else -32603 with a safe message.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from jsonrpcserver import JsonRpcError, Success
from jsonrpcserver.async_dispatcher import dispatch_request
from jsonrpcserver.dispatcher import create_request
from jsonrpcserver.result import ErrorResult
from oslash.either import Left  # type: ignore[import-untyped]

from acp_server.rpc.errors import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, RpcError

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[Any]]


class Dispatcher:
    def __init__(self, handlers: Mapping[str, Handler]) -> None:
        self._methods = {name: _wrap(name, handler) for name, handler in handlers.items()}

    async def dispatch(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Serve one message already checked by the peer. The handler starts in this very task
        (no extra task hop), so messages are handled in the order the peer starts them."""
        _, result = await dispatch_request(self._methods, None, create_request(message))
        if "id" not in message:
            return None
        if isinstance(result, Left):
            return {"jsonrpc": "2.0", "id": message["id"], "error": _error(result._error)}
        return {"jsonrpc": "2.0", "id": message["id"], "result": result._value.result}


def _error(error: ErrorResult) -> dict[str, Any]:
    if error.code == METHOD_NOT_FOUND:
        return {"code": METHOD_NOT_FOUND, "message": "Method not found"}
    if error.code == INVALID_PARAMS and not isinstance(error.data, dict):
        # jsonrpcserver's own binding check: params was an array, not an object.
        return {"code": INVALID_PARAMS, "message": "Invalid params: params must be an object"}
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    if isinstance(error.data, dict | list | str | int | float | bool):
        body["data"] = error.data
    return body


def _wrap(name: str, handler: Handler) -> Callable[..., Awaitable[Any]]:
    async def call(_context: Any, /, **params: Any) -> Any:
        try:
            return Success(await handler(params))
        except RpcError as exc:
            raise JsonRpcError(exc.code, exc.message, exc.data) from None
        except Exception:
            log.exception("handler for %s failed", name)
            raise JsonRpcError(INTERNAL_ERROR, "Internal error") from None

    return call
