"""A fake OpenAI-compatible endpoint over real HTTP on 127.0.0.1, for the openai agent's tests.

Each POST /chat/completions plays the next scripted answer (or asks `responder` when none is
queued): a stream of SSE chunks (text, reasoning, tool calls, finish reasons, usage; optionally
slow, or held open until the client goes away) or an HTTP failure. Every request is recorded;
GET /models lists `models` (entries may carry metadata such as `context_window` or `vision`).
With `context_limit` set, a request whose body is over it (`tokens_of`: 4 bytes a token) is
answered like OpenAI does: HTTP 400 `context_length_exceeded`, without using up an answer;
`max_request_chars` does the same for a body longer than that many characters as sent. With
`prompt_chars_per_token` set, an answer that carries no usage reports the request's characters
as sent over it as `prompt_tokens`, as a real endpoint counts its own tokens.
"""

from __future__ import annotations

import json
import math
import select
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOLD_LIMIT = 10.0


@dataclass(frozen=True)
class Stream:
    """A 200 answer: `chunks` as SSE events, then `data: [DONE]` unless held open."""

    chunks: list[dict[str, Any]]
    gap: float = 0.0  # seconds between chunks: a model that is slow on purpose
    hold_open: bool = False
    hold_headers: bool = False  # wait for the client to go away before answering at all


@dataclass(frozen=True)
class Failure:
    status: int
    message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)
    code: str | None = None


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes = b""  # the body's bytes as sent


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = [] if delta is None and finish is None else [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": "fake", "choices": choices, **extra}


def completion(stream: Stream) -> dict[str, Any]:
    """The non-streaming answer with the same text and usage as `stream` (tool calls left out)."""
    text, finish, usage = "", "stop", None
    for item in stream.chunks:
        for choice in item.get("choices") or []:
            text += choice["delta"].get("content") or ""
            finish = choice.get("finish_reason") or finish
        usage = item.get("usage") or usage
    message = {"role": "assistant", "content": text}
    answer = {"id": "chatcmpl-fake", "object": "chat.completion", "model": "fake", "created": 0}
    return answer | {"choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}


def reply(
    text: str = "",
    *,
    reasoning: str = "",
    reasoning_key: str = "reasoning_content",
    tools: list[tuple[str, dict[str, Any]]] = (),  # type: ignore[assignment]
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
    refusal: str = "",
    hold_open: bool = False,
) -> Stream:
    """A typical streamed answer: reasoning, text in pieces, tool calls in fragments, usage."""
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({reasoning_key: reasoning[i : i + 4]}) for i in range(0, len(reasoning), 4)]
    chunks += [chunk({"content": text[i : i + 3]}) for i in range(0, len(text), 3)]
    if refusal:
        chunks.append(chunk({"refusal": refusal}))
    for index, (name, args) in enumerate(tools):
        arguments = json.dumps(args)
        chunks.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": f"call_{index}_{name}",
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        chunks += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[i : i + 7]}}]})
            for i in range(0, len(arguments), 7)
        ]
    if not hold_open:
        chunks.append(chunk(finish=finish or ("tool_calls" if tools else "stop")))
    if usage is not None:
        chunks.append(chunk(usage=usage))
    return Stream(chunks, hold_open=hold_open)


def contract_answers(greeting_usage: dict[str, Any]) -> Callable[[dict[str, Any]], Stream | Failure]:
    """The model behind `adapters.contract` runs, answering by prompt: "hello" streams text,
    "create hello.txt" asks to write a file (and says it is done once it sees the tool result),
    "think forever" holds its stream open until cancelled, "break" fails with HTTP 400. Prompts
    are matched as substrings, since an agent may wrap them (Hermes adds its own context)."""

    def answer(body: dict[str, Any]) -> Stream | Failure:
        messages = body["messages"]
        prompt = str(next(m["content"] for m in reversed(messages) if m["role"] == "user"))
        if messages[-1]["role"] == "tool":
            return reply("Done.", usage={"prompt_tokens": 50, "completion_tokens": 2})
        if "create hello.txt" in prompt:
            return reply(tools=[("write_file", {"path": "hello.txt", "content": "hello\n"})])
        if "think forever" in prompt:
            return reply("Thinking", hold_open=True)
        if "break" in prompt:
            return Failure(400, "this request is broken")
        return reply("Hello there!", usage=greeting_usage)

    return answer


class ContractPrompts:
    """The prompts `contract_answers` knows, as an `AdapterContract`'s hooks (list it before
    AdapterContract among the bases); turns run in the test's `tmp_path`."""

    tmp_path: Any

    def turn_fields(self) -> dict[str, Any]:
        return {"cwd": str(self.tmp_path)}

    def prompt_that_asks_permission(self) -> str:
        return "create hello.txt"

    def prompt_that_raises(self) -> str:
        return "break"

    def prompt_that_runs_long(self) -> str:
        return "think forever"


def tokens_of(body: Any) -> int:
    """The fake's own token count of a request: 4 bytes of its JSON a token."""
    return len(json.dumps(body)) // 4


def too_long(limit: int, tokens: int) -> Failure:
    return Failure(
        400,
        f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
        f"{tokens} tokens. Please reduce the length of the messages.",
        code="context_length_exceeded",
    )


class FakeOpenAI:
    """Start with `with FakeOpenAI() as fake:`; queue answers with `script(...)`."""

    def __init__(self, models: list[str] | None = None) -> None:
        self.models: list[dict[str, Any]] = [{"id": m, "object": "model"} for m in (models or ["gpt-4o"])]
        self.models_failure: Failure | None = None
        self.responder: Callable[[dict[str, Any]], Stream | Failure] | None = None  # when nothing is queued
        self.requests: list[Recorded] = []
        self.context_limit: int | None = None  # tokens (see `tokens_of`) a request may take
        self.max_request_chars: int | None = None  # characters of a request's body as sent
        self.prompt_chars_per_token: float | None = None  # the fake's tokenizer for `prompt_tokens`
        self.refused: list[dict[str, Any]] = []  # bodies answered "context length exceeded"
        self.disconnected = threading.Event()
        self.chat_arrived = threading.Event()
        self._answers: deque[Stream | Failure] = deque()
        self._stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def script(self, *answers: Stream | Failure) -> None:
        self._answers.extend(answers)

    @property
    def chats(self) -> list[dict[str, Any]]:
        """The JSON bodies of every chat completion request, in order."""
        return [r.body for r in self.requests if r.path.endswith("/chat/completions")]

    def next_answer(self, body: dict[str, Any]) -> Stream | Failure:
        try:
            return self._answers.popleft()
        except IndexError:
            if self.responder is not None:
                return self.responder(body)
            return Failure(500, "the test scripted no answer for this request")

    def refusal(self, body: Any, raw: bytes) -> Failure | None:
        """The context-length error for a request over a limit, or None."""
        if self.context_limit is not None and tokens_of(body) > self.context_limit:
            return too_long(self.context_limit, tokens_of(body))
        if self.max_request_chars is not None and len(raw.decode()) > self.max_request_chars:
            return too_long(self.max_request_chars // 4, len(raw.decode()) // 4)
        return None

    def with_usage(self, stream: Stream, raw: bytes) -> Stream:
        """`stream` with a usage chunk counting the request's own tokens, when it has none."""
        if self.prompt_chars_per_token is None or any("usage" in item for item in stream.chunks) or stream.hold_open:
            return stream
        prompt = math.ceil(len(raw.decode()) / self.prompt_chars_per_token)
        usage = {"prompt_tokens": prompt, "completion_tokens": 10, "total_tokens": prompt + 10}
        return replace(stream, chunks=[*stream.chunks, chunk(usage=usage)])

    def hold(self, handler: BaseHTTPRequestHandler) -> None:
        """Keep a stream open until the client closes its end (or the test ends)."""
        deadline = time.monotonic() + HOLD_LIMIT
        while time.monotonic() < deadline and not self._stopping.is_set():
            readable, _, _ = select.select([handler.connection], [], [], 0.02)
            if readable and not handler.connection.recv(1):
                self.disconnected.set()
                return


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that stops reading at `data: [DONE]` or is cancelled resets the connection.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _handler_for(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._record(None)
            if self.path.endswith("/models") and fake.models_failure is None:
                self._json(200, {"object": "list", "data": fake.models})
            else:
                self._fail(fake.models_failure or Failure(404, "not found"))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            body = json.loads(raw or b"null")
            self._record(body, raw)
            if not self.path.endswith("/chat/completions"):
                # Endpoint probes (Hermes asks Ollama's /api/show) must not use up a scripted answer.
                self._fail(Failure(404, "not found"))
                return
            fake.chat_arrived.set()
            if (refusal := fake.refusal(body, raw)) is not None:
                fake.refused.append(body)
                self._fail(refusal)
                return
            answer = fake.next_answer(body)
            if isinstance(answer, Failure):
                self._fail(answer)
            elif isinstance(body, dict) and not body.get("stream"):
                self._json(200, completion(fake.with_usage(answer, raw)))  # a request that did not ask for a stream
            else:
                self._stream(fake.with_usage(answer, raw))

        def _record(self, body: Any, raw: bytes = b"") -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            fake.requests.append(Recorded(self.command, self.path, headers, body, raw))

        def _json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
            body = json.dumps(data).encode()
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _fail(self, failure: Failure) -> None:
            error = {"message": failure.message, "type": "fake", "code": failure.code}
            self._json(failure.status, {"error": error}, failure.headers)

        def _stream(self, stream: Stream) -> None:
            if stream.hold_headers:
                fake.hold(self)
                self.close_connection = True
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self._write(": keep-alive comment\n\n")
            for item in stream.chunks:
                self._write(f"data: {json.dumps(item)}\n\n")
                if stream.gap:
                    time.sleep(stream.gap)
            if stream.hold_open:
                fake.hold(self)
                self.close_connection = True
                return
            self._write("data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")

        def _write(self, text: str) -> None:
            data = text.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler
