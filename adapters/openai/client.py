"""HTTP to one OpenAI-compatible endpoint: model listing and streamed chat completions.

It uses httpx (imported on first use, so importing the adapter stays cheap), parses the
server-sent events itself, retries 429 and 5xx answers with bounded backoff (sleeping
through the sink, so a cancel interrupts the wait), and turns every failure into an
`AgentError` saying what failed and what to set. `Abort` lets another thread cut a stream.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Generator, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

from adapters.base import AgentError, Sink, TurnCancelled
from adapters.openai.jsonvalues import is_array, is_object, objects

if TYPE_CHECKING:
    import httpx

CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 300.0  # a gap between two chunks; reasoning models can think for minutes
LIST_TIMEOUT = 2.0
MAX_RETRIES = 3
MAX_RETRY_WAIT = 30.0
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
# How OpenAI, vLLM, llama.cpp, Ollama, OpenRouter, Anthropic- and Gemini-compatible servers word it.
TOO_LONG_HINTS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "exceeds the available context",
    "input is too long",
    "reduce the length",
)


class ContextTooLong(AgentError):
    """The endpoint refused the request because it does not fit the model's context window."""


def too_long(status: int, text: str) -> bool:
    lowered = text.lower()
    return status in (400, 413, 422) and any(hint in lowered for hint in TOO_LONG_HINTS)


class Abort:
    """The in-flight request of one turn; `abort()` from any thread shuts its socket.

    The socket is learnt from httpcore's trace events as the connection opens (chat requests
    never reuse a pooled connection), so a cancel also cuts a request still waiting for headers.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stream: Any = None
        self.aborted = False

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpx's `trace` extension: remember the newest network stream of the request."""
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            self.watch(info.get("return_value"))

    def watch(self, stream: Any) -> None:
        with self._lock:
            self._stream = stream
            if stream is not None and self.aborted:
                _shut(stream)

    def abort(self) -> None:
        with self._lock:
            self.aborted = True
            if self._stream is not None:
                _shut(self._stream)


def _shut(stream: Any) -> None:
    # close() alone does not wake a thread blocked in recv(); shutdown() does, for TLS too.
    sock = stream.get_extra_info("socket")
    if isinstance(sock, socket.socket):
        with suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


class Endpoint:
    """One base URL and key; `hint` is the config file path used in messages (None: no advice on
    where to set the URL or key, for `acp-server setup`, which is where they are being set)."""

    def __init__(self, base_url: str, api_key: str | None, *, hint: str | None) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._hint = hint
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    def client(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                httpx = _httpx()

                timeout = httpx.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT, pool=CONNECT_TIMEOUT)
                headers = {"User-Agent": "acp-server"}
                if self._api_key:
                    headers["Authorization"] = f"Bearer {self._api_key}"
                # No keep-alive: every request opens its own connection, which `Abort` can see.
                limits = httpx.Limits(max_keepalive_connections=0)
                self._client = httpx.Client(timeout=timeout, headers=headers, limits=limits)
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    # --- model listing -----------------------------------------------------------------

    def list_models(self, timeout: float = LIST_TIMEOUT) -> list[dict[str, Any]]:
        """The entries of GET /models; an `AgentError` when the endpoint cannot answer."""
        httpx = _httpx()

        url = f"{self.base_url}/models"
        try:
            response = self.client().get(url, timeout=timeout)
        except httpx.HTTPError as exc:
            raise AgentError(self._unreachable(exc)) from None
        if response.status_code != 200:
            raise AgentError(self._http_failure(response.status_code, _error_text(response.content), url))
        try:
            body: object = response.json()
        except ValueError:
            body = None
        data = body.get("data", []) if is_object(body) else None
        if not is_array(data):  # also a `"data": null`, which used to escape as a TypeError
            raise AgentError(f"{url} did not answer with a model list")
        return [entry for entry in objects(data) if isinstance(entry.get("id"), str)]

    # --- chat completions --------------------------------------------------------------

    def stream_chat(
        self, payload: dict[str, Any], *, sink: Sink, abort: Abort
    ) -> Generator[dict[str, Any], None, None]:
        """The parsed chunks of one streamed completion, retrying transient failures."""
        url = f"{self.base_url}/chat/completions"
        for attempt in range(MAX_RETRIES + 1):
            with self._open(url, payload, sink, abort) as response:
                if response.status_code == 200:
                    yield from self._chunks(response, sink, abort)
                    return
                status, text = response.status_code, _error_text(response.read())
                wait = retry_wait(response.headers, attempt)
            if too_long(status, text):
                raise ContextTooLong(self._http_failure(status, text, url))
            if status not in RETRY_STATUSES or attempt == MAX_RETRIES:
                raise AgentError(self._http_failure(status, text, url, retried=attempt))
            sink.sleep(wait)

    @contextmanager
    def _open(
        self, url: str, payload: dict[str, Any], sink: Sink, abort: Abort
    ) -> Generator[httpx.Response, None, None]:
        httpx = _httpx()

        if abort.aborted:
            raise TurnCancelled("the turn was cancelled")
        request = self.client().build_request(
            "POST", url, json=payload, headers={"Accept": "text/event-stream"}, extensions={"trace": abort.trace}
        )
        try:
            response = self.client().send(request, stream=True)
        except httpx.HTTPError as exc:
            if abort.aborted or sink.cancelled:
                raise TurnCancelled("the turn was cancelled") from None
            raise AgentError(self._unreachable(exc)) from None
        try:
            yield response
        finally:
            abort.watch(None)
            response.close()

    def _chunks(self, response: httpx.Response, sink: Sink, abort: Abort) -> Iterator[dict[str, Any]]:
        httpx = _httpx()

        try:
            for data in sse_data(response.iter_lines()):
                sink.check_cancelled()
                if data.strip() == "[DONE]":
                    return
                yield from _parse_chunk(data)
        except httpx.HTTPError as exc:
            if abort.aborted or sink.cancelled:
                raise TurnCancelled("the turn was cancelled") from None
            if isinstance(exc, httpx.TimeoutException):
                raise AgentError(
                    f"The model endpoint {self.base_url} stopped sending for "
                    f"{READ_TIMEOUT:g} s in the middle of a response"
                ) from None
            raise AgentError(
                f"The connection to the model endpoint {self.base_url} broke in the middle "
                f"of a response ({_reason(exc)})"
            ) from None

    # --- messages ----------------------------------------------------------------------

    def _unreachable(self, exc: httpx.HTTPError) -> str:
        advice = f" Set OPENAI_BASE_URL or base_url in {self._hint}." if self._hint else ""
        return f"Cannot reach the model endpoint {self.base_url} ({_reason(exc)}).{advice}"

    def _http_failure(self, status: int, text: str, url: str, *, retried: int = 0) -> str:
        said = f": {text}" if text else ""
        if status in (401, 403):
            return f"The model endpoint {self.base_url} refused the API key (HTTP {status}{said})." + (
                f" Set OPENAI_API_KEY or api_key in {self._hint}." if self._hint else ""
            )
        if status == 404:
            return (
                f"The model endpoint answered HTTP 404 for {url}{said}. Check base_url "
                f"(OPENAI_BASE_URL, usually ending in /v1) and the model name."
            )
        tries = f" after {retried + 1} attempts" if retried else ""
        if status == 429:
            return f"The model endpoint {self.base_url} is rate limiting requests (HTTP 429{tries}){said}"
        return f"The model endpoint {self.base_url} failed (HTTP {status}{tries}){said}"


def _httpx():  # unannotated on purpose: pyright infers Module("httpx"), which no annotation spells
    """The httpx module, or an `AgentError` saying how to install it."""
    try:
        import httpx
    except ImportError:
        raise AgentError("The openai agent needs httpx, which acp-server installs: pip install httpx") from None
    return httpx


def sse_data(lines: Iterable[str]) -> Iterator[str]:
    """The data of each server-sent event: `data:` lines joined, comments and fields skipped."""
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


def _parse_chunk(data: str) -> Iterator[dict[str, Any]]:
    # Some servers omit the blank line between events: then each data line is one chunk.
    try:
        parts = [json.loads(data)]
    except json.JSONDecodeError:
        try:
            parts = [json.loads(line) for line in data.splitlines() if line.strip() not in ("", "[DONE]")]
        except json.JSONDecodeError:
            raise AgentError(f"The model endpoint sent something that is not JSON: {data[:200]!r}") from None
    for chunk in parts:
        if not is_object(chunk):
            continue
        if chunk.get("error"):
            message = _message_of(chunk)
            kind = ContextTooLong if too_long(400, message) else AgentError
            raise kind(f"The model endpoint reported an error: {message}")
        yield chunk


def retry_wait(headers: Mapping[str, str], attempt: int) -> float:
    """Seconds to wait before retry `attempt + 1`: Retry-After(-ms) when given, else 1, 2, 4 s."""
    wait = float(2**attempt)
    if (ms := headers.get("retry-after-ms")) is not None:
        with suppress(ValueError):
            wait = float(ms) / 1000
    elif (after := headers.get("retry-after")) is not None:
        wait = _seconds_until(after, wait)
    return min(max(wait, 0.0), MAX_RETRY_WAIT)


def _seconds_until(value: str, fallback: float) -> float:
    try:
        return float(value)
    except ValueError:
        pass
    import email.utils  # the email package: only for a Retry-After given as a date

    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return fallback
    return moment.timestamp() - time.time()


def _error_text(body: bytes) -> str:
    """The provider's own error message, or the start of the body."""
    try:
        data = json.loads(body)
    except ValueError:
        return body[:300].decode("utf-8", errors="replace").strip()
    return _message_of(data) if is_object(data) else str(data)[:300]


def _message_of(data: dict[str, Any]) -> str:
    error = data.get("error", data)
    if is_object(error):
        return str(error.get("message") or error.get("detail") or json.dumps(error))[:500]
    return str(error)[:500]


def _reason(exc: Exception) -> str:
    httpx = _httpx()

    text = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectTimeout):
        return f"no answer within {CONNECT_TIMEOUT:g} s"
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    if "refused" in text.lower():
        return "connection refused"
    if "name or service not known" in text.lower() or "nodename nor servname" in text.lower():
        return "unknown host name"
    return text
