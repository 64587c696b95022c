"""Inbound request dispatch; the only module that imports jsonrpcserver.

`Dispatcher.dispatch` takes one parsed request or notification and returns the response
object (or None for a notification). Handlers receive the params object and return a JSON
value; `RpcError` becomes its own error, anything else -32603 with a safe message.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

from jsonrpcserver import JsonRpcError, Success
from jsonrpcserver.async_dispatcher import dispatch_request
from jsonrpcserver.dispatcher import create_request, to_response
from jsonrpcserver.methods import Methods
from jsonrpcserver.response import ResponseType, to_serializable_one

from acp_server.rpc.errors import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, RpcError

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[Any]]


class Dispatcher:
    def __init__(self, handlers: Mapping[str, Handler]) -> None:
        # jsonrpcserver types its methods as synchronous; its async dispatcher awaits them.
        self._methods = cast(Methods, {name: _wrap(name, handler) for name, handler in handlers.items()})

    async def dispatch(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Serve one message already checked by the peer. The handler starts in this very task
        (no extra task hop), so messages are handled in the order the peer starts them."""
        request = create_request(message)
        _, result = await dispatch_request(self._methods, None, request)
        if "id" not in message:
            return None
        # jsonrpcserver's own serializer opens its Either result (it annotates the response
        # instance as a type); we only reshape the error.
        response = cast(ResponseType, to_response(request, result))
        answer = cast(dict[str, Any], to_serializable_one(response))
        if "error" in answer:
            return {"jsonrpc": "2.0", "id": message["id"], "error": _error(answer["error"])}
        return {"jsonrpc": "2.0", "id": message["id"], "result": answer["result"]}


def _error(error: dict[str, Any]) -> dict[str, Any]:
    code, data = error["code"], error.get("data")
    if code == METHOD_NOT_FOUND:
        return {"code": METHOD_NOT_FOUND, "message": "Method not found"}
    if code == INVALID_PARAMS and not isinstance(data, dict):
        # jsonrpcserver's own binding check: params was an array, not an object.
        return {"code": INVALID_PARAMS, "message": "Invalid params: params must be an object"}
    body: dict[str, Any] = {"code": code, "message": error["message"]}
    if isinstance(data, dict | list | str | int | float | bool):
        body["data"] = data
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
