"""What the fake model endpoints share: a threading HTTP server on 127.0.0.1, requests recorded.

`FakeEndpoint` serves on a free loopback port (it refuses any other address, and any client
that is not on loopback); each subclass answers its API's paths in `post`/`get`. A model
request plays the next scripted answer (or asks `responder`): a `Stream` of SSE chunks,
optionally slow, paused until the test lets it go on, or held open until the client goes
away, or a `Failure`. Every request is recorded, body decoded, so a test can read what the
agent sent (earlier turns included).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import select
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self
from urllib.parse import urlsplit

HOLD_LIMIT = 10.0  # seconds a held-open answer waits for its client to go away
PAUSE_LIMIT = 120.0  # seconds a paused stream waits for the test to let it go on


@dataclass(frozen=True)
class Stream:
    """A 200 answer: `chunks` as SSE events (then the API's end marker, unless held open)."""

    chunks: list[dict[str, Any]]
    gap: float = 0.0  # seconds between chunks: a model that is slow on purpose
    hold_open: bool = False
    hold_headers: bool = False  # wait for the client to go away before answering at all
    pause_after: int = 0  # with `resume`: how many chunks go out before the stream waits for it
    resume: threading.Event | None = None  # set by the test to let a paused stream go on
    burst: bool = False  # every chunk in one write: a model that is never the slower end (benchmarks)


@dataclass(frozen=True)
class Failure:
    status: int
    message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)
    code: str | None = None


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str  # with its query string
    headers: dict[str, str]
    body: Any
    raw: bytes = b""  # the body's bytes as sent

    @property
    def route(self) -> str:
        """The path without its query string."""
        return urlsplit(self.path).path


Responder = Callable[[Any], Stream | Failure]


class FakeEndpoint:
    """Start with `with Fake() as fake:`; queue answers with `script(...)`."""

    prefix: ClassVar[str] = ""  # the API's root under the server, part of `base_url`
    model_route: ClassVar[str] = ""  # how the paths of the API's model calls end
    named_events: ClassVar[bool] = False  # an `event: <chunk type>` line before each `data:` line
    done_marker: ClassVar[bool] = False  # `data: [DONE]` ends a stream that is not held open
    opening_comment: ClassVar[bool] = True  # an SSE comment line first (clients must skip it)

    def __init__(self, *, host: str = "127.0.0.1") -> None:
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"a fake endpoint listens on loopback only, not on {host}")
        self.responder: Responder | None = None  # asked when nothing is queued
        self.requests: list[Recorded] = []
        self.disconnected = threading.Event()  # a held-open answer's client went away
        self._answers: deque[Stream | Failure] = deque()
        self._stopping = threading.Event()
        self._server = _Server((host, 0), type("Handler", (Exchange,), {"fake": self}))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def root_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        return self.root_url + self.prefix

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def script(self, *answers: Stream | Failure) -> None:
        self._answers.extend(answers)

    def next_answer(self, body: Any) -> Stream | Failure:
        try:
            return self._answers.popleft()
        except IndexError:
            if self.responder is not None:
                return self.responder(body)
            return Failure(500, "the test scripted no answer for this request")

    @property
    def model_requests(self) -> list[Any]:
        """The JSON bodies of the model calls (the ones scripted answers go to), in order."""
        return [r.body for r in self.requests if r.route.endswith(self.model_route)]

    def hold(self, exchange: BaseHTTPRequestHandler) -> None:
        """Keep a stream open until the client closes its end (or the test ends)."""
        deadline = time.monotonic() + HOLD_LIMIT
        while time.monotonic() < deadline and not self._stopping.is_set():
            readable, _, _ = select.select([exchange.connection], [], [], 0.02)
            if readable and not _received(exchange):
                self.disconnected.set()
                return

    def wait_for(self, event: threading.Event) -> None:
        """Wait until the test sets `event` (or the fake stops, or PAUSE_LIMIT passes)."""
        deadline = time.monotonic() + PAUSE_LIMIT
        while not event.wait(0.05) and not self._stopping.is_set() and time.monotonic() < deadline:
            pass

    # --- what subclasses answer ------------------------------------------------------------

    def post(self, exchange: Exchange) -> None:
        """A model call plays the next answer; anything else is not found."""
        if exchange.route.endswith(self.model_route):
            exchange.answer(self.next_answer(exchange.body))
        else:
            exchange.fail(Failure(404, "not found"))

    def get(self, exchange: Exchange) -> None:
        exchange.fail(Failure(404, "not found"))

    def error_body(self, failure: Failure) -> Any:
        """The API's shape of an error answer (OpenAI's by default)."""
        return {"error": {"message": failure.message, "type": "fake", "code": failure.code}}


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that stops reading at the end of a stream or is cancelled resets the connection.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class Exchange(BaseHTTPRequestHandler):
    """One HTTP exchange with a fake: the request as recorded, and the ways to answer it."""

    fake: ClassVar[FakeEndpoint]
    protocol_version = "HTTP/1.1"
    record: Recorded

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def route(self) -> str:
        return self.record.route

    @property
    def body(self) -> Any:
        return self.record.body

    def do_GET(self) -> None:
        if self._accepted(b""):
            self.fake.get(self)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self._accepted(raw):
            self.fake.post(self)

    def _accepted(self, raw: bytes) -> bool:
        body: Any = None
        with contextlib.suppress(ValueError):
            body = json.loads(raw) if raw else None
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.record = Recorded(self.command, self.path, headers, body, raw)
        self.fake.requests.append(self.record)
        if not ipaddress.ip_address(self.client_address[0]).is_loopback:
            self.fail(Failure(403, "this fake answers loopback clients only"))
            return False
        return True

    def send_json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(data).encode()
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def fail(self, failure: Failure) -> None:
        self.send_json(failure.status, self.fake.error_body(failure), failure.headers)

    def answer(self, answer: Stream | Failure) -> None:
        if isinstance(answer, Failure):
            self.fail(answer)
        else:
            self.stream(answer)

    def stream(self, stream: Stream) -> None:
        if stream.hold_headers:
            self.fake.hold(self)
            self.close_connection = True
            return
        try:
            self._stream(stream)
        except ConnectionError:
            # The client went away while the stream was still being written: a held-open answer's
            # client can be that fast (it cancels on the first delta it reads, before the rest).
            if stream.hold_open:
                self.fake.disconnected.set()
            raise

    def _stream(self, stream: Stream) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if self.fake.opening_comment:
            self._write(": keep-alive comment\n\n")
        if stream.burst:
            self._write("".join(self._event(item) for item in stream.chunks))
        else:
            for index, item in enumerate(stream.chunks):
                if stream.resume is not None and index == stream.pause_after:
                    self.fake.wait_for(stream.resume)
                self._write(self._event(item))
                if stream.gap:
                    time.sleep(stream.gap)
        if stream.hold_open:
            self.fake.hold(self)
            self.close_connection = True
            return
        if self.fake.done_marker:
            self._write("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _event(self, item: dict[str, Any]) -> str:
        named = f"event: {item['type']}\n" if self.fake.named_events else ""
        return f"{named}data: {json.dumps(item)}\n\n"

    def _write(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _received(exchange: BaseHTTPRequestHandler) -> bool:
    """Whether a readable connection still has its client: an orderly close reads as nothing, and
    a client that closes with our stream unread in its buffer resets the connection instead."""
    try:
        return bool(exchange.connection.recv(1))
    except ConnectionError:
        return False
