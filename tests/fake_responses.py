"""A fake OpenAI Responses API over real HTTP on 127.0.0.1, for Codex (codex-acp).

POST {base_url}/responses plays the next scripted answer, or asks `responder`: Responses SSE
(response.created; response.output_item.added/done around each output item: reasoning with
its summary deltas, a message with response.output_text.delta, a function_call with
response.function_call_arguments.delta, or any raw item such as a local_shell_call;
response.completed with usage). Codex always streams and asks for nothing else (anything
else is recorded and answered 404).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from fake_endpoint import FakeEndpoint, Stream

MODEL = "gpt-5.3-codex"
USAGE = {"input_tokens": 12, "output_tokens": 6}
_ids = itertools.count(1)  # ids unique across answers: clients key their history on them


def _message(text: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    item_id = f"msg_fake_{next(_ids)}"
    part = {"type": "output_text", "text": text, "annotations": []}
    at = {"item_id": item_id, "content_index": 0}
    deltas = [{"type": "response.content_part.added", **at, "part": {**part, "text": ""}}]
    deltas += [{"type": "response.output_text.delta", **at, "delta": text[i : i + 3]} for i in range(0, len(text), 3)]
    deltas += [{"type": "response.output_text.done", **at, "text": text}]
    deltas += [{"type": "response.content_part.done", **at, "part": part}]
    return {"id": item_id, "type": "message", "role": "assistant", "content": [part]}, deltas


def _reasoning(summary: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    item_id = f"rs_fake_{next(_ids)}"
    part = {"type": "summary_text", "text": summary}
    at = {"item_id": item_id, "summary_index": 0}
    deltas = [{"type": "response.reasoning_summary_part.added", **at, "part": {**part, "text": ""}}]
    deltas += [
        {"type": "response.reasoning_summary_text.delta", **at, "delta": summary[i : i + 4]}
        for i in range(0, len(summary), 4)
    ]
    deltas += [{"type": "response.reasoning_summary_text.done", **at, "text": summary}]
    return {"id": item_id, "type": "reasoning", "summary": [part]}, deltas


def _function_call(name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    number = next(_ids)
    text = json.dumps(arguments)
    item = {"id": f"fc_fake_{number}", "type": "function_call", "name": name, "call_id": f"call_{number}_{name}"}
    deltas = [
        {"type": "response.function_call_arguments.delta", "item_id": item["id"], "delta": text[i : i + 7]}
        for i in range(0, len(text), 7)
    ]
    deltas += [{"type": "response.function_call_arguments.done", "item_id": item["id"], "arguments": text}]
    return {**item, "arguments": text}, deltas


def reply(
    text: str = "",
    *,
    reasoning: str = "",
    tools: list[tuple[str, dict[str, Any]]] = (),  # type: ignore[assignment]
    items: list[dict[str, Any]] = (),  # type: ignore[assignment]
    usage: dict[str, Any] | None = None,
    hold_open: bool = False,
) -> Stream:
    """A streamed response: a reasoning summary, a message in pieces, `function_call` items
    (name, arguments) and raw `items` (each given an id and call_id when it has none). Held
    open, the stream stops after the message's deltas and never completes."""
    outputs = [_reasoning(reasoning)] if reasoning else []
    outputs += [_message(text)] if text else []
    outputs += [_function_call(name, arguments) for name, arguments in tools]
    outputs += [({"id": f"item_fake_{next(_ids)}", "call_id": f"call_{next(_ids)}", **item}, []) for item in items]
    response = {"id": f"resp_fake_{next(_ids)}", "object": "response", "created_at": 0, "model": MODEL}
    chunks = [{"type": "response.created", "response": {**response, "status": "in_progress", "output": []}}]
    for index, (item, deltas) in enumerate(outputs):
        chunks.append({"type": "response.output_item.added", "output_index": index, "item": _started(item)})
        chunks += [{**delta, "output_index": index} for delta in deltas]
        if hold_open:
            return _numbered(Stream(chunks, hold_open=True))
        chunks.append({"type": "response.output_item.done", "output_index": index, "item": _done(item)})
    usage = _usage(usage or USAGE)
    done = {**response, "status": "completed", "output": [_done(item) for item, _ in outputs], "usage": usage}
    return _numbered(Stream([*chunks, {"type": "response.completed", "response": done}]))


def _started(item: dict[str, Any]) -> dict[str, Any]:
    empty = {"message": {"content": []}, "reasoning": {"summary": []}, "function_call": {"arguments": ""}}
    return {**item, **empty.get(item["type"], {}), "status": "in_progress"}


def _done(item: dict[str, Any]) -> dict[str, Any]:
    return {**item, "status": "completed"}


def _usage(usage: dict[str, Any]) -> dict[str, Any]:
    details = {"input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}
    return {**details, **usage, "total_tokens": usage["input_tokens"] + usage["output_tokens"]}


def _numbered(stream: Stream) -> Stream:
    chunks = [{**item, "sequence_number": number} for number, item in enumerate(stream.chunks)]
    return Stream(chunks, hold_open=stream.hold_open)


class FakeResponses(FakeEndpoint):
    """Start with `with FakeResponses() as fake:`; queue answers with `script(...)`."""

    prefix = "/v1"
    model_route = "/v1/responses"
    named_events = True
