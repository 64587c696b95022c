"""Rendering `session/update` payloads readably on a terminal, as they arrive.

Used by `acp-server prompt` for a live turn and by `acp-server show` for a stored
transcript: streamed text is written as it comes, every other line starts on a fresh line.
Everything shown is untrusted (the model's, an agent's): made printable before it is written,
one-line fields with no control at all, and our dimming of thoughts added after.
"""

from __future__ import annotations

import difflib
import json
import os
from typing import Any, TextIO, cast

from adapters.printable import printable, printable_json

CONTENT_LINES = 20  # tool output longer than this is cut when shown
DIM, RESET = "\x1b[2m", "\x1b[0m"
PLAN_MARKS = {"completed": "x", "in_progress": "~"}

JsonObject = dict[str, Any]


class Display:
    """Renders `session/update` payloads on a text stream as they arrive.

    Streamed text is written as it comes; every other line starts on a fresh line.
    """

    def __init__(self, out: TextIO, *, raw: bool, color: bool) -> None:
        self._out = out
        self._raw = raw
        self._color = color
        self._at_line_start = True
        self._thinking = False
        self._titles: dict[str, str] = {}
        self._diffs: set[tuple[str, str]] = set()  # (tool call, diff) shown: an update repeats its content

    def show(self, params: dict[str, Any]) -> None:
        try:
            if self._raw:
                self._write(json.dumps(printable_json(params), ensure_ascii=False) + "\n")
            else:
                self._render(_object(params.get("update")) or {})
            self._out.flush()
        except BrokenPipeError:
            self._discard_output()

    def finish(self) -> None:
        """Ends a line left open by streamed text, before anything else is printed."""
        try:
            if not self._at_line_start:
                self._write("\n")
            self._out.flush()
        except BrokenPipeError:
            self._discard_output()
        self._thinking = False

    def _discard_output(self) -> None:
        # The reader went away (`| head`): the turn goes on, its output goes nowhere.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self._out.fileno())
        os.close(devnull)
        self._at_line_start = True

    def tool_title(self, tool: dict[str, Any]) -> str:
        """The call's title (or id), printable on one line: also what a permission question shows."""
        tool_id = str(tool.get("toolCallId", "?"))
        title = tool.get("title")
        if isinstance(title, str) and title:
            self._titles[tool_id] = title
        return printable(self._titles.get(tool_id, tool_id), one_line=True)

    def _render(self, update: dict[str, Any]) -> None:
        match update.get("sessionUpdate"):
            case "user_message_chunk":
                origin = (_object(update.get("_meta")) or {}).get("acp-server")
                sent_by = f"[{origin['origin']}] " if isinstance(origin, dict) and "origin" in origin else ""
                self._line(f"> {sent_by}{_block_text(update.get('content'))}", one_line=False)
            case "agent_message_chunk":
                self._stream(_block_text(update.get("content")), thought=False)
            case "agent_thought_chunk":
                self._stream(_block_text(update.get("content")), thought=True)
            case "tool_call":
                kind, status = update.get("kind", "other"), update.get("status", "pending")
                self._line(f"[tool] {self.tool_title(update)} ({kind}) {status}")
                self._tool_content(update.get("content"), str(update.get("toolCallId")))
            case "tool_call_update":
                self._tool_update(update)
            case "plan":
                self._plan(update.get("entries"))
            case "usage_update":
                self._usage(update)
            case "session_info_update" if "title" in update:
                self._line(f"[title] {update['title'] or '(cleared)'}")
            case "current_mode_update":
                self._line(f"[mode] {update.get('currentModeId')}")
            case _:
                pass  # an update with nothing to show, or of a kind newer than this client

    def _write(self, text: str) -> None:
        if text:
            self._out.write(text)
            self._at_line_start = text.endswith("\n")

    def _line(self, text: str, *, one_line: bool = True) -> None:
        """A line of its own; a one-line field's newlines and tabs are shown, not obeyed."""
        self.finish()
        self._write(printable(text, one_line=one_line) + "\n")

    def _stream(self, text: str, *, thought: bool) -> None:
        text = printable(text)
        if thought != self._thinking:
            self.finish()
            self._thinking = thought
        if not thought:
            self._write(text)
        elif self._color:
            self._write(f"{DIM}{text}{RESET}")
        else:
            for piece in text.splitlines(keepends=True):
                self._write(("(thinking) " if self._at_line_start else "") + piece)

    def _tool_update(self, update: dict[str, Any]) -> None:
        title = self.tool_title(update)
        status, content = update.get("status"), update.get("content")
        if status is None and not content:
            return
        self._line(f"[tool] {title} -> {status}" if status else f"[tool] {title}")
        self._tool_content(content, str(update.get("toolCallId")))

    def _tool_content(self, content: Any, tool_id: str) -> None:
        for item in _objects(content):
            if item.get("type") == "content":
                self._indented(_block_text(item.get("content")))
            elif item.get("type") == "diff":
                diff = _unified_diff(item)
                if (tool_id, diff) not in self._diffs:  # the question showed it; "completed" repeats it
                    self._diffs.add((tool_id, diff))
                    self._indented(diff)
            elif item.get("type") == "terminal":
                self._line(f"    [terminal {item.get('terminalId')}]")

    def _indented(self, text: str) -> None:
        # Printable first: `splitlines` would break a line at a control (\x1c, \x85) it then hides.
        lines = printable(text).splitlines()
        if len(lines) > CONTENT_LINES:
            lines = [*lines[:CONTENT_LINES], f"... ({len(lines) - CONTENT_LINES} more lines)"]
        for line in lines:
            self._line(f"    {line}", one_line=False)

    def _plan(self, entries: Any) -> None:
        self._line("[plan]")
        for entry in _objects(entries):
            status = entry.get("status")
            mark = PLAN_MARKS.get(status, " ") if isinstance(status, str) else " "
            self._line(f"  [{mark}] {entry.get('content', '')}")

    def _usage(self, update: dict[str, Any]) -> None:
        used, size = update.get("used"), update.get("size")
        share = f" ({100 * used / size:.1f}%)" if isinstance(used, int) and isinstance(size, int) and size > 0 else ""
        cost = _object(update.get("cost"))
        money = f", cost {cost.get('amount')} {cost.get('currency')}" if cost is not None else ""
        self._line(f"[usage] {used}/{size} tokens{share}{money}")


def _object(value: object) -> JsonObject | None:
    """`value` when it is a JSON object (decoded JSON objects always have string keys)."""
    return cast(JsonObject, value) if isinstance(value, dict) else None


def _objects(value: object) -> list[JsonObject]:
    """The JSON objects of `value` when it is an array; anything else in it is skipped."""
    items = cast(list[object], value) if isinstance(value, list) else []
    return [item for item in map(_object, items) if item is not None]


def _block_text(value: Any) -> str:
    block = _object(value)
    if block is None:
        return ""
    if block.get("type") == "text":
        return str(block.get("text", ""))
    label = block.get("uri") or block.get("name") or ""
    return f"[{block.get('type')}{' ' + str(label) if label else ''}]"


def _unified_diff(item: dict[str, Any]) -> str:
    path = printable(str(item.get("path", "?")), one_line=True)  # a newline in it would forge diff lines
    old, new = item.get("oldText"), item.get("newText")
    lines = difflib.unified_diff(
        str(old or "").splitlines(),
        str(new or "").splitlines(),
        fromfile=path if old is not None else "/dev/null",
        tofile=path,
        lineterm="",
    )
    return "\n".join(lines) or f"(no change to {path})"
