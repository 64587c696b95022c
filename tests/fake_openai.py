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

import contextlib
import json
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from fake_endpoint import Exchange, Failure, FakeEndpoint, Stream


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


class FakeOpenAI(FakeEndpoint):
    """Start with `with FakeOpenAI() as fake:`; queue answers with `script(...)`."""

    prefix = "/v1"
    model_route = "/chat/completions"
    done_marker = True

    def __init__(self, models: list[str] | None = None) -> None:
        super().__init__()
        self.models: list[dict[str, Any]] = [{"id": m, "object": "model"} for m in (models or ["gpt-4o"])]
        self.models_failure: Failure | None = None
        self.context_limit: int | None = None  # tokens (see `tokens_of`) a request may take
        self.max_request_chars: int | None = None  # characters of a request's body as sent
        self.prompt_chars_per_token: float | None = None  # the fake's tokenizer for `prompt_tokens`
        self.refused: list[dict[str, Any]] = []  # bodies answered "context length exceeded"
        self.chat_arrived = threading.Event()

    @property
    def chats(self) -> list[dict[str, Any]]:
        """The JSON bodies of every chat completion request, in order."""
        return self.model_requests

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

    def get(self, exchange: Exchange) -> None:
        if exchange.route.endswith("/models") and self.models_failure is None:
            exchange.send_json(200, {"object": "list", "data": self.models})
        else:
            exchange.fail(self.models_failure or Failure(404, "not found"))

    def post(self, exchange: Exchange) -> None:
        if not exchange.route.endswith(self.model_route):
            # Endpoint probes (Hermes asks Ollama's /api/show) must not use up a scripted answer.
            exchange.fail(Failure(404, "not found"))
            return
        self.chat_arrived.set()
        body, raw = exchange.body, exchange.record.raw
        if (refusal := self.refusal(body, raw)) is not None:
            self.refused.append(body)
            exchange.fail(refusal)
            return
        answer = self.next_answer(body)
        if isinstance(answer, Failure):
            exchange.fail(answer)
        elif isinstance(body, dict) and not body.get("stream"):
            exchange.send_json(200, completion(self.with_usage(answer, raw)))  # a request that did not ask for a stream
        else:
            exchange.stream(self.with_usage(answer, raw))


@contextlib.contextmanager
def openai_adapter(tmp_path: Path) -> Iterator[tuple[FakeOpenAI, Any]]:
    """A fake endpoint and an `OpenAIAdapter` on it (gpt-4o, a config home in `tmp_path`)."""
    from adapters.openai import OpenAIAdapter

    with FakeOpenAI() as fake:
        adapter = OpenAIAdapter(
            model="gpt-4o",
            base_url=fake.base_url,
            api_key="sk-test-0000000000",
            env={"XDG_CONFIG_HOME": str(tmp_path / "config")},
        )
        try:
            yield fake, adapter
        finally:
            adapter.close()
