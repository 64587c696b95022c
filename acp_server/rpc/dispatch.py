"""Inbound request dispatch; the only module that imports jsonrpcserver.

`Dispatcher.dispatch` takes one request or notification the peer has already checked (its
params an object, an array or absent) and returns the response object, or None for a
notification. Handlers receive the params object (`{}` when there are none) and return a JSON
value; `RpcError` becomes its own error, anything else -32603 with a safe message, its
traceback going to the log only. Params by position are refused here, before jsonrpcserver
would bind them, so every -32602 it passes on is a handler's own.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast


def _register_package_without_init(name: str) -> None:
    """Make `name` importable as a package whose `__init__` runs only when one of its own names
    is first asked for (PEP 562 `__getattr__`).

    Why: jsonrpcserver's `__init__` imports its HTTP server and request validator, which pull in
    http.server and jsonschema, about 60 ms of a 150 ms start-up budget; we use neither, only
    the dispatcher submodules imported below, which import nothing of them. The same for
    `oslash`, whose `__init__` imports all of its monads (about 5 ms) where jsonrpcserver uses
    only `oslash.either`. Anyone else in the process (an agent) who imports the package and uses
    a package-level name gets the real `__init__` run at that moment, so the package behaves as
    it always did."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not an ordinary package: import it normally below (and pay for its __init__)
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def __getattr__(attribute: str) -> Any:
        del package.__dict__["__getattr__"]
        loader.exec_module(package)  # the real __init__; its submodules are already loaded
        return getattr(package, attribute)

    package.__dict__["__getattr__"] = __getattr__
    sys.modules[name] = package


_register_package_without_init("jsonrpcserver")
_register_package_without_init("oslash")

from jsonrpcserver.async_dispatcher import dispatch_request  # noqa: E402 (after the package is registered)
from jsonrpcserver.dispatcher import create_request, to_response  # noqa: E402
from jsonrpcserver.exceptions import JsonRpcError  # noqa: E402
from jsonrpcserver.methods import Methods  # noqa: E402
from jsonrpcserver.response import ResponseType, to_serializable_one  # noqa: E402
from jsonrpcserver.result import Success  # noqa: E402

from acp_server.rpc.errors import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, RpcError  # noqa: E402

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[Any]]


class Dispatcher:
    def __init__(self, handlers: Mapping[str, Handler]) -> None:
        # jsonrpcserver types its methods as synchronous; its async dispatcher awaits them.
        self._methods = cast(Methods, {name: _wrap(name, handler) for name, handler in handlers.items()})

    async def dispatch(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Serve one message already checked by the peer. The handler starts in this very task
        (no extra task hop), so messages are handled in the order the peer starts them."""
        params = message.get("params")
        if isinstance(params, list) and params:  # by position: our handlers take named params
            if "id" not in message:
                return None
            error = {"code": INVALID_PARAMS, "message": "Invalid params: params must be an object"}
            return {"jsonrpc": "2.0", "id": message["id"], "error": error}
        request = create_request({**message, "params": params or {}})
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
