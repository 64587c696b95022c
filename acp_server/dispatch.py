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
from jsonrpcserver.async_dispatcher import dispatch_to_response_pure
from jsonrpcserver.response import ErrorResponse
from oslash.either import Left  # type: ignore[import-untyped]

from acp_server.errors import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, RpcError

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[Any]]


def _identity(message: Any) -> Any:
    return message


def _accept(message: Any) -> Any:
    # The peer validated the envelope already; jsonrpcserver's jsonschema pass would only
    # repeat that work on every message.
    return message


class Dispatcher:
    def __init__(self, handlers: Mapping[str, Handler]) -> None:
        self._methods = {name: _wrap(name, handler) for name, handler in handlers.items()}

    async def dispatch(self, message: dict[str, Any]) -> dict[str, Any] | None:
        response = await dispatch_to_response_pure(
            deserializer=_identity,
            validator=_accept,
            methods=self._methods,
            context=None,
            post_process=_identity,
            request=message,
        )
        if response is None:
            return None
        if isinstance(response, Left):
            return {"jsonrpc": "2.0", "id": message.get("id"), "error": _error(response._error)}
        return {"jsonrpc": "2.0", "id": message.get("id"), "result": response._value.result}


def _error(error: ErrorResponse) -> dict[str, Any]:
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
