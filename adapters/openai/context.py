"""How much of the model's context window a request takes, and what to keep when it is too much.

Sizes are estimated from the request's JSON (`CHARS_PER_TOKEN`, on the safe side; an image part
counts `IMAGE_TOKENS`). `plan` splits the conversation after the system message into units
(earlier turns whole; the current prompt; each model round of the current turn with its tool
results) and keeps the newest that fit verbatim; the rest is to be summarized.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from adapters.openai.jsonvalues import is_array, is_object, objects

CHARS_PER_TOKEN = 3  # real tokenizers average ~4 characters of English or code; 3 leaves room
IMAGE_TOKENS = 1_000
MAX_ANSWER_ROOM = 16_384
SUMMARY_ROOM = 2_000  # tokens set aside for the summary that replaces the compacted part
KEEP_SHARE = 0.5  # after compacting, earlier turns kept verbatim fill at most this share of the budget
HARD_KEEP_SHARE = 0.0  # compacting harder (the endpoint said "too long"): no earlier turn kept
RENDER_CAP = 2_000  # characters of one message the summary request shows


def estimate(value: Any) -> int:
    """Tokens a JSON value (messages, tools) will take, estimated on the safe side."""
    text = json.dumps(_without_images(value), ensure_ascii=False, separators=(",", ":"))
    return len(text) // CHARS_PER_TOKEN + 1 + _images(value) * IMAGE_TOKENS


def _images(value: Any) -> int:
    if is_object(value):
        return (1 if value.get("type") == "image_url" else 0) + sum(_images(item) for item in value.values())
    if is_array(value):
        return sum(_images(item) for item in value)
    return 0


def _without_images(value: Any) -> Any:
    if is_object(value):
        if value.get("type") == "image_url":
            return None
        return {key: _without_images(item) for key, item in value.items()}
    if is_array(value):
        return [_without_images(item) for item in value]
    return value


def budget_of(window: int) -> int:
    """The tokens a request may take: the window minus room for the answer."""
    return window - min(window // 4, MAX_ANSWER_ROOM)


@dataclass(frozen=True, slots=True)
class Plan:
    """`old` becomes a summary placed before `kept`; `prompt_at` is the current prompt's index in
    `kept` (it stays verbatim even when earlier rounds of its own turn are summarized)."""

    old: list[dict[str, Any]]
    kept: list[dict[str, Any]]
    prompt_at: int


class CannotFit(Exception):
    """Even with everything else summarized, the newest round does not fit the budget."""

    def __init__(self, needed: int, budget: int) -> None:
        super().__init__(f"needs about {needed} tokens, the budget is {budget}")
        self.needed, self.budget = needed, budget


def units(messages: Sequence[dict[str, Any]], turn_start: int) -> list[list[dict[str, Any]]]:
    """Earlier turns (from a user message to the next), the current prompt, then its rounds."""
    found: list[list[dict[str, Any]]] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        new_unit = (
            not found
            or (index < turn_start and role == "user")
            or index == turn_start
            or (index > turn_start and role == "assistant")
        )
        if new_unit:
            found.append([message])
        else:
            found[-1].append(message)
    return found


def plan(messages: Sequence[dict[str, Any]], turn_start: int, *, room: int, keep_share: float = KEEP_SHARE) -> Plan:
    """What to keep of `messages` (the conversation, no system message) within `room` tokens.
    Raises `CannotFit` when the prompt and the newest round alone are too big."""
    parts = units(messages, turn_start)
    prompt_unit = next(i for i, unit in enumerate(parts) if unit[0] is messages[turn_start])
    sizes = [estimate(unit) for unit in parts]
    needed = sizes[prompt_unit] + (sizes[-1] if len(parts) - 1 > prompt_unit else 0)
    if needed > room:
        raise CannotFit(needed, room)
    kept_from, used, earlier = len(parts), 0, 0
    for i in range(len(parts) - 1, -1, -1):
        limit = room - sizes[prompt_unit] if i > prompt_unit else room
        if used + sizes[i] > limit or (i < prompt_unit and earlier + sizes[i] > room * keep_share):
            break
        kept_from, used = i, used + sizes[i]
        earlier += sizes[i] if i < prompt_unit else 0
    if kept_from <= prompt_unit:
        old = [m for unit in parts[:kept_from] for m in unit]
        kept = [m for unit in parts[kept_from:] for m in unit]
        return Plan(old, kept, sum(len(unit) for unit in parts[kept_from:prompt_unit]))
    # Earlier rounds of the current turn go into the summary too; the prompt stays.
    old = [m for unit in parts[:prompt_unit] + parts[prompt_unit + 1 : kept_from] for m in unit]
    return Plan(old, [*parts[prompt_unit], *(m for unit in parts[kept_from:] for m in unit)], 0)


def render(messages: Sequence[dict[str, Any]], limit_chars: int) -> str:
    """The part to summarize as plain text, each message cut to `RENDER_CAP`; when it is still
    longer than `limit_chars`, its start (where an earlier summary is) and its end are kept."""
    lines = [_line(m) for m in messages]
    text = "\n\n".join(lines)
    if len(text) <= limit_chars:
        return text
    head, tail = limit_chars // 3, limit_chars - limit_chars // 3
    return text[:head] + f"\n\n[... {len(text) - limit_chars} characters left out ...]\n\n" + text[-tail:]


def _line(message: dict[str, Any]) -> str:
    role = str(message.get("role", "?"))
    content = message.get("content")
    if is_array(content):
        content = " ".join(str(part.get("text", "[image]")) for part in objects(content))
    text = cut(str(content or ""))
    for name, arguments in calls_of(message):
        text += f"\n-> called {name}({cut(arguments, 300)})"
    if role == "tool":
        return f"[tool result {message.get('tool_call_id', '')}]\n{text}"
    return f"[{role}]\n{text}"


def calls_of(message: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, arguments) of an assistant message's tool calls."""
    calls: list[tuple[str, str]] = []
    for call in objects(message.get("tool_calls")):
        function = call.get("function")
        if is_object(function):
            calls.append((str(function.get("name", "")), str(function.get("arguments", ""))))
    return calls


def cut(text: str, limit: int = RENDER_CAP) -> str:
    return text if len(text) <= limit else text[:limit] + f" [... {len(text) - limit} more characters]"
