"""A fake Anthropic Messages API over real HTTP on 127.0.0.1, for Claude Code (claude-agent-acp).

POST /v1/messages (Claude Code adds `?beta=true`) plays the next scripted answer, or asks
`responder`: Messages SSE (message_start; content_block_start/delta/stop for text, thinking
and tool_use with input_json_delta; message_delta with stop_reason and usage; message_stop),
or the same message as one JSON object when the request did not ask for a stream.
POST /v1/messages/count_tokens counts 4 bytes a token; GET /v1/models lists `models`.
"""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

from fake_endpoint import Exchange, Failure, FakeEndpoint, Stream

MODEL = "claude-sonnet-4-5"
USAGE = {"input_tokens": 12, "output_tokens": 6}
_ids = itertools.count(1)  # ids unique across answers: Claude Code merges the blocks of one message id


def _start(usage: dict[str, Any]) -> dict[str, Any]:
    message = {"id": f"msg_fake_{next(_ids)}", "type": "message", "role": "assistant", "model": MODEL, "content": []}
    message |= {"stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}
    return {"type": "message_start", "message": message}


def _block(index: int, block: dict[str, Any], deltas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"type": "content_block_start", "index": index, "content_block": block},
        *({"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas),
        {"type": "content_block_stop", "index": index},
    ]


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def reply(
    text: str = "",
    *,
    thinking: str = "",
    tools: list[tuple[str, dict[str, Any]]] = (),  # type: ignore[assignment]
    stop: str | None = None,
    usage: dict[str, Any] | None = None,
    hold_open: bool = False,
) -> Stream:
    """A streamed message: thinking, text in pieces, `tool_use` blocks with their input in
    fragments; `stop` defaults to "tool_use" with tools, else "end_turn". Held open, the stream
    stops after the text and never ends."""
    usage = usage or USAGE
    chunks = [_start(usage)]
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    if thinking:
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(thinking, 4)]
        blocks.append(({"type": "thinking", "thinking": "", "signature": ""}, deltas))
    if text:
        blocks.append(({"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in _pieces(text, 3)]))
    for name, arguments in tools:
        block = {"type": "tool_use", "id": f"toolu_fake_{next(_ids)}", "name": name, "input": {}}
        fragments = _pieces(json.dumps(arguments), 7)
        blocks.append((block, [{"type": "input_json_delta", "partial_json": p} for p in fragments]))
    for index, (block, deltas) in enumerate(blocks):
        chunks += _block(index, block, deltas)
    if hold_open:
        return Stream(chunks, hold_open=True)
    end = {"stop_reason": stop or ("tool_use" if tools else "end_turn"), "stop_sequence": None}
    chunks += [{"type": "message_delta", "delta": end, "usage": {"output_tokens": usage["output_tokens"]}}]
    return Stream([*chunks, {"type": "message_stop"}])


def message(stream: Stream) -> dict[str, Any]:
    """The non-streaming answer with the same content, stop reason and usage as `stream`."""
    result: dict[str, Any] = {}
    inputs: dict[int, str] = {}
    for item in stream.chunks:
        kind = item["type"]
        if kind == "message_start":
            result = copy.deepcopy(item["message"])
        elif kind == "content_block_start":
            result["content"].append(dict(item["content_block"]))
        elif kind == "content_block_delta" and item["delta"]["type"] == "input_json_delta":
            inputs[item["index"]] = inputs.get(item["index"], "") + item["delta"]["partial_json"]
        elif kind == "content_block_delta":
            key = item["delta"]["type"].removesuffix("_delta")  # text, thinking
            result["content"][item["index"]][key] += item["delta"][key]
        elif kind == "message_delta":
            result |= item["delta"]
            result["usage"] |= item["usage"]
    for index, text in inputs.items():
        result["content"][index]["input"] = json.loads(text)
    return result


class FakeAnthropic(FakeEndpoint):
    """Start with `with FakeAnthropic() as fake:`; queue answers with `script(...)`;
    `base_url` is what ANTHROPIC_BASE_URL takes (the root: the client adds /v1)."""

    model_route = "/v1/messages"
    named_events = True

    def __init__(self, models: list[str] | None = None) -> None:
        super().__init__()
        self.models = models or [MODEL]

    def error_body(self, failure: Failure) -> Any:
        return {"type": "error", "error": {"type": failure.code or "api_error", "message": failure.message}}

    def get(self, exchange: Exchange) -> None:
        if exchange.route == "/v1/models":
            created = "2025-01-01T00:00:00Z"
            data = [{"type": "model", "id": m, "display_name": m, "created_at": created} for m in self.models]
            exchange.send_json(200, {"data": data, "has_more": False, "first_id": None, "last_id": None})
        else:
            super().get(exchange)

    def post(self, exchange: Exchange) -> None:
        if exchange.route == "/v1/messages/count_tokens":
            exchange.send_json(200, {"input_tokens": len(exchange.record.raw) // 4})
            return
        if exchange.route != self.model_route:
            super().post(exchange)
            return
        answer = self.next_answer(exchange.body)
        if isinstance(answer, Stream) and not (exchange.body or {}).get("stream"):
            exchange.send_json(200, message(answer))
        else:
            exchange.answer(answer)
