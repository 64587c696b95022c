"""A JSON-RPC 2.0 peer over a frame transport; knows nothing of ACP.

It reads frames, answers malformed ones with the precise error, serves each inbound request
in its own task and cancel scope (honouring `$/cancel_request`), handles notifications one at
a time in the order they were read, and sends our own requests through a pending table whose
entries are always removed in a `finally`. One writer task owns the output (`rpc.outbox`):
frames leave in the order they were queued, so a turn's notifications always precede its
response. Memory is bounded per connection: reading pauses while the output backs up, and
requests in flight are capped (as HTTP/2 caps streams).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any, Protocol, cast

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

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
from acp_server.rpc.outbox import Outbox
from acp_server.rpc.wire import Frame, FrameWriter, Oversized

log = logging.getLogger(__name__)

CANCEL_REQUEST = "$/cancel_request"
MAX_IN_FLIGHT = 128  # requests served at once on one connection
BUSY_WAIT = 1.0  # seconds a request over the cap waits for a place before it is refused
SHUTDOWN_GRACE = 1.5
ORDERED_BUFFER = 1024  # notifications (and responses behind them) read but not yet handled

Message = dict[str, Any]
IdKey = tuple[str, Any]


class Dialect(Protocol):
    """How this connection's peer speaks, chosen once by the layer above (ACP's protocol version):
    it rewrites the params of what we send; the JSON-RPC layer only applies it."""

    def notification(self, method: str, params: Message) -> list[tuple[str, Message]]:
        """What to send for one notification: none, it rewritten, or several."""
        ...

    def request(self, method: str, params: Message) -> tuple[list[tuple[str, Message]], Message]:
        """Notifications to send first, and the request's params."""
        ...

    def answered(self, method: str, params: Message) -> list[tuple[str, Message]]:
        """Notifications to send once a request `params` (as sent) has its answer or gave up."""
        ...


# True while a notification handler runs: waiting there for a response would deadlock.
_in_notification: contextvars.ContextVar[bool] = contextvars.ContextVar("in_notification", default=False)


def _id_key(request_id: Any) -> IdKey:
    return (type(request_id).__name__, request_id)


def _valid_id(request_id: Any) -> bool:
    """ACP request ids are strings, int64 integers or null."""
    return (
        request_id is None
        or isinstance(request_id, str)
        or (isinstance(request_id, int) and not isinstance(request_id, bool) and -(2**63) <= request_id < 2**63)
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# One decoder for every frame (`json.loads` with an option builds a new one per call). NaN and
# Infinity are Python's, not JSON's: a frame carrying them is not JSON.
JSON_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


class Peer:
    """One side of a JSON-RPC connection: `run` serves a dispatcher over a frame transport,
    `notify`, `request` and `spawn` are its outbound side.

    Ordering: inbound notifications are handled one at a time, in read order, by one task; a
    response read after a notification resolves its waiter only once that notification's
    handler has returned. So a client sees every notification the other side sent before a
    response by the time the request that response answers returns. Requests are not ordered:
    each runs at once in its own task and cancel scope (`sequential` methods run inline in the
    read loop, so nothing read after them overtakes them), and `$/cancel_request` acts at once.

    The rule that follows: a notification handler must not wait for a response from the other
    side (`request`), since that response queues behind the handler itself; `request` refuses
    with RuntimeError instead of deadlocking. Such a handler hands the work to `spawn`. It may
    `notify`, and should return promptly, as later notifications and responses wait for it.

    Bounds: reading waits while the outbox is over its high-water mark, so a client that stops
    reading stops being read. At most `max_in_flight` requests run at once; at the cap, reading
    waits up to BUSY_WAIT for one to finish, then refuses requests (-32800) until a place frees.
    """

    def __init__(self, *, sequential: frozenset[str] = frozenset(), max_in_flight: int = MAX_IN_FLIGHT) -> None:
        self._sequential = sequential
        self._max_in_flight = max_in_flight
        self._refusing = False  # at the cap after a wait in vain: refuse at once until a place frees
        self._dispatcher: Dispatcher | None = None
        self._outbox = Outbox()
        self._inflight: dict[IdKey, anyio.CancelScope] = {}
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next_id = 0
        self._closed = False
        self._spawned = 0  # work started by `spawn`, counted so that a response knows it has some
        self._drained = asyncio.Event()
        self._reading = anyio.CancelScope()
        self._tasks: TaskGroup | None = None
        self._ordered: MemoryObjectSendStream[Message] | None = None
        self._ordered_backlog = 0  # queued or being handled; 0 means a response may resolve at once
        self._ordered_done = anyio.Event()
        self._dialect: Dialect | None = None

    def speak(self, dialect: Dialect) -> None:
        """From now on, what this peer sends goes through `dialect` (set by `initialize`)."""
        self._dialect = dialect

    # --- running -------------------------------------------------------------------------

    async def run(
        self,
        frames: AsyncIterable[Frame],
        writer: FrameWriter,
        dispatcher: Dispatcher,
        *,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Serve `dispatcher` until the input ends; then finish the notifications already read,
        fail what is still pending, call `on_close`, wind down in-flight requests and flush."""
        self._dispatcher = dispatcher
        async with anyio.create_task_group() as outer:
            outer.start_soon(self._outbox.run, writer)
            async with anyio.create_task_group() as requests:
                self._tasks = requests
                send, receive = anyio.create_memory_object_stream[Message](ORDERED_BUFFER)
                self._ordered = send
                ordered_scope = anyio.CancelScope()
                requests.start_soon(self._ordered_loop, receive, ordered_scope)
                with self._reading:
                    async for frame in frames:
                        await self._outbox.room()  # a client that does not read is not read either
                        try:
                            await self._receive(frame, requests)
                        except Exception:
                            # A bug here must cost one message, never the connection.
                            log.exception("could not handle an incoming message; it was dropped")
                self._closed = True
                send.close()
                await self._finish_ordered(ordered_scope)
                self._fail_pending()
                if on_close is not None:
                    await on_close()
                await self._wind_down(requests)
            self._outbox.close()
        await writer.aclose()

    async def _finish_ordered(self, scope: anyio.CancelScope) -> None:
        """Let the notifications and responses read before the end be handled, briefly."""
        with anyio.move_on_after(SHUTDOWN_GRACE) as grace:
            await self._ordered_done.wait()
        if grace.cancelled_caught:
            log.warning("shutdown: a notification handler did not finish; cancelling it")
            scope.cancel()

    async def _wind_down(self, requests: TaskGroup) -> None:
        with anyio.move_on_after(SHUTDOWN_GRACE) as grace:
            while self._inflight:
                self._drained.clear()
                await self._drained.wait()
        if grace.cancelled_caught:
            log.warning("shutdown: cancelling %d unfinished requests", len(self._inflight))
            requests.cancel_scope.cancel()

    def spawn(self, func: Callable[[], Awaitable[None]]) -> None:
        """Run `func` once the current handler's response has been queued (it starts on a later
        loop step), e.g. notifications that must follow a response. Raises PeerClosedError once
        the input has ended: nothing new starts on a connection that is winding down."""
        if self._tasks is None:
            raise RuntimeError("spawn: the peer is not running")
        if self._closed:
            raise PeerClosedError("spawn: the connection is closed")
        self._spawned += 1
        self._tasks.start_soon(self._unordered, func)

    @staticmethod
    async def _unordered(func: Callable[[], Awaitable[None]]) -> None:
        _in_notification.set(False)  # spawned work is not part of the handler that spawned it
        await func()

    def stop(self) -> None:
        """Stop reading as if the input had ended (SIGTERM); in-flight work winds down."""
        self._reading.cancel()

    def _send_error(self, request_id: Any, error: Message) -> None:
        self._outbox.put({"jsonrpc": "2.0", "id": request_id, "error": error})

    # --- inbound -------------------------------------------------------------------------

    async def _receive(self, frame: Frame, tg: TaskGroup) -> None:
        message = self._parse(frame)
        if message is None:
            return
        if "method" not in message and ("result" in message or "error" in message):
            if self._ordered_backlog:
                await self._enqueue_ordered(message)  # behind the notifications read before it
            else:
                self._receive_response(message)
            return
        problem = _envelope_problem(message)
        if problem is not None:
            request_id = message.get("id")
            self._send_error(
                request_id if _valid_id(request_id) else None,
                {"code": INVALID_REQUEST, "message": f"Invalid request: {problem}"},
            )
            return
        if message.get("params") is None:
            message["params"] = {}
        if "id" not in message:
            await self._receive_notification(message)
        elif message["method"] in self._sequential:
            await self._serve(message)
        else:
            await self._start_request(message, tg)

    def _parse(self, frame: Frame) -> Message | None:
        """The frame's JSON object; None (after answering any error) when there is none."""
        if isinstance(frame, Oversized):
            self._send_error(
                None,
                {
                    "code": INVALID_REQUEST,
                    "message": f"Message too large: {frame.size} bytes (limit {frame.limit})",
                },
            )
            return None
        if not frame.strip():
            return None
        try:
            message: object = JSON_DECODER.decode(frame.decode("utf-8"))
        except (ValueError, RecursionError):
            self._send_error(None, {"code": PARSE_ERROR, "message": "Parse error: not valid JSON"})
            return None
        if not isinstance(message, dict):
            reason = "batches are not supported" if isinstance(message, list) else "not an object"
            self._send_error(None, {"code": INVALID_REQUEST, "message": f"Invalid request: {reason}"})
            return None
        return cast(Message, message)

    async def _start_request(self, message: Message, tg: TaskGroup) -> None:
        key = _id_key(message["id"])
        if key in self._inflight:
            self._send_error(
                message["id"],
                {
                    "code": INVALID_REQUEST,
                    "message": "Invalid request: this id is already in use by a request in flight",
                },
            )
            return
        if not await self._place_in_flight():
            self._send_error(
                message["id"],
                {
                    "code": REQUEST_CANCELLED,
                    "message": f"Server busy: {self._max_in_flight} requests are in flight on this connection",
                },
            )
            return
        self._inflight[key] = anyio.CancelScope()
        tg.start_soon(self._serve_tracked, message, key)

    async def _place_in_flight(self) -> bool:
        """Whether a request may start: at the cap, reading waits for one to finish, briefly; a
        request still over it is refused, and so is every one after it until a place is free,
        so that the notifications and answers behind them (`session/cancel`, a permission answer
        a request in flight waits for) are read."""
        if len(self._inflight) < self._max_in_flight:
            self._refusing = False
            return True
        if self._refusing:
            return False
        with anyio.move_on_after(BUSY_WAIT):
            while len(self._inflight) >= self._max_in_flight:
                self._drained.clear()
                await self._drained.wait()
            return True
        self._refusing = True
        return False

    async def _receive_notification(self, message: Message) -> None:
        if message["method"] != CANCEL_REQUEST:
            await self._enqueue_ordered(message)
            return
        params = message["params"]
        if isinstance(params, dict) and "requestId" in params:
            request_id = cast(Message, params)["requestId"]
            scope = self._inflight.get(_id_key(request_id)) if _valid_id(request_id) else None
            if scope is not None:
                scope.cancel()

    async def _enqueue_ordered(self, message: Message) -> None:
        assert self._ordered is not None  # set before the first frame is read
        self._ordered_backlog += 1
        await self._ordered.send(message)

    async def _ordered_loop(self, receive: MemoryObjectReceiveStream[Message], scope: anyio.CancelScope) -> None:
        _in_notification.set(True)
        try:
            with scope, receive:
                async for message in receive:
                    try:
                        if "method" in message:
                            await self._serve(message)
                        else:
                            self._receive_response(message)
                    except Exception:
                        log.exception("could not handle an incoming notification; it was dropped")
                    finally:
                        self._ordered_backlog -= 1
        finally:
            self._ordered_done.set()

    async def _serve_tracked(self, message: Message, key: IdKey) -> None:
        try:
            with self._inflight[key] as scope:
                await self._serve(message)
            if scope.cancelled_caught:
                self._send_error(message["id"], {"code": REQUEST_CANCELLED, "message": "Request cancelled"})
        finally:
            del self._inflight[key]
            self._drained.set()

    async def _serve(self, message: Message) -> None:
        assert self._dispatcher is not None  # set by run before anything is read
        spawned = self._spawned
        response = await self._dispatcher.dispatch(message)
        if response is None:
            return
        try:
            # A handler that spawned work (notifications that follow its response, such as a
            # new session's commands) has its response wait for the writer's task, so that the
            # client reads them together, before it can act on the response.
            self._outbox.put(response, at_once=self._spawned == spawned)
        except (ValueError, TypeError):
            log.exception("result of %s is not JSON-serialisable", message["method"])
            self._send_error(message["id"], {"code": INTERNAL_ERROR, "message": "Internal error"})

    # --- outbound ------------------------------------------------------------------------

    async def notify(self, method: str, params: Message) -> None:
        if self._dialect is None:
            await self._outbox.send({"jsonrpc": "2.0", "method": method, "params": params})
            return
        for name, rewritten in self._dialect.notification(method, params):
            await self._outbox.send({"jsonrpc": "2.0", "method": name, "params": rewritten})

    async def notify_encoded(self, frame: bytes) -> None:
        """`notify` of a whole frame encoded once by `outbox.encode` for several peers."""
        await self._outbox.send_encoded(frame)

    async def notify_raw(self, method: str, params_json: str) -> None:
        """`notify` with params already encoded as `encode` would (a replay cache keeps them so)."""
        if self._dialect is not None:
            await self.notify(method, json.loads(params_json))
            return
        frame = f'{{"jsonrpc":"2.0","method":{json.dumps(method)},"params":{params_json}}}\n'
        await self._outbox.send_encoded(frame.encode())

    async def request(self, method: str, params: Message, *, timeout: float | None = None) -> Any:
        """Send a request and wait for its result; withdraws it with `$/cancel_request` when
        the deadline passes or the caller is cancelled."""
        if _in_notification.get():
            raise RuntimeError(
                f"{method}: a notification handler cannot wait for a response "
                "(it would wait for itself); use Peer.spawn"
            )
        if self._closed:
            raise PeerClosedError(f"{method}: the connection is closed")
        if self._dialect is not None:
            before, params = self._dialect.request(method, params)
            for name, notice in before:
                await self.notify(name, notice)
        request_id = self._next_id
        self._next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        answered = False
        try:
            await self._outbox.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            with anyio.fail_after(timeout):
                result = await future
            answered = True
            return result
        except TimeoutError:
            raise RequestTimeoutError(f"{method}: no answer within {timeout:g} s") from None
        finally:
            self._pending.pop(request_id, None)
            if not answered and (future.cancelled() or not future.done()) and not self._closed:
                self._outbox.put({"jsonrpc": "2.0", "method": CANCEL_REQUEST, "params": {"requestId": request_id}})
            if self._dialect is not None and not self._closed:
                for name, notice in self._dialect.answered(method, params):
                    self._outbox.put({"jsonrpc": "2.0", "method": name, "params": notice})

    def _receive_response(self, message: Message) -> None:
        request_id = message.get("id")
        future = self._pending.get(request_id) if isinstance(request_id, int) else None
        if future is None or future.done():
            log.info("ignoring a response to unknown or finished request id %r", request_id)
            return
        if "error" in message:
            future.set_exception(_remote_error(message["error"]))
        else:
            future.set_result(message.get("result"))

    def _fail_pending(self) -> None:
        for request_id, future in list(self._pending.items()):
            if not future.done():
                future.set_exception(PeerClosedError(f"request {request_id}: the connection closed"))


def _remote_error(error: object) -> RpcError:
    body = cast(Message, error) if isinstance(error, dict) else {}
    code = body.get("code")
    return RpcError(
        code if isinstance(code, int) else INTERNAL_ERROR, str(body.get("message", "error")), body.get("data")
    )


def _envelope_problem(message: Message) -> str | None:
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
