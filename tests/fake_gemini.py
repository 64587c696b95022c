"""A fake Gemini API over real HTTP on 127.0.0.1, for Gemini CLI (`gemini --acp`).

POST /v1beta/models/M:streamGenerateContent?alt=sse plays the next scripted answer, or asks
`responder`: SSE chunks of candidates whose parts carry text, thoughts or `functionCall`s, the
last with finishReason and usageMetadata. POST .../M:generateContent is Gemini CLI's own JSON
mode call (its model router asks how complex the prompt is, before each turn): answered with
`json_answer` without using up a scripted answer. Gemini CLI asks for nothing else.
"""

from __future__ import annotations

import json
from typing import Any

from fake_endpoint import Exchange, Failure, FakeEndpoint, Stream

MODEL = "gemini-2.5-flash"
USAGE = {"promptTokenCount": 12, "candidatesTokenCount": 6, "totalTokenCount": 18}
ROUTER_ANSWER = {"complexity_reasoning": "A simple request.", "complexity_score": 10}
STATUS = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED"}


def _chunk(parts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    candidate = {"content": {"role": "model", "parts": parts}, "index": 0}
    return {"candidates": [candidate | extra], "modelVersion": MODEL, "responseId": "fake"}


def reply(
    text: str = "",
    *,
    thought: str = "",
    calls: list[tuple[str, dict[str, Any]]] = (),  # type: ignore[assignment]
    finish: str = "STOP",
    usage: dict[str, Any] | None = None,
    hold_open: bool = False,
) -> Stream:
    """A streamed answer: a thought, text in pieces, `functionCall` parts (name, args); the
    last chunk carries `finish` and usage. Held open, it stops after the text and never ends."""
    chunks = [_chunk([{"text": thought, "thought": True}])] if thought else []
    chunks += [_chunk([{"text": text[i : i + 3]}]) for i in range(0, len(text), 3)]
    if hold_open:
        return Stream(chunks, hold_open=True)
    parts = [{"functionCall": {"name": name, "args": args}} for name, args in calls] or [{"text": ""}]
    last = _chunk(parts, finishReason=finish) | {"usageMetadata": usage or USAGE}
    return Stream([*chunks, last])


class FakeGemini(FakeEndpoint):
    """Start with `with FakeGemini() as fake:`; queue answers with `script(...)`;
    `base_url` is what GOOGLE_GEMINI_BASE_URL takes (the root: the client adds /v1beta)."""

    model_route = ":streamGenerateContent"
    opening_comment = False  # @google/genai reads each chunk as `data: ...` from its very start

    def __init__(self) -> None:
        super().__init__()
        self.json_answer: dict[str, Any] = dict(ROUTER_ANSWER)

    def error_body(self, failure: Failure) -> Any:
        status = failure.code or STATUS.get(failure.status, "INTERNAL")
        return {"error": {"code": failure.status, "message": failure.message, "status": status}}

    def post(self, exchange: Exchange) -> None:
        method = exchange.route.rpartition(":")[2]
        if not exchange.route.startswith("/v1beta/models/"):
            super().post(exchange)
        elif method == "streamGenerateContent":
            exchange.answer(self.next_answer(exchange.body))
        elif method == "generateContent":
            answer = _chunk([{"text": json.dumps(self.json_answer)}], finishReason="STOP")
            exchange.send_json(200, answer | {"usageMetadata": USAGE})
        else:
            super().post(exchange)
