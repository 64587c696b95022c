"""One remote client's connection to the runner, whatever carries it (WebSocket or Streamable
HTTP): a `RunnerAgent` over its own JSON-RPC peer, exactly as a front's connection over the Unix
socket gets, fed the client's messages and handing the agent's back to a `Sink`.

The ACP handlers never learn the transport. What the connection itself knows is who is on the
other end: a read-only token's requests outside `READ_ONLY_METHODS` are answered with
`READ_ONLY_REFUSED` here, before any handler sees them, and its answers to our requests are
dropped. `HttpSink` routes the agent's messages to the SSE streams of the RFD "Streamable HTTP
& WebSocket transport" (the connection's stream, one per session) and buffers them until the
client opens the stream they belong to.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections import deque
from collections.abc import AsyncIterator
from typing import Any, Protocol

import anyio

from acp_server.acp.server import serve
from acp_server.rpc.trace import Trace, TracedWriter, traced_frames
from acp_server.rpc.wire import Frame, FrameWriter
from acp_server.runner.hub import Hub
from acp_server.runner.tokens import READ_ONLY_METHODS, READ_ONLY_REFUSED, Grant

log = logging.getLogger(__name__)

MAX_BUFFERED_BYTES = 64 << 20  # output held for SSE streams nobody reads: past it the connection closes
INBOUND_BUFFER = 64  # client messages read but not yet taken by the peer
RETAINED_BYTES = 1 << 20  # per SSE stream: events sent already, kept for a `Last-Event-ID` resumption

Route = str | None  # a session id, or None for the connection's own stream


class Sink(Protocol):
    """Where a connection's outgoing messages go, one JSON text (no newline) at a time."""

    async def deliver(self, line: bytes) -> None: ...
    def finish(self) -> None: ...


def session_of(message: dict[str, Any]) -> str | None:
    params = message.get("params")
    session_id = params.get("sessionId") if isinstance(params, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    return session_id if isinstance(session_id, str) else None


def is_response(message: dict[str, Any]) -> bool:
    return "method" not in message and "id" in message and ("result" in message or "error" in message)


def refusal(message: dict[str, Any]) -> dict[str, Any]:
    method = message.get("method")
    return {
        "jsonrpc": "2.0",
        "id": message.get("id"),
        "error": {
            "code": READ_ONLY_REFUSED,
            "message": f"this connection is read-only: {method} is refused (a token from `acp-server pair` "
            "without --read-only may send it)",
            "data": {"method": method, "readOnly": True},
        },
    }


def _encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


class _SinkWriter:
    """The peer's frame writer: each newline-ended frame of a batch goes to the sink on its own."""

    def __init__(self, sink: Sink) -> None:
        self._sink = sink

    async def write(self, data: bytes) -> None:
        for line in data.split(b"\n"):
            if line:
                await self._sink.deliver(line)

    async def aclose(self) -> None:
        self._sink.finish()


class RemoteConnection:
    """A remote client's handlers over the hub; `run` serves it until `close` or the input ends."""

    def __init__(self, hub: Hub, *, grant: Grant, sink: Sink, trace: Trace | None = None) -> None:
        self.id = str(uuid.uuid4())
        self.hub = hub
        self.grant = grant  # who opened it: read-only or not, and with which token
        self.read_only = grant.read_only
        self.sink = sink
        self.trace = trace
        self.closed = anyio.Event()
        self._send, self._receive = anyio.create_memory_object_stream[bytes](INBOUND_BUFFER)

    async def run(self) -> None:
        hub = self.hub
        hub.connections += 1
        hub.touch()
        frames: AsyncIterator[Frame] = self._frames()
        writer: FrameWriter = _SinkWriter(self.sink)
        if self.trace is not None:
            frames, writer = traced_frames(frames, self.trace), TracedWriter(writer, self.trace)
        try:
            await serve(hub.agent(read_only=self.read_only), frames, writer)
        except Exception:
            log.exception("a remote connection failed")
        finally:
            hub.connections -= 1
            hub.touch()
            self.closed.set()
            self.sink.finish()

    async def _frames(self) -> AsyncIterator[Frame]:
        async with self._receive:
            async for frame in self._receive:
                yield frame

    async def receive(self, raw: bytes, message: dict[str, Any] | None = None) -> None:
        """One message from the client: passed to the peer, or (read-only) refused or dropped.
        `message` is `raw` parsed, when the transport has parsed it already."""
        if self.read_only:
            if message is None:
                try:
                    parsed: object = json.loads(raw)
                except ValueError:
                    parsed = None  # the peer answers -32700 itself
                message = parsed if isinstance(parsed, dict) else None  # pyright: ignore[reportUnknownVariableType]
            if message is not None and not await self._allowed(message):  # pyright: ignore[reportUnknownArgumentType]
                return
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._send.send(raw)

    async def _allowed(self, message: dict[str, Any]) -> bool:
        """Whether a read-only connection's message may reach the peer; a refused request is
        answered here (a refused notification, or an answer to our request, is dropped)."""
        method = message.get("method")
        if method is None:
            return False  # its answer to a question would decide it: ignored
        if not isinstance(method, str) or method in READ_ONLY_METHODS:
            return True  # a method that is no string names no handler: the peer answers -32600
        log.info("refused %s from a read-only connection", method)
        if "id" in message:
            with contextlib.suppress(OSError):
                await self.sink.deliver(_encode(refusal(message)))
        return False

    def close(self) -> None:
        """End the input: the peer winds down and the connection's sessions detach."""
        self._send.close()


class Mailbox:
    """The JSON texts waiting for one SSE stream, and whether a client reads it now (one may).

    Each text gets the stream's next event id when it is pushed. Texts already taken for a reader
    are kept (the last `RETAINED_BYTES` of them), so a client whose stream dropped, possibly with
    events in flight, reconnects with `Last-Event-ID` and gets every event after it exactly once.
    """

    def __init__(self) -> None:
        self._texts: deque[tuple[int, bytes]] = deque()
        self._sent: deque[tuple[int, bytes]] = deque()  # taken already, kept for a resumption
        self._sent_bytes = 0
        self._last_id = 0
        self._reader = 0  # the number of the reader that holds the stream (or held it last)
        self.size = 0
        self.receiver = False
        self.finished = False
        self._arrived = anyio.Event()
        self.changed = anyio.Event()  # set (and replaced) when a receiver comes or goes

    def push(self, text: bytes) -> None:
        if not self.finished:
            self._last_id += 1
            self._texts.append((self._last_id, text))
            self.size += len(text)
            self._arrived.set()

    def finish(self) -> None:
        self.finished = True
        self._arrived.set()

    def acquire(self, last_event_id: str | None = None) -> int | None:
        """Take the stream for one reader: its reader number, or None when another reads it or it
        is finished. With `last_event_id` (which `resumable` must allow) the events after it come
        first, and it takes the stream over from a reader still held (the drop of whose
        connection the server may not have noticed yet)."""
        if self.finished or (self.receiver and last_event_id is None):
            return None
        if last_event_id is not None:
            self._rewind(int(last_event_id))
        self._reader += 1
        self.receiver = True
        self._arrived.set()  # a reader taken over wakes, sees it is no longer the reader, and ends
        self.touch()
        return self._reader

    def resumable(self, last_event_id: str | None) -> bool:
        """Whether every event after `last_event_id` is still here (sent and kept, or waiting)."""
        if last_event_id is None:
            return True
        if not last_event_id.isdigit() or int(last_event_id) > self._last_id:
            return False
        oldest = self._sent[0][0] if self._sent else (self._texts[0][0] if self._texts else self._last_id + 1)
        return int(last_event_id) >= oldest - 1

    def _rewind(self, last_id: int) -> None:
        """Put the events sent after `last_id` back in front of those waiting, in order."""
        while self._sent and self._sent[-1][0] > last_id:
            event_id, text = self._sent.pop()
            self._sent_bytes -= len(text)
            self._texts.appendleft((event_id, text))
            self.size += len(text)

    def release(self, reader: int) -> None:
        if reader == self._reader:
            self.receiver = False
            self.touch()

    def touch(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def take(self, reader: int) -> tuple[int, bytes] | None:
        """The next event (id, text) for `reader`, waiting for one; None once finished and
        drained, or once another reader took the stream over."""
        while reader == self._reader and not self._texts:
            if self.finished:
                return None
            self._arrived = anyio.Event()
            await self._arrived.wait()
        if reader != self._reader:
            return None
        event = self._texts.popleft()
        self.size -= len(event[1])
        self._sent.append(event)
        self._sent_bytes += len(event[1])
        while self._sent_bytes > RETAINED_BYTES and len(self._sent) > 1:
            self._sent_bytes -= len(self._sent.popleft()[1])
        return event


# Requests the RFD's HTTP profile sends with `Acp-Session-Id` (the TS SDK's table).
SESSION_SCOPED_METHODS = frozenset(
    {
        "session/cancel",
        "session/close",
        "session/delete",
        "session/fork",
        "session/load",
        "session/prompt",
        "session/resume",
        "session/set_config_option",
        "session/set_mode",
        "session/set_model",
    }
)


def id_key(request_id: Any) -> tuple[str, Any]:
    return (type(request_id).__name__, request_id)


class HttpSink:
    """The agent's messages on the RFD's SSE streams: a response where its request's session is
    (the connection's stream for `session/load` and for requests of no session), a request or
    notification about a session on that session's stream, the rest on the connection's."""

    def __init__(self) -> None:
        self.stream = Mailbox()  # the connection's own SSE stream
        self.sessions: dict[str, Mailbox] = {}
        self.answer_routes: dict[tuple[str, Any], Route] = {}  # our request's id -> its session
        self.overflowed = False
        self._answer_routes: dict[tuple[str, Any], Route] = {}  # the client's request id -> its answer's route
        self._initial_id: tuple[str, Any] | None = None
        self._initial: bytes | None = None
        self._initial_ready = anyio.Event()

    def expect_initial(self, request_id: Any) -> None:
        self._initial_id = id_key(request_id)

    async def initial(self) -> bytes | None:
        """The answer to `initialize` (the POST's body); None if the connection ended first."""
        await self._initial_ready.wait()
        return self._initial

    def expect(self, request_id: Any, route: Route) -> None:
        self._answer_routes[id_key(request_id)] = route

    def session(self, session_id: str) -> Mailbox:
        box = self.sessions.get(session_id)
        if box is None:
            box = self.sessions[session_id] = Mailbox()
            if self.stream.finished:
                box.finish()
        return box

    async def deliver(self, line: bytes) -> None:
        message: dict[str, Any] = json.loads(line)
        if is_response(message):
            key = id_key(message["id"])
            if key == self._initial_id:
                self._initial_id, self._initial = None, line
                self._initial_ready.set()
                return
            route = self._answer_routes.pop(key, None)
        else:
            route = session_of(message)
            if "id" in message:
                self.answer_routes[id_key(message["id"])] = route
        (self.stream if route is None else self.session(route)).push(line)
        if self.stream.size + sum(box.size for box in self.sessions.values()) > MAX_BUFFERED_BYTES:
            log.warning("a remote client read none of %d bytes of output; closing its connection", MAX_BUFFERED_BYTES)
            self.overflowed = True
            self.finish()

    def finish(self) -> None:
        self._initial_ready.set()
        self.stream.finish()
        for box in self.sessions.values():
            box.finish()
        self.stream.touch()
