"""One streamed completion, assembled chunk by chunk while its deltas reach the sink.

Text deltas become `sink.text`, reasoning deltas (`reasoning_content` from vLLM and DeepSeek,
`reasoning` from Ollama and OpenRouter) `sink.thought`; tool call fragments are joined by
their index; the finish reason, a refusal and the usage are kept for the agent loop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from adapters.base import Sink
from adapters.openai.jsonvalues import is_array, is_object, objects
from adapters.openai.tools import Call


@dataclass(slots=True)
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass(slots=True)
class Reply:
    """What the model said in one request; `feed` it every chunk in order."""

    text: list[str] = field(default_factory=list[str])
    reasoning: list[str] = field(default_factory=list[str])
    reasoning_field: str = "reasoning_content"  # the field the provider streamed it in
    calls: dict[int, _PartialCall] = field(default_factory=dict[int, _PartialCall])
    finish_reason: str | None = None
    refusal: str | None = None
    usage: dict[str, Any] | None = None

    @property
    def refused(self) -> bool:
        return self.refusal is not None or self.finish_reason == "content_filter"

    def feed(self, chunk: dict[str, Any], sink: Sink) -> None:
        if is_object(usage := chunk.get("usage")):
            self.usage = usage
        for choice in objects(chunk.get("choices")):
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            self._delta(delta if is_object(delta) else {}, sink)
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish_reason = reason

    def _delta(self, delta: dict[str, Any], sink: Sink) -> None:
        for name in ("reasoning_content", "reasoning"):
            reasoning = delta.get(name)
            if isinstance(reasoning, str) and reasoning:
                self.reasoning.append(reasoning)
                self.reasoning_field = name
                sink.thought(reasoning)
                break
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.text.append(content)
            sink.text(content)
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            self.refusal = (self.refusal or "") + refusal
            sink.text(refusal)
        fragments = delta.get("tool_calls")
        for position, fragment in enumerate(fragments if is_array(fragments) else []):
            if is_object(fragment):
                self._tool_fragment(fragment, position)

    def _tool_fragment(self, fragment: dict[str, Any], position: int) -> None:
        index = fragment.get("index", position)
        call = self.calls.setdefault(index if isinstance(index, int) else position, _PartialCall())
        if isinstance(fragment.get("id"), str) and fragment["id"]:
            call.id = fragment["id"]
        function = fragment.get("function")
        if not is_object(function):
            function = {}
        name = function.get("name")
        # OpenAI sends the name once; some servers repeat it whole in every fragment.
        if isinstance(name, str) and name and name != call.name:
            call.name += name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            call.arguments += arguments
        elif isinstance(arguments, dict):
            call.arguments = json.dumps(arguments)

    def tool_calls(self) -> list[Call]:
        """The complete calls, in index order, each with an id (made up when none was sent)."""
        return [
            Call(partial.id or f"call_{index}", partial.name, partial.arguments)
            for index, partial in sorted(self.calls.items())
        ]

    def message(self) -> dict[str, Any]:
        """This reply as the assistant message of the conversation sent back next time, its
        reasoning in the field the provider used (`History.outgoing` decides when it is sent)."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.reasoning:
            message[self.reasoning_field] = "".join(self.reasoning)
        calls = self.tool_calls()
        if calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments or "{}"}}
                for c in calls
            ]
        return message
