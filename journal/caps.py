"""Size caps on what a run shows and stores: one reply, one tool call's result, its raw input.

`RunCaps` sits ahead of the redactor, the journal and the editor (`Prompts._run`), so what is cut
is cut once and the editor is shown what the journal keeps, live and on replay. A stream (the
reply, the thoughts, a compaction summary) keeps its first `MAX_REPLY_CHARS` and ends in a note;
what the agent says after that is dropped. A tool call's text and diffs keep `MAX_TOOL_CHARS`
between them, the rest replaced by a note; its raw input or output, when larger than that as JSON
or nested deeper than `MAX_DEPTH`, is replaced by a note (the journal's codec, the redactor and
the wire all walk it recursively). `capped_tool` does the same for a permission question.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, TypeVar

from adapters.bounds import unfit
from adapters.events import (
    CompactionChunk,
    DiffContent,
    RuntimeEvent,
    TextContent,
    TextDelta,
    ThoughtDelta,
    ToolCallStarted,
    ToolCallUpdated,
    ToolContent,
)

MAX_REPLY_CHARS = 1 << 20  # characters of one reply (and of its thoughts, of a summary): ~250k tokens
MAX_TOOL_CHARS = 1 << 20  # characters of one tool call update's text and diffs, and of its raw input/output

Tool = TypeVar("Tool", ToolCallStarted, ToolCallUpdated)
_Delta = TextDelta | ThoughtDelta | CompactionChunk
_STREAM_NAMES = {"text": "reply", "thought": "thinking", "compaction_chunk": "summary"}


def _mib(chars: int) -> str:
    return f"{chars / (1 << 20):g} MiB"


class RunCaps:
    """One run's events as they may be kept: `cap` gives the event, cut, or None to drop it."""

    def __init__(self) -> None:
        self._used: dict[tuple[str, str], int] = {}  # characters kept so far, per stream

    def cap(self, event: RuntimeEvent) -> RuntimeEvent | None:
        if isinstance(event, TextDelta | ThoughtDelta | CompactionChunk):
            return self._delta(event)
        if isinstance(event, ToolCallStarted):
            return capped_tool(event)
        if isinstance(event, ToolCallUpdated):
            return capped_tool(event)
        return event

    def _delta(self, event: _Delta) -> _Delta | None:
        key = (event.kind, event.compaction_id if isinstance(event, CompactionChunk) else "")
        used = self._used.get(key, 0)
        if used > MAX_REPLY_CHARS:
            return None  # cut already: the note was shown
        self._used[key] = used + len(event.text)
        if used + len(event.text) <= MAX_REPLY_CHARS:
            return event
        self._used[key] = MAX_REPLY_CHARS + 1
        name = _STREAM_NAMES[event.kind]
        note = f"\n\n[acp-server: the {name} was cut here at {_mib(MAX_REPLY_CHARS)}; the rest was not kept]"
        return replace(event, text=event.text[: MAX_REPLY_CHARS - used] + note)


def capped_tool(event: Tool) -> Tool:
    """The tool call event with its content, raw input and raw output within the caps (itself
    when they are: the common case costs one walk of the raw values)."""
    changes: dict[str, Any] = {}
    if event.content and sum(_size(item) for item in event.content) > MAX_TOOL_CHARS:
        changes["content"] = _capped_content(event.content)
    for name in ("raw_input", "raw_output"):
        value = getattr(event, name, None)  # a started call has no output yet
        if value is not None and (why := unfit(value, max_chars=MAX_TOOL_CHARS)) is not None:
            changes[name] = f"[acp-server: {name.replace('_', ' ')} not kept: {why}]"
    return replace(event, **changes) if changes else event


def _size(item: ToolContent) -> int:
    if isinstance(item, TextContent):
        return len(item.text)
    if isinstance(item, DiffContent):
        return len(item.new_text) + len(item.old_text or "")
    return 0


def _capped_content(content: tuple[ToolContent, ...]) -> tuple[ToolContent, ...]:
    """The items that fit in MAX_TOOL_CHARS; the first that does not is cut (text) or named
    (a diff), and a note says what was left out."""
    kept: list[ToolContent] = []
    left = MAX_TOOL_CHARS
    for index, item in enumerate(content):
        size = _size(item)
        if size <= left:
            kept.append(item)
            left -= size
            continue
        if isinstance(item, TextContent) and left > 0:
            kept.append(TextContent(item.text[:left]))
        elif isinstance(item, DiffContent):
            kept.append(TextContent(f"[acp-server: the diff of {item.path} is not shown: it is over the cap]"))
        dropped = len(content) - index - 1
        rest = f" and {dropped} more item{'s' * (dropped != 1)}" if dropped else ""
        kept.append(TextContent(f"\n[acp-server: the tool's output was cut here at {_mib(MAX_TOOL_CHARS)}{rest}]"))
        break
    return tuple(kept)
