"""The agent's `session/update`s of a turn, reported through the sink as a built-in agent would.

The agent's words are untrusted input: every field is read tolerantly (what does not fit is
left out, never fails the turn). Tool calls keep the agent's ids where the sink accepts them;
a call the agent updates before announcing it (or names only in a permission question) is
started from what is known. Paths in `locations` and diffs are named where they really are
(`adapters.paths.target`), as the files the agent asks for are. Updates about the session rather
than the turn (modes, options, commands) are the session's (`SessionState`), whichever turn they
arrive in.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any, cast

from adapters.base import EditorFeatures, Sink, ToolRefused
from adapters.events import (
    TOOL_KINDS,
    DiffContent,
    Location,
    PlanEntry,
    TextContent,
    ToolContent,
    ToolKind,
    ToolLocation,
    ToolStatus,
)
from adapters.paths import target

log = logging.getLogger(__name__)

Json = dict[str, Any]
STATUSES = frozenset({"pending", "in_progress", "completed", "failed"})
SESSION_UPDATES = frozenset({"available_commands_update", "current_mode_update", "config_option_update"})
PLAN_STATUSES = frozenset({"pending", "in_progress", "completed"})
PRIORITIES = frozenset({"high", "medium", "low"})
SESSION_NOTICES = frozenset({"notice", "compaction_update", "compaction_summary_chunk"})
SEVERITIES = frozenset({"info", "warning", "error"})
COMPACTION_STATUSES = frozenset({"in_progress", "completed", "failed", "cancelled"})
ELICITATION_DONE = "elicitation/complete"  # the agent's notification, carried to the turn as an update
SHOWS_NEITHER = EditorFeatures()  # an editor that advertised neither notices nor compaction
# The fields of a tool call and a plan that we read; any other (`_meta`, a vendor's) is passed on.
TOOL_FIELDS = frozenset(
    {"sessionUpdate", "toolCallId", "title", "name", "kind", "status", "content", "locations", "rawInput", "rawOutput"}
)
PLAN_FIELDS = frozenset({"sessionUpdate", "entries"})
EXTRA_LIMIT = 64 * 1024  # characters of JSON: more is left out, as are values JSON cannot hold


class ToolCalls:
    """The agent's tool call ids and ours (the same unless the sink had to pick another), and
    which calls are still open (started, neither running nor done)."""

    def __init__(self, sink: Sink, *, roots: Sequence[str] = ()) -> None:
        self._sink = sink
        self._roots = tuple(roots)  # the session's: cwd first
        self._ids: dict[str, str] = {}
        self._open: dict[str, ToolKind] = {}  # our id -> its kind, in the order started
        self._unended: dict[str, None] = {}  # our ids of calls not completed or failed yet
        self.allowed: set[str] = set()  # our ids of calls a permission question allowed
        self._commands: dict[str, str] = {}  # an allowed call's command line -> its id, until run

    def allow(self, ours: str, call: Json) -> None:
        """A permission question allowed the call: the command it named may run once for it."""
        self.allowed.add(ours)
        command = _object(call.get("rawInput")).get("command")
        if isinstance(command, str) and command:
            self._commands[command] = ours

    def allowed_command(self, line: str) -> str | None:
        """The allowed call that named `line`, once (a `terminal/create` running it is that call)."""
        return self._commands.pop(line, None)

    def ours(self, theirs: str) -> str | None:
        return self._ids.get(theirs)

    def question(self, call: Json) -> str:
        """The call a permission question is about. An agent may ask about an id it never
        announced (Hermes does: `perm-check-1` for its visible `terminal` call): the question
        is then about the one open call of that kind, which takes the question's fields, so
        the user decides on the call they see; with none or several, the question's own call
        is started."""
        theirs = str(call.get("toolCallId") or "")
        kind = _kind(call.get("kind"))
        candidates = [ours for ours, known in self._open.items() if kind in (None, "other", known)]
        if self.ours(theirs) is None and len(candidates) == 1:
            self._ids[theirs] = candidates[0]
            self.change(candidates[0], call)
            return candidates[0]
        return self.update(call)

    def start(self, call: Json) -> str:
        """Start the call `call` describes (a `tool_call` or the `toolCall` of a question)."""
        theirs = str(call.get("toolCallId") or "")
        ours = self._sink.tool_call(
            _text(call.get("title")) or "Tool call",
            kind=_kind(call.get("kind")) or "other",
            name=_text(call.get("name")),
            raw_input=call.get("rawInput"),
            locations=_locations(call.get("locations"), self.where) or (),
            tool_call_id=theirs or None,
            extra=extra(call, TOOL_FIELDS),
        )
        if theirs:
            self._ids[theirs] = ours
        self._open[ours] = _kind(call.get("kind")) or "other"
        self._unended[ours] = None
        if call.get("status") != "pending":  # a start is pending already
            self.change(ours, call, started=True)
        return ours

    def update(self, call: Json) -> str:
        """Apply a `tool_call_update` (or a question's `toolCall`); returns our id."""
        ours = self.ours(str(call.get("toolCallId") or ""))
        if ours is None:
            return self.start(call)
        self.change(ours, call)
        return ours

    def change(self, ours: str, call: Json, *, started: bool = False) -> None:
        fields: dict[str, Any] = {
            "status": _status(call.get("status")),
            "content": _contents(call.get("content"), self.where),
            "raw_output": call.get("rawOutput"),
        }
        if not started:  # a start already carried these
            fields |= {
                "title": _text(call.get("title")),
                "kind": _kind(call.get("kind")),
                "raw_input": call.get("rawInput"),
                "locations": _locations(call.get("locations"), self.where),
            }
        if fields["status"] not in (None, "pending"):
            self._open.pop(ours, None)
        if fields["status"] in ("completed", "failed"):
            self._unended.pop(ours, None)
        kept = None if started else extra(call, TOOL_FIELDS)
        if kept is not None or any(value is not None for value in fields.values()):
            self._sink.tool_update(ours, **fields, extra=kept)

    def where(self, path: str) -> str:
        """Where a path the agent shows really is: beneath the session's roots as they are named,
        else its real path anywhere; as spelled only when it names no place (a NUL)."""
        if not self._roots:
            return path
        try:
            return target(path, cwd=self._roots[0], roots=(*self._roots, os.sep)).path
        except ToolRefused:
            return path

    def finish_allowed(self) -> None:
        """Complete the calls a question allowed that the agent never ended (`leaves_calls_unfinished`:
        the agent ended its turn normally, so the call ran; left open, it would be shown failed)."""
        for ours in [ours for ours in self._unended if ours in self.allowed]:
            self._unended.pop(ours)
            self._sink.tool_update(ours, status="completed")


def apply(update: Json, sink: Sink, tools: ToolCalls, editor: EditorFeatures = SHOWS_NEITHER) -> None:
    """Report one update of the turn (the session's own updates never come here); a notice or a
    compaction only to an editor that advertised them (`editor`), as ACP asks of the agent."""
    kind = update.get("sessionUpdate")
    if kind in SESSION_NOTICES:
        _session_notice(update, sink, editor)
        return
    if kind == "agent_message_chunk":
        sink.text(_block_text(update.get("content")), message_id=_text(update.get("messageId")))
    elif kind == "agent_thought_chunk":
        sink.thought(_block_text(update.get("content")), message_id=_text(update.get("messageId")))
    elif kind == "tool_call":
        tools.update(update) if tools.ours(str(update.get("toolCallId"))) else tools.start(update)
    elif kind == "tool_call_update":
        tools.update(update)
    elif kind == "plan":
        sink.plan(_plan(update.get("entries")), extra=extra(update, PLAN_FIELDS))
    elif kind in ("plan_update", "plan_removed"):  # ACP unstable: asked for only with --unstable
        _plan_operation(update, sink)
    elif kind == "usage_update":
        _usage(update, sink)
    elif kind == ELICITATION_DONE:
        if elicitation_id := _text(update.get("elicitationId")):
            sink.elicitation_complete(elicitation_id)
    elif kind == "session_info_update":
        if title := _text(update.get("title")):
            sink.title(title)
    else:  # user_message_chunk (an agent echoing a prompt), and kinds from later versions
        log.debug("agent update %r not reported", kind)


def extra(update: Json, known: frozenset[str]) -> Json | None:
    """The fields of `update` we do not read, to pass on as they came: `_meta` when it is an
    object (as the schema asks), any vendor field; None for none, or for more than EXTRA_LIMIT."""
    kept: Json = {k: v for k, v in update.items() if k not in known and (k != "_meta" or isinstance(v, dict))}
    if not kept:
        return None
    try:
        size = len(json.dumps(kept))
    except (TypeError, ValueError, RecursionError):
        return None
    return kept if size <= EXTRA_LIMIT else None


def _session_notice(update: Json, sink: Sink, editor: EditorFeatures) -> None:
    kind = update.get("sessionUpdate")
    if kind == "notice" and editor.notices and (title := _text(update.get("title"))):
        severity = update.get("severity")
        sink.notice(
            title,
            severity=severity if severity in SEVERITIES else "info",
            description=_text(update.get("description")),
        )
        return
    compaction_id = _text(update.get("compactionId"))
    if not editor.compaction or compaction_id is None:
        return
    if kind == "compaction_summary_chunk":
        if text := _block_text(update.get("content")):
            sink.compaction_chunk(compaction_id, text)
        return
    status = update.get("status")
    if kind == "compaction_update" and status in COMPACTION_STATUSES:
        summary = "".join(_block_text(block) for block in _list(update.get("summary"))) or None
        sink.compaction(compaction_id, status, summary=summary, error=_text(update.get("error")))


def _usage(update: Json, sink: Sink) -> None:
    used, size = update.get("used"), update.get("size")
    if not _count(used) or not _count(size):
        return
    cost = _object(update.get("cost"))
    amount = cost.get("amount") if cost.get("currency") == "USD" else None
    sink.usage(
        context_used=cast(int, used),
        context_size=cast(int, size),
        cost_usd=float(amount) if isinstance(amount, int | float) and not isinstance(amount, bool) else None,
    )


def _plan_operation(update: Json, sink: Sink) -> None:
    """A plan kept by id: an items plan whole, a removal as no entries (our `PlanUpdated`); a plan
    given as Markdown or a file has no entries to keep, and is not reported."""
    if update.get("sessionUpdate") == "plan_removed":
        if plan_id := _text(update.get("planId")):
            sink.plan([], plan_id=plan_id)
        return
    plan = _object(update.get("plan"))
    plan_id = _text(plan.get("planId"))
    if plan.get("type") == "items" and plan_id:
        sink.plan(_plan(plan.get("entries")), plan_id=plan_id)
    else:
        log.debug("agent plan of type %r not reported", plan.get("type"))


def _plan(value: Any) -> list[PlanEntry]:
    entries: list[PlanEntry] = []
    for item in _list(value):
        entry = _object(item)
        content = _text(entry.get("content"))
        if content is None:
            continue
        status, priority = entry.get("status"), entry.get("priority")
        entries.append(
            PlanEntry(
                content,
                status if status in PLAN_STATUSES else "pending",
                priority if priority in PRIORITIES else "medium",
            )
        )
    return entries


def _block_text(value: Any) -> str:
    """A content block as text: text itself, a link's URI, an embedded text resource; other
    kinds (images, audio) as a short marker, since text is all the sink carries."""
    block = _object(value)
    kind = block.get("type")
    if kind == "text":
        return _text(block.get("text")) or ""
    if kind == "resource_link":
        return _text(block.get("uri")) or ""
    if kind == "resource":
        return _text(_object(block.get("resource")).get("text")) or ""
    return f"[{kind}]" if isinstance(kind, str) and kind in ("image", "audio") else ""


def _contents(value: Any, where: Callable[[str], str]) -> tuple[ToolContent, ...] | None:
    if not isinstance(value, list):
        return None
    found: list[ToolContent] = []
    for item in cast(list[Any], value):
        content = _object(item)
        if content.get("type") == "content":
            text = _block_text(content.get("content"))
            if text:
                found.append(TextContent(text))
        elif content.get("type") == "diff" and _absolute(content.get("path")):
            new, old = content.get("newText"), content.get("oldText")
            if isinstance(new, str):
                found.append(DiffContent(where(content["path"]), new, old if isinstance(old, str) else None))
        # `terminal` content names a terminal of ours, and the agent was offered none.
    return tuple(found)


def _locations(value: Any, where: Callable[[str], str]) -> tuple[ToolLocation, ...] | None:
    if not isinstance(value, list):
        return None
    found: list[ToolLocation] = []
    for item in cast(list[Any], value):
        place = _object(item)
        path, line = place.get("path"), place.get("line")
        if _absolute(path):
            found.append(
                Location(where(cast(str, path)), line if isinstance(line, int) and _count(line) and line > 0 else None)
            )
    return tuple(found)


def _kind(value: Any) -> ToolKind | None:
    return cast(ToolKind, value) if isinstance(value, str) and value in TOOL_KINDS else None


def _status(value: Any) -> ToolStatus | None:
    return cast(ToolStatus, value) if isinstance(value, str) and value in STATUSES else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _absolute(value: Any) -> bool:
    return isinstance(value, str) and os.path.isabs(value)


def _object(value: Any) -> Json:
    return cast(Json, value) if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return cast(list[Any], value) if isinstance(value, list) else []
