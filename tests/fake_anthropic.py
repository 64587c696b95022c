"""A fake Anthropic Messages API over real HTTP on 127.0.0.1, for Claude Code (claude-agent-acp).

POST /v1/messages (Claude Code adds `?beta=true`) plays the next scripted answer, or asks
`responder`: Messages SSE (message_start; content_block_start/delta/stop for text, thinking
and tool_use with input_json_delta; message_delta with stop_reason and usage; message_stop).
That is all Claude Code asks for with its nonessential traffic off: it always streams, and
calls neither count_tokens nor models (anything else is recorded and answered 404).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from fake_endpoint import Failure, FakeEndpoint, Stream

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


class FakeAnthropic(FakeEndpoint):
    """Start with `with FakeAnthropic() as fake:`; queue answers with `script(...)`;
    `base_url` is what ANTHROPIC_BASE_URL takes (the root: the client adds /v1)."""

    model_route = "/v1/messages"
    named_events = True

    def error_body(self, failure: Failure) -> Any:
        return {"type": "error", "error": {"type": failure.code or "api_error", "message": failure.message}}
