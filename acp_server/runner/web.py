"""The runner's remote endpoint: ACP v1 at `/acp` over WebSocket (GET upgrade) and Streamable
HTTP (POST, SSE GET streams, DELETE), as the ACP RFD "Streamable HTTP & WebSocket transport"
and the official TypeScript SDK's clients have it, on Starlette over Uvicorn.

Every request and upgrade passes `guard` first: a `Host` that is not this server's -> 403 (DNS
rebinding), an `Origin` other than its own -> 403 (none is fine), no valid pairing token -> 401.
The token comes in `Authorization: Bearer`, or, from a browser's WebSocket (which cannot set
headers), as the subprotocol `acp.bearer.<token>` offered beside `acp`; never in a URL.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
from collections.abc import AsyncIterator
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from acp_server.rpc.trace import Trace
from acp_server.runner.hub import Hub
from acp_server.runner.listen import ListenAddress, bind, endpoint_server
from acp_server.runner.page import page_routes
from acp_server.runner.remote import (
    SESSION_SCOPED_METHODS,
    HttpSink,
    Mailbox,
    RemoteConnection,
    id_key,
    is_response,
    session_of,
)
from acp_server.runner.tokens import Grant, TokenStore

log = logging.getLogger(__name__)

INITIALIZE_TIMEOUT = 60.0
ORPHAN_WAIT = 60.0  # seconds an HTTP connection may go without its connection stream before it is closed
KEEPALIVE = 15.0
SUBPROTOCOL = "acp"
BEARER_SUBPROTOCOL = "acp.bearer."
BATCH_REFUSED = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {"code": -32600, "message": "JSON-RPC batches are not supported"},
}


def _text(body: str, status: int, **headers: str) -> Response:
    named = {name.replace("_", "-"): value for name, value in headers.items()}
    return PlainTextResponse(body, status_code=status, headers=named or None)


class WsSink:
    """A WebSocket's side of a connection: one text frame per message, one writer at a time."""

    def __init__(self, websocket: WebSocket) -> None:
        self._websocket = websocket
        self._lock = anyio.Lock()

    async def deliver(self, line: bytes) -> None:
        async with self._lock:
            try:
                await self._websocket.send_text(line.decode())
            except Exception as exc:  # a gone client, however Starlette and Uvicorn say so
                raise BrokenPipeError("the remote client closed the WebSocket") from exc

    def finish(self) -> None:
        pass


class RemoteEndpoint:
    """`/acp` for one runner: its connections, the tokens that open them, and the server."""

    def __init__(
        self, *, hub: Hub, tokens: TokenStore, address: ListenAddress, max_frame_bytes: int, trace: Trace | None
    ) -> None:
        self.hub = hub
        self.tokens = tokens
        self.address = address
        self.max_frame_bytes = max_frame_bytes
        self.trace = trace
        self.port = address.port
        self.connections: dict[str, RemoteConnection] = {}  # every open one, HTTP and WebSocket
        self._tasks: TaskGroup | None = None
        self.app = Starlette(
            routes=[
                Route("/acp", self.http, methods=["GET", "POST", "DELETE"]),
                WebSocketRoute("/acp", self.websocket),
                *page_routes(self._page_host, tls=address.tls),  # the workbench (docs/workbench.md)
            ]
        )

    @property
    def host(self) -> str:
        host = self.address.host
        if host in ("0.0.0.0", "::"):  # noqa: S104 -- naming the wildcard, not binding it
            host = socket.gethostname()
        return f"[{host}]" if ":" in host else host

    @property
    def url(self) -> str:
        return f"{'https' if self.address.tls else 'http'}://{self.host}:{self.port}"

    def status(self) -> dict[str, Any]:
        return {"url": self.url + "/", "acpUrl": self.url + "/acp", "remoteConnections": len(self.connections)}

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Bind (so that port 0 is known), report started, then serve until cancelled."""
        sock = bind(self.address)
        self.port = sock.getsockname()[1]
        server = endpoint_server(self.app, self.address, max_frame_bytes=self.max_frame_bytes)
        log.info("remote endpoint listening on %s/acp", self.url)
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            task_status.started()
            try:
                await server.serve(sockets=[sock])
            finally:
                tasks.cancel_scope.cancel()
                sock.close()

    def revoke(self) -> int:
        """End every token, and close the connections they opened; how many were open."""
        self.tokens.revoke()
        open_now = list(self.connections.values())
        for connection in open_now:
            connection.close()
        return len(open_now)

    # --- who may come in ----------------------------------------------------------------------

    def guard(self, headers: Headers, server: tuple[str, int] | None, *, websocket: bool) -> Grant | Response:
        host = headers.get("host", "").lower()
        if not self._our_host(host, server):
            return _text("Forbidden: Host is not this server", 403)
        origin = headers.get("origin")
        if origin is not None and origin.lower() != f"{'https' if self.address.tls else 'http'}://{host}":
            return _text("Forbidden: Origin is not this server", 403)
        grant = self.tokens.check(self._token(headers, websocket=websocket))
        if grant is None:
            return _text("Unauthorized: a pairing token is needed (acp-server pair)", 401, WWW_Authenticate="Bearer")
        return grant

    def _page_host(self, request: Request) -> bool:
        return self._our_host(request.headers.get("host", "").lower(), request.scope.get("server"))

    def _our_host(self, host: str, server: tuple[str, int] | None) -> bool:
        name, _, port = host.rpartition(":") if not host.endswith("]") else (host, "", "")
        if not name:
            name, port = host, ""
        default = "443" if self.address.tls else "80"
        if (port or default) != str(self.port):
            return False
        names = {"localhost", "127.0.0.1", "[::1]", self.host.lower(), self.address.host.lower()}
        if server is not None:
            names.add(f"[{server[0]}]" if ":" in server[0] else server[0])  # the address the client reached
        return name in names

    @staticmethod
    def _token(headers: Headers, *, websocket: bool) -> str | None:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
        if websocket:
            for offered in headers.get("sec-websocket-protocol", "").split(","):
                if offered.strip().startswith(BEARER_SUBPROTOCOL):
                    return offered.strip()[len(BEARER_SUBPROTOCOL) :]
        return None

    # --- WebSocket ----------------------------------------------------------------------------

    async def websocket(self, websocket: WebSocket) -> None:
        verdict = self.guard(websocket.headers, websocket.scope.get("server"), websocket=True)
        if isinstance(verdict, Response):
            await websocket.send_denial_response(verdict)
            return
        connection = RemoteConnection(self.hub, grant=verdict, sink=WsSink(websocket), trace=self.trace)
        offered: list[str] = websocket.scope.get("subprotocols", [])
        await websocket.accept(
            subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None,
            headers=[(b"acp-connection-id", connection.id.encode())],
        )
        self.connections[connection.id] = connection
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._read_websocket, websocket, connection)
                await connection.run()
                tasks.cancel_scope.cancel()
        finally:
            self.connections.pop(connection.id, None)
            with contextlib.suppress(Exception):
                await websocket.close()

    async def _read_websocket(self, websocket: WebSocket, connection: RemoteConnection) -> None:
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                text = message.get("text")
                if isinstance(text, str):  # a binary frame is no ACP message: ignored, as the SDK does
                    await connection.receive(text.encode())
        finally:
            connection.close()

    # --- Streamable HTTP ----------------------------------------------------------------------

    async def http(self, request: Request) -> Response:
        verdict = self.guard(request.headers, request.scope.get("server"), websocket=False)
        if isinstance(verdict, Response):
            return verdict
        if request.method == "POST":
            return await self._post(request, verdict)
        if request.method == "GET":
            return self._get(request, verdict)
        return self._delete(request, verdict)

    def _connection(self, request: Request, grant: Grant) -> tuple[RemoteConnection, HttpSink] | Response:
        """The HTTP connection a request names, if the same token opened it; else 400 or 404."""
        connection_id = request.headers.get("acp-connection-id")
        if not connection_id:
            return _text("Missing Acp-Connection-Id", 400)
        connection = self.connections.get(connection_id)
        if connection is None or connection.grant.digest != grant.digest or not isinstance(connection.sink, HttpSink):
            return _text("Unknown Acp-Connection-Id", 404)
        return connection, connection.sink

    async def _post(self, request: Request, grant: Grant) -> Response:
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            return _text("Unsupported Media Type", 415)
        body = await self._body(request)
        if body is None:
            return _text("Payload Too Large", 413)
        try:
            value: object = json.loads(body)
        except ValueError:
            return _text("Invalid JSON", 400)
        if isinstance(value, list):
            return JSONResponse(BATCH_REFUSED, status_code=400)
        if not isinstance(value, dict):
            return _text("Invalid JSON-RPC message", 400)
        message: dict[str, Any] = value  # pyright: ignore[reportUnknownVariableType]
        connection_id = request.headers.get("acp-connection-id")
        if message.get("method") == "initialize" and "id" in message:
            if connection_id:
                return _text("Initialize not allowed on existing connection", 400)
            return await self._initialize(body, message, grant)
        found = self._connection(request, grant)
        if isinstance(found, Response):
            return found
        connection, sink = found
        problem = _route(sink, message, request.headers.get("acp-session-id"))
        if problem:
            return _text(problem, 400)
        await connection.receive(body, message)
        return Response(status_code=202)

    async def _body(self, request: Request) -> bytes | None:
        """The request's body, read no further than `--max-frame-bytes` (None past it)."""
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > self.max_frame_bytes:
                return None
        return bytes(body)

    async def _initialize(self, body: bytes, message: dict[str, Any], grant: Grant) -> Response:
        assert self._tasks is not None
        sink = HttpSink()
        connection = RemoteConnection(self.hub, grant=grant, sink=sink, trace=self.trace)
        sink.expect_initial(message["id"])
        self.connections[connection.id] = connection
        self._tasks.start_soon(self._serve_http, connection, sink)
        await connection.receive(body, message)
        answer = None
        with anyio.move_on_after(INITIALIZE_TIMEOUT):
            answer = await sink.initial()
        if answer is None:
            connection.close()
            error = {"code": -32603, "message": "Initialize failed"}
            return JSONResponse({"jsonrpc": "2.0", "id": message["id"], "error": error}, status_code=500)
        return Response(answer, media_type="application/json", headers={"Acp-Connection-Id": connection.id})

    async def _serve_http(self, connection: RemoteConnection, sink: HttpSink) -> None:
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_close_when_orphaned, connection, sink)
                await connection.run()
                tasks.cancel_scope.cancel()
        finally:
            self.connections.pop(connection.id, None)

    def _get(self, request: Request, grant: Grant) -> Response:
        if "text/event-stream" not in request.headers.get("accept", "").lower():
            return _text("Not Acceptable", 406)
        found = self._connection(request, grant)
        if isinstance(found, Response):
            return found
        _connection, sink = found
        session_id = request.headers.get("acp-session-id")
        box = sink.session(session_id) if session_id else sink.stream
        last_event_id = request.headers.get("last-event-id") or None
        if not box.resumable(last_event_id):
            # Events after it were dropped from the window: a reload (`session/load`) shows them.
            return _text("Last-Event-ID is no longer resumable: reconnect without it and reload", 409)
        reader = box.acquire(last_event_id)
        if reader is None:
            return _text("Outbound stream already has an active receiver", 409)
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(_events(box, reader), media_type="text/event-stream", headers=headers)

    def _delete(self, request: Request, grant: Grant) -> Response:
        found = self._connection(request, grant)
        if isinstance(found, Response):
            return found
        connection, _sink = found
        self.connections.pop(connection.id, None)
        connection.close()
        return Response(status_code=202)


def _route(sink: HttpSink, message: dict[str, Any], header: str | None) -> str | None:
    """Check a POSTed message's `Acp-Session-Id` as the RFD asks, and note where its answer goes;
    the problem, if any (a 400)."""
    if is_response(message):
        key = id_key(message["id"])
        route = sink.answer_routes.get(key)
        if route is not None and header is None:
            return "Missing Acp-Session-Id"
        if route is not None and header != route:
            return "Mismatched Acp-Session-Id"
        sink.answer_routes.pop(key, None)
        return None
    method, in_params = message.get("method"), session_of(message)
    if (method in SESSION_SCOPED_METHODS or in_params is not None) and not header:
        return "Missing Acp-Session-Id"
    if header and in_params is not None and header != in_params:
        return "Mismatched Acp-Session-Id"
    if "id" in message:
        sink.expect(message["id"], None if method == "session/load" else header or in_params)
    return None


async def _events(box: Mailbox, reader: int) -> AsyncIterator[bytes]:
    """One SSE stream: each message as a `data:` event with its `id:` (for `Last-Event-ID`), a
    comment every KEEPALIVE seconds."""
    try:
        while True:
            event: tuple[int, bytes] | bool | None = False
            with anyio.move_on_after(KEEPALIVE):
                event = await box.take(reader)
            if event is None:
                return
            if event is False:
                yield b":\n\n"
                continue
            event_id, text = event
            yield b"id: %d\ndata: %s\n\n" % (event_id, text)
    finally:
        box.release(reader)


async def _close_when_orphaned(connection: RemoteConnection, sink: HttpSink) -> None:
    """An HTTP client gone without DELETE leaves no reader on its connection stream: after
    ORPHAN_WAIT without one (or once its unread output overflowed) the connection closes."""
    while not sink.overflowed:
        box = sink.stream
        changed = box.changed
        if box.receiver:
            await changed.wait()
            continue
        with anyio.move_on_after(ORPHAN_WAIT) as waited:
            await changed.wait()
        if waited.cancelled_caught:
            log.info("a remote HTTP connection had no reader for %g s; closing it", ORPHAN_WAIT)
            break
    connection.close()
