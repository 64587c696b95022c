"""Hermes' callbacks as sink reports: stream deltas (Hermes' HTTP thread) become text, reasoning
becomes thoughts, tool start/complete (the turn thread or Hermes' tool workers) become tool calls
under Hermes' own ids, the todo tool becomes the plan. The sink is thread-safe; a report made
after a cancel is dropped here, because Hermes swallows or mis-handles exceptions from callbacks.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from typing import Any, cast

from adapters.base import Sink, TurnCancelled
from adapters.events import DiffContent, TerminalContent, TextContent, ToolContent
from adapters.hermes.tools import kind_of, locations_of, plan_of, title_of

SHOWN_OUTPUT = 4000  # characters of a tool's result shown as text in the editor


class Reporter:
    """One turn's reports. Knows which of Hermes' tool calls are visible, refused, or carry a diff."""

    def __init__(self, sink: Sink, *, cwd: str, roots: Sequence[str] = ()) -> None:
        self.sink, self.cwd, self.roots = sink, cwd, tuple(roots)
        self.streamed = False
        self._lock = threading.Lock()
        self._visible: dict[str, str] = {}  # Hermes' tool call id -> the id the editor sees
        self._shown: dict[str, ToolContent] = {}  # a diff or an editor terminal, kept to the end
        self._settled: set[str] = set()  # refused or failed before running: later updates are dropped

    # --- Hermes' callbacks ------------------------------------------------------------

    def delta(self, text: str | None) -> None:
        if text and not self.streamed:
            text = text.lstrip("\n")  # Hermes' paragraph break after tools, before any text
        if text:  # None marks the end of a streamed message
            self.streamed = True
            self._quietly(self.sink.text, text)

    def reasoning(self, text: str | None) -> None:
        if text:
            self._quietly(self.sink.thought, text)

    def tool_started(self, call_id: str, name: str, args: Any) -> None:
        self.start(call_id, name, cast(dict[str, Any], args) if isinstance(args, dict) else {})

    def tool_completed(self, call_id: str, name: str, args: Any, result: Any) -> None:
        visible = self.visible(call_id)
        if visible is None or visible in self._settled:
            return
        raw = _parsed(result)
        # Content already shown (a diff, the editor's terminal) stays: an update without content
        # keeps it, so it is not sent a second time.
        content: list[ToolContent] | None = None
        if visible not in self._shown and isinstance(result, str) and result:
            content = [TextContent(result[:SHOWN_OUTPUT])]
        status = "failed" if _is_error(name, raw) else "completed"
        self._quietly(lambda: self.sink.tool_update(visible, status=status, content=content, raw_output=raw))
        if name == "todo" and (plan := plan_of(raw)) is not None:
            self._quietly(self.sink.plan, plan)

    # --- for the tool gate ------------------------------------------------------------

    def start(self, call_id: str, name: str, args: dict[str, Any], *, title: str | None = None) -> str | None:
        """The visible id of Hermes' call, starting it if its start callback has not (yet)."""
        with self._lock:
            if call_id in self._visible:
                return self._visible[call_id]
        visible = self._quietly(
            lambda: self.sink.tool_call(
                title or title_of(name, args, cwd=self.cwd, roots=self.roots),
                kind=kind_of(name),
                name=name,
                raw_input=args,
                locations=locations_of(name, args, cwd=self.cwd, roots=self.roots),
                tool_call_id=call_id or None,
            )
        )
        if visible is not None:
            with self._lock:
                self._visible.setdefault(call_id, visible)
        return visible

    def visible(self, call_id: str) -> str | None:
        with self._lock:
            return self._visible.get(call_id)

    def show(self, visible: str, content: DiffContent | TerminalContent) -> None:
        """Content the call keeps (a diff before the permission question, the editor's terminal)."""
        with self._lock:
            self._shown[visible] = content
        self.sink.tool_update(visible, content=[content])

    def settle(self, visible: str, message: str) -> None:
        """The call ends here (refused, or failed before running); Hermes' completion is ignored."""
        with self._lock:
            self._settled.add(visible)
        self._quietly(lambda: self.sink.tool_update(visible, status="failed", content=[TextContent(message)]))

    def _quietly(self, report: Callable[..., Any], *args: Any) -> Any:
        if self.sink.cancelled:
            return None
        try:
            return report(*args)
        except TurnCancelled:
            return None


def _parsed(result: Any) -> Any:
    if isinstance(result, str):
        try:
            return json.loads(result)
        except ValueError:
            return result
    return result


def _is_error(name: str, raw: Any) -> bool:
    """Hermes' own failure marks, and for a command a non-zero exit, as the other agents do."""
    if not isinstance(raw, dict):
        return False
    fields = cast(dict[str, Any], raw)
    failed_command = name == "terminal" and fields.get("exit_code") not in (0, None)
    return bool(fields.get("error")) or fields.get("success") is False or failed_command
