"""A JSON-RPC 2.0 peer over a frame transport; knows nothing of ACP.

It reads frames, answers malformed ones with the precise error, serves each inbound request
in its own task and cancel scope (honouring `$/cancel_request`), and sends our own requests
through a pending table whose entries are always removed in a `finally`. One writer task owns
the output: frames leave in the order they were queued, so a turn's notifications always
precede its response.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any

import anyio

from acp_server.rpc.dispatch import Dispatcher
from acp_server.rpc.errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    PeerClosedError,
    RequestTimeoutError,
    RpcError,
)
from acp_server.rpc.wire import Frame, FrameWriter, Oversized

log = logging.getLogger(__name__)

CANCEL_REQUEST = "$/cancel_request"
HIGH_WATER_BYTES = 1 << 20
SHUTDOWN_GRACE = 1.5

_encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def encode(message: dict[str, Any]) -> bytes:
    """Compact, ASCII-escaped JSON: always one line, always valid UTF-8, whatever the text."""
    return _encode(message).encode() + b"\n"


def _id_key(request_id: Any) -> tuple[str, Any]:
    return (type(request_id).__name__, request_id)


def _valid_id(request_id: Any) -> bool:
    """ACP request ids are strings, int64 integers or null."""
    return request_id is None or isinstance(request_id, str) or (
        isinstance(request_id, int) and not isinstance(request_id, bool) and -(2**63) <= request_id < 2**63
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class Peer:
    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        sequential: frozenset[str] = frozenset(),
        max_frame_bytes: int = 64 << 20,
    ) -> None:
        self._dispatcher = dispatcher
        self._sequential = sequential
        self._max_frame_bytes = max_frame_bytes
        self._outbox: deque[bytes] = deque()
        self._outbox_bytes = 0
        self._has_data = asyncio.Event()
        self._has_room = asyncio.Event()
        self._has_room.set()
        self._inflight: dict[tuple[str, Any], anyio.CancelScope] = {}
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next_id = 0
        self._closed = False
        self._write_failed = False
        self._drained = asyncio.Event()
        self._reading = anyio.CancelScope()
        self._tasks: anyio.abc.TaskGroup | None = None
        self.on_close: Callable[[], Awaitable[None]] | None = None

    # --- running -------------------------------------------------------------------------

    async def run(self, frames: AsyncIterable[Frame], writer: FrameWriter) -> None:
        """Serve until the input ends; then wind down in-flight work and flush the output."""
        async with anyio.create_task_group() as outer:
            outer.start_soon(self._write_loop, writer)
            async with anyio.create_task_group() as requests:
                self._tasks = requests
                with self._reading:
                    async for frame in frames:
                        try:
                            await self._receive(frame, requests)
                        except Exception:
                            # A bug here must cost one message, never the connection.
                            log.exception("could not handle an incoming message; it was dropped")
                self._closed = True
                self._fail_pending()
                if self.on_close is not None:
                    await self.on_close()
                with anyio.move_on_after(SHUTDOWN_GRACE) as grace:
                    while self._inflight:
                        self._drained.clear()
                        await self._drained.wait()
                if grace.cancelled_caught:
                    log.warning("shutdown: cancelling %d unfinished requests", len(self._inflight))
                    requests.cancel_scope.cancel()
            self._has_data.set()  # lets the writer see the close once the outbox is empty
        await writer.aclose()

    def spawn(self, func: Callable[[], Awaitable[None]]) -> None:
        """Run `func` once the current handler's response has been queued (it starts on a later
        loop step), e.g. notifications that must follow a response."""
        if self._tasks is not None and not self._closed:
            self._tasks.start_soon(func)

    def stop(self) -> None:
        """Stop reading as if the input had ended (SIGTERM); in-flight work winds down."""
        self._reading.cancel()

    async def _write_loop(self, writer: FrameWriter) -> None:
        while True:
            while not self._outbox:
                if self._closed and not self._inflight:
                    return
                self._has_data.clear()
                await self._has_data.wait()
            data = b"".join(self._outbox)
            self._outbox.clear()
            self._outbox_bytes = 0
            self._has_room.set()
            if self._write_failed:
                continue
            try:
                await writer.write(data)
            except (BrokenPipeError, ConnectionError, OSError) as exc:
                log.warning("output closed by the client: %s", exc)
                self._write_failed = True

    def _queue(self, message: dict[str, Any]) -> int:
        data = encode(message)
        self._outbox.append(data)
        self._outbox_bytes += len(data)
        self._has_data.set()
        return len(data)

    async def _send(self, message: dict[str, Any]) -> None:
        self._queue(message)
        while self._outbox_bytes > HIGH_WATER_BYTES and not self._write_failed:
            self._has_room.clear()
            await self._has_room.wait()

    def _send_error(self, request_id: Any, error: dict[str, Any]) -> None:
        self._queue({"jsonrpc": "2.0", "id": request_id, "error": error})

    # --- inbound -------------------------------------------------------------------------

    async def _receive(self, frame: Frame, tg: anyio.abc.TaskGroup) -> None:
        if isinstance(frame, Oversized):
            self._send_error(None, {
                "code": INVALID_REQUEST,
                "message": f"Message too large: {frame.size} bytes "
                f"(limit {self._max_frame_bytes})",
            })
            return
        if not frame.strip():
            return
        try:
            message = json.loads(frame.decode("utf-8"), parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            self._send_error(None, {"code": PARSE_ERROR, "message": "Parse error: not valid JSON"})
            return
        if not isinstance(message, dict):
            reason = "batches are not supported" if isinstance(message, list) else "not an object"
            self._send_error(None, {"code": INVALID_REQUEST, "message": f"Invalid request: {reason}"})
            return
        if "method" not in message and ("result" in message or "error" in message):
            self._receive_response(message)
            return
        problem = _envelope_problem(message)
        if problem is not None:
            request_id = message.get("id")
            self._send_error(request_id if _valid_id(request_id) else None,
                             {"code": INVALID_REQUEST, "message": f"Invalid request: {problem}"})
            return
        if message.get("params") is None:
            message["params"] = {}
        if "id" not in message:
            await self._receive_notification(message, tg)
        elif message["method"] in self._sequential:
            await self._serve(message)
        else:
            key = _id_key(message["id"])
            if key in self._inflight:
                self._send_error(message["id"], {
                    "code": INVALID_REQUEST,
                    "message": "Invalid request: this id is already in use by a request in flight",
                })
                return
            self._inflight[key] = anyio.CancelScope()
            tg.start_soon(self._serve_tracked, message, key)

    async def _receive_notification(self, message: dict[str, Any], tg: anyio.abc.TaskGroup) -> None:
        if message["method"] == CANCEL_REQUEST:
            params = message["params"]
            if isinstance(params, dict) and "requestId" in params and _valid_id(params["requestId"]):
                scope = self._inflight.get(_id_key(params["requestId"]))
                if scope is not None:
                    scope.cancel()
            return
        tg.start_soon(self._serve, message)

    async def _serve_tracked(self, message: dict[str, Any], key: tuple[str, Any]) -> None:
        try:
            with self._inflight[key] as scope:
                await self._serve(message)
            if scope.cancelled_caught:
                self._send_error(message["id"], {"code": REQUEST_CANCELLED, "message": "Request cancelled"})
        finally:
            del self._inflight[key]
            self._drained.set()
            if self._closed:
                self._has_data.set()

    async def _serve(self, message: dict[str, Any]) -> None:
        response = await self._dispatcher.dispatch(message)
        if response is None:
            return
        try:
            self._queue(response)
        except (ValueError, TypeError):
            log.exception("result of %s is not JSON-serialisable", message["method"])
            self._send_error(message["id"], {"code": INTERNAL_ERROR, "message": "Internal error"})

    # --- outbound ------------------------------------------------------------------------

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: dict[str, Any], *, timeout: float | None = None) -> Any:
        """Send a request and wait for its result; withdraws it with `$/cancel_request` when
        the deadline passes or the caller is cancelled."""
        if self._closed:
            raise PeerClosedError(f"{method}: the client connection is closed")
        request_id = self._next_id
        self._next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        answered = False
        try:
            await self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            with anyio.fail_after(timeout):
                result = await future
            answered = True
            return result
        except TimeoutError:
            raise RequestTimeoutError(f"{method}: no answer from the client within {timeout:g} s") from None
        finally:
            self._pending.pop(request_id, None)
            if not answered and (future.cancelled() or not future.done()) and not self._closed:
                self._queue({"jsonrpc": "2.0", "method": CANCEL_REQUEST, "params": {"requestId": request_id}})

    def _receive_response(self, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        future = self._pending.get(request_id) if isinstance(request_id, int) else None
        if future is None or future.done():
            log.info("ignoring a response to unknown or finished request id %r", request_id)
            return
        if "error" in message:
            error = message["error"] if isinstance(message["error"], dict) else {}
            future.set_exception(RpcError(
                error.get("code", INTERNAL_ERROR) if isinstance(error.get("code"), int) else INTERNAL_ERROR,
                str(error.get("message", "error")),
                error.get("data"),
            ))
        else:
            future.set_result(message.get("result"))

    def _fail_pending(self) -> None:
        for request_id, future in list(self._pending.items()):
            if not future.done():
                future.set_exception(PeerClosedError(f"request {request_id}: the client connection closed"))


def _envelope_problem(message: dict[str, Any]) -> str | None:
    if message.get("jsonrpc") != "2.0":
        return 'the "jsonrpc" member must be "2.0"'
    if not isinstance(message.get("method"), str):
        return 'the "method" member must be a string'
    if "id" in message and not _valid_id(message["id"]):
        return 'the "id" member must be a string, an integer or null'
    params = message.get("params")
    if params is not None and not isinstance(params, dict | list):
        return 'the "params" member must be an object'
    return None
