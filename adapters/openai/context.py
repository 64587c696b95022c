"""How much of the model's context window a request takes, and what to keep when it is too much.

Sizes are estimated from the request's JSON: `CHARS_PER_TOKEN` (on the safe side) until the
endpoint's own `prompt_tokens` calibrate an `Estimate` for the session; an image part counts
`IMAGE_TOKENS`. `plan` splits the conversation after the system message into units (earlier
turns whole; the current prompt; each model round of the current turn with its tool results),
cuts the newest round's tool results when even they do not fit, and keeps the newest units that
fit verbatim; the rest is to be summarized.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from adapters.frozen import frozen
from adapters.openai.jsonvalues import is_array, is_object, objects

CHARS_PER_TOKEN = 3.0  # real tokenizers average ~4 characters of English or code; 3 leaves room
# A calibrated estimate: characters per token as the endpoint counted them, within sane bounds
# (an endpoint reporting nonsense must not make every request look tiny or huge), smoothed over
# the session's requests, and taken a little lower so a denser request than the last still fits.
MIN_CHARS_PER_TOKEN, MAX_CHARS_PER_TOKEN = 1.0, 6.0
SMOOTHING = 0.5
MARGIN = 0.9
IMAGE_TOKENS = 1_000
MAX_ANSWER_ROOM = 16_384
SUMMARY_ROOM = 2_000  # tokens set aside for the summary that replaces the compacted part...
SUMMARY_SHARE = 0.125  # ...at most this share of the request budget, so a small window keeps room
KEEP_SHARE = 0.5  # after compacting, earlier turns kept verbatim fill at most this share of the budget
HARD_KEEP_SHARE = 0.0  # compacting harder (the endpoint said "too long"): no earlier turn kept
RENDER_CAP = 2_000  # characters of one message the summary request shows


@frozen
class Estimate:
    """Tokens of a JSON value (messages, tools) from its characters; `measured` is the smoothed
    characters per token of the session's earlier requests, None before the endpoint said."""

    measured: float | None = None

    @property
    def chars_per_token(self) -> float:
        return CHARS_PER_TOKEN if self.measured is None else self.measured * MARGIN

    def tokens(self, value: Any) -> int:
        return self.tokens_for(chars_of(value)) + _images(value) * IMAGE_TOKENS

    def tokens_for(self, chars: int) -> int:
        """The tokens that many characters take."""
        return math.ceil(max(chars, 0) / self.chars_per_token)

    def chars(self, tokens: int) -> int:
        """The characters that many tokens hold."""
        return int(max(tokens, 0) * self.chars_per_token)

    def calibrated(self, chars: int, prompt_tokens: int) -> Estimate:
        """Learnt from a request of `chars` (no images) the endpoint counted as `prompt_tokens`."""
        if chars <= 0 or prompt_tokens <= 0:
            return self
        sample = min(max(chars / prompt_tokens, MIN_CHARS_PER_TOKEN), MAX_CHARS_PER_TOKEN)
        if self.measured is None:
            return Estimate(sample)
        return Estimate(self.measured + SMOOTHING * (sample - self.measured))


DEFAULT = Estimate()


def chars_of(value: Any) -> int:
    """The characters of a JSON value as sent, images left out."""
    return len(json.dumps(_without_images(value), ensure_ascii=False, separators=(",", ":")))


def has_images(value: Any) -> bool:
    return _images(value) > 0


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
    """The tokens a request may take: the window minus room for the answer (a quarter of it)."""
    return window - min(window // 4, MAX_ANSWER_ROOM)


def summary_room(budget: int) -> int:
    """The tokens set aside for the summary in a request of `budget` tokens."""
    return min(SUMMARY_ROOM, int(budget * SUMMARY_SHARE))


@frozen
class Plan:
    """`old` becomes a summary placed before `kept`; `prompt_at` is the current prompt's index in
    `kept` (it stays verbatim even when earlier rounds of its own turn are summarized); `cut` is
    how many of the newest round's tool results were cut to fit."""

    old: list[dict[str, Any]]
    kept: list[dict[str, Any]]
    prompt_at: int
    cut: int = 0


class CannotFit(Exception):
    """Even with everything else summarized and the newest tool results cut, the prompt and the
    newest round's calls do not fit the room."""

    def __init__(self, what: str, needed: int, room: int) -> None:
        super().__init__(f"{what} about {needed} tokens, the room is {room}")
        self.what, self.needed, self.room = what, needed, room


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


def plan(
    messages: Sequence[dict[str, Any]],
    turn_start: int,
    *,
    room: int,
    reserve: int = 0,
    estimate: Estimate = DEFAULT,
    keep_share: float = KEEP_SHARE,
) -> Plan:
    """What to keep of `messages` (the conversation, no system message) within `room` tokens, of
    which `reserve` is the summary's when anything may be summarized. Raises `CannotFit` when the
    prompt and the newest round, its tool results cut, alone are too big."""
    parts = units(messages, turn_start)
    prompt_unit = next(i for i, unit in enumerate(parts) if unit[0] is messages[turn_start])
    newest = len(parts) - 1 > prompt_unit
    if len(parts) > 1 + newest:  # more than the prompt and the newest round: a summary may come
        room -= reserve
    cut = 0
    if newest:
        parts[-1], cut = fit(parts[-1], room - estimate.tokens(parts[prompt_unit]), estimate)
    sizes = [estimate.tokens(unit) for unit in parts]
    needed = sizes[prompt_unit] + (sizes[-1] if newest else 0)
    if needed > room:
        alone = sizes[prompt_unit] > room or not newest
        what = "its prompt alone needs" if alone else "its prompt and the model's newest tool calls alone need"
        raise CannotFit(what, needed, room)
    kept_from = _kept_from(sizes, prompt_unit, room=room, keep_share=keep_share)
    if kept_from <= prompt_unit:
        old = [m for unit in parts[:kept_from] for m in unit]
        kept = [m for unit in parts[kept_from:] for m in unit]
        return Plan(old, kept, sum(len(unit) for unit in parts[kept_from:prompt_unit]), cut)
    # Earlier rounds of the current turn go into the summary too; the prompt stays.
    old = [m for unit in parts[:prompt_unit] + parts[prompt_unit + 1 : kept_from] for m in unit]
    return Plan(old, [*parts[prompt_unit], *(m for unit in parts[kept_from:] for m in unit)], 0, cut)


def _kept_from(sizes: Sequence[int], prompt_unit: int, *, room: int, keep_share: float) -> int:
    """The first unit kept verbatim: the newest that fit `room`, the prompt's room set aside, and
    earlier turns within `keep_share` of it."""
    kept_from, used, earlier = len(sizes), 0, 0
    for i in range(len(sizes) - 1, -1, -1):
        limit = room - sizes[prompt_unit] if i > prompt_unit else room
        if used + sizes[i] > limit or (i < prompt_unit and earlier + sizes[i] > room * keep_share):
            break
        kept_from, used = i, used + sizes[i]
        earlier += sizes[i] if i < prompt_unit else 0
    return kept_from


CUT_MARK = "\n[... {} more characters of this tool result cut to fit the model's context window; ask for less]"


def fit(unit: list[dict[str, Any]], room: int, estimate: Estimate) -> tuple[list[dict[str, Any]], int]:
    """A model round with its tool results cut (the longest first, each with a visible marker) so
    it takes at most `room` tokens, and how many were cut; unchanged when it fits."""
    over = estimate.tokens(unit) - room
    results = [i for i, m in enumerate(unit) if m.get("role") == "tool" and isinstance(m.get("content"), str)]
    if over <= 0 or not results:
        return unit, 0
    lengths = [len(unit[i]["content"]) for i in results]
    marks = len(CUT_MARK.format(max(lengths))) * len(results)
    cap = _cap(lengths, sum(lengths) - estimate.chars(over + 1) - marks)
    fitted = list(unit)
    for i, length in zip(results, lengths, strict=True):
        if length > cap:
            fitted[i] = {**unit[i], "content": unit[i]["content"][:cap] + CUT_MARK.format(length - cap)}
    return fitted, sum(length > cap for length in lengths)


def _cap(lengths: Sequence[int], keep: int) -> int:
    """The largest length to cut to so that the lengths, each cut to it, add up to at most `keep`."""
    left, count = max(keep, 0), len(lengths)
    for length in sorted(lengths):
        if length * count > left:
            return left // count
        left, count = left - length, count - 1
    return max(lengths)


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
