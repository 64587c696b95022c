"""The one mapping from runtime events to ACP `session/update` payloads.

Pure functions of the event alone: live streaming and journal replay call the same code,
so what an editor sees after a reload is what it saw live. Events with no wire form of
their own (the end of a turn) map to None.
"""

from __future__ import annotations

import math
from typing import Any, cast

from acp_server.turns.rich import DrawnDelta
from adapters.events import (
    CompactionChunk,
    CompactionUpdated,
    DiffContent,
    NoticeShown,
    PermissionDecided,
    PlanUpdated,
    PromptReceived,
    RuntimeEvent,
    StateSaved,
    TerminalContent,
    TerminalExited,
    TextContent,
    TextDelta,
    ThoughtDelta,
    TitleChanged,
    ToolCallStarted,
    ToolCallUpdated,
    ToolContent,
    ToolLocation,
    TranscriptSaved,
    TurnFinished,
    UsageReported,
)

PLAN_ID = "plan"  # our agents' one plan per session: the same id live, on replay and after a restart
PLAN_OPERATIONS = frozenset({"plan_update", "plan_removed"})


def tool_content(content: ToolContent) -> dict[str, Any]:
    if isinstance(content, TextContent):
        return {"type": "content", "content": {"type": "text", "text": content.text}}
    if isinstance(content, DiffContent):
        return {"type": "diff", "path": content.path, "oldText": content.old_text, "newText": content.new_text}
    assert isinstance(content, TerminalContent)
    return {"type": "terminal", "terminalId": content.terminal_id}


def _locations(found: tuple[ToolLocation, ...]) -> list[dict[str, Any]]:
    return [
        {"path": at} if isinstance(at, str) else {"path": at.path} | ({} if at.line is None else {"line": at.line})
        for at in found
    ]


def tool_call_fields(event: ToolCallStarted) -> dict[str, Any]:
    """The tool call as ACP describes it; shared by `tool_call` and permission requests."""
    fields: dict[str, Any] = {
        "toolCallId": event.tool_call_id,
        "title": event.title,
        "kind": event.tool_kind,
        "status": "pending",
    }
    if event.name is not None:
        fields["name"] = event.name
    if event.raw_input is not None:
        fields["rawInput"] = event.raw_input
    if event.locations:
        fields["locations"] = _locations(event.locations)
    if event.content:
        fields["content"] = [tool_content(c) for c in event.content]
    return fields


def _tool_update(event: ToolCallUpdated) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": event.tool_call_id}
    if event.status is not None:
        update["status"] = event.status
    if event.title is not None:
        update["title"] = event.title
    if event.content is not None:
        update["content"] = [tool_content(c) for c in event.content]
    if event.raw_output is not None:
        update["rawOutput"] = event.raw_output
    if event.locations is not None:
        update["locations"] = _locations(event.locations)
    if event.tool_kind is not None:
        update["kind"] = event.tool_kind
    if event.raw_input is not None:
        update["rawInput"] = event.raw_input
    return update


def _usage(event: UsageReported) -> dict[str, Any] | None:
    if event.context_size is None:
        return None  # usage_update needs the window size; never invent one
    used = event.context_used if event.context_used is not None else event.input_tokens + event.output_tokens
    update: dict[str, Any] = {"sessionUpdate": "usage_update", "used": used, "size": event.context_size}
    if event.cost_usd is not None and math.isfinite(event.cost_usd):
        update["cost"] = {"amount": event.cost_usd, "currency": "USD"}
    return update


def _session_notice(event: CompactionUpdated | CompactionChunk | NoticeShown) -> dict[str, Any]:
    """Compaction and notice updates; the agent sends them only to editors that advertised them."""
    if isinstance(event, CompactionChunk):
        content = {"type": "text", "text": event.text}
        return {"sessionUpdate": "compaction_summary_chunk", "compactionId": event.compaction_id, "content": content}
    if isinstance(event, NoticeShown):
        notice = {"sessionUpdate": "notice", "severity": event.severity, "title": event.title}
        return notice | ({"description": event.description} if event.description else {})
    update: dict[str, Any] = {"sessionUpdate": "compaction_update", "compactionId": event.compaction_id}
    update["status"] = event.status
    if event.summary is not None:
        update["summary"] = [{"type": "text", "text": event.summary}]
    if event.error is not None:
        update["error"] = event.error
    return update


def _chunk(kind: str, text: str, message_id: str | None) -> dict[str, Any]:
    if message_id is None:
        return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}, "messageId": message_id}


def _plan(event: PlanUpdated, plans: bool) -> dict[str, Any]:
    """Stable ACP's `plan` (the whole plan, replacing the last); for a client that opted in to
    plan operations (ACP unstable: `clientCapabilities.plan`, with `--unstable`) `plan_update`
    with the plan's id, and `plan_removed` for a plan with no entries left."""
    entries = [{"content": e.content, "status": e.status, "priority": e.priority} for e in event.entries]
    if not plans:
        return {"sessionUpdate": "plan", "entries": entries}
    plan_id = event.plan_id or PLAN_ID
    if not entries:
        return {"sessionUpdate": "plan_removed", "planId": plan_id}
    return {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": plan_id, "entries": entries}}


def stable_plan(update: dict[str, Any]) -> dict[str, Any] | None:
    """A plan operation as a client that did not opt in is shown it: `plan_update` (of entries)
    as `plan`, `plan_removed` as an empty `plan`; a plan of another type has no stable form
    (None). Anything else is returned as it is."""
    kind = update.get("sessionUpdate")
    if kind == "plan_removed":
        return {"sessionUpdate": "plan", "entries": []}
    if kind != "plan_update":
        return update
    plan = update.get("plan")
    if not isinstance(plan, dict) or plan.get("type") != "items":  # pyright: ignore[reportUnknownMemberType]
        return None
    return {"sessionUpdate": "plan", "entries": plan.get("entries", [])}  # pyright: ignore[reportUnknownMemberType]


def to_update(event: RuntimeEvent, message_id: str | None = None, *, plans: bool = False) -> dict[str, Any] | None:
    """The `update` object of a `session/update` notification for one event, or None;
    `message_id` (a chunk's, from `MessageIds`) is its `messageId`; `plans`: the client takes
    plan operations (`_plan`)."""
    match event:
        case DrawnDelta(text=text):  # a HAUI fence: its Markdown, and its blocks for a client drawing them
            chunk = _chunk("agent_message_chunk", text, message_id)
            return chunk | {"_meta": {"acp-server": {"haui": event.meta()}}}
        case TextDelta(text=text):
            return _chunk("agent_message_chunk", text, message_id)
        case ThoughtDelta(text=text):
            return _chunk("agent_thought_chunk", text, message_id)
        case ToolCallStarted():
            return _with_extra(event.extra, {"sessionUpdate": "tool_call", **tool_call_fields(event)})
        case ToolCallUpdated():
            return _with_extra(event.extra, _tool_update(event))
        case PlanUpdated():
            return _with_extra(event.extra, _plan(event, plans))
        case UsageReported():
            return _usage(event)
        case TitleChanged(title=title):
            return {"sessionUpdate": "session_info_update", "title": title}
        case PromptReceived():
            return None  # the client shows its own prompt live; replay sends user chunks
        case TurnFinished() | PermissionDecided():
            return None  # journal-only: the response (or the tool's status) shows it
        case TranscriptSaved() | StateSaved():
            return None  # journal-only: the agent's own record, for its next turns
        case TerminalExited():
            return None  # journal-only: live, the embedded terminal shows the output itself
        case CompactionUpdated() | CompactionChunk() | NoticeShown():
            return _session_notice(event)
    raise TypeError(f"unmapped runtime event {type(event).__name__}")


CANCELLED_KEY = "cancelled"  # in _meta["acp-server"]: a client cancelled the call (or its turn)


def cancelled_mark(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """`extra` with the mark of a tool call a client cancelled: its command stopped, or its turn
    cancelled while it was open. v1 has no status for it (the call ends `failed` with the mark);
    v2 shows `cancelled`. Journaled with the call's last update, so a replay shows the same."""
    extra = dict(extra or {})
    meta = extra.get("_meta")
    meta = dict(cast(dict[str, Any], meta)) if isinstance(meta, dict) else {}
    ours = meta.get("acp-server")
    meta["acp-server"] = {**(cast(dict[str, Any], ours) if isinstance(ours, dict) else {}), CANCELLED_KEY: True}
    return {**extra, "_meta": meta}


def _with_extra(extra: Any, update: dict[str, Any]) -> dict[str, Any]:
    """`update` with an agent below's own fields it does not set (`_meta`, a vendor's) beside it."""
    return {**cast(dict[str, Any], extra), **update} if isinstance(extra, dict) else update


class OpenToolCalls:
    """Tool calls of a run that have not reached `completed` or `failed`. When a run ends
    (cancelled, failed, cut off) they are closed as failed, so no editor shows a spinner forever."""

    def __init__(self) -> None:
        self._open: dict[str, None] = {}

    def add(self, event: RuntimeEvent) -> None:
        if isinstance(event, ToolCallStarted):
            self._open[event.tool_call_id] = None
        elif isinstance(event, ToolCallUpdated) and event.status in ("completed", "failed"):
            self._open.pop(event.tool_call_id, None)

    def close_all(self, *, cancelled: bool = False) -> list[ToolCallUpdated]:
        """The updates that close them: `failed`, marked cancelled when a client cancelled the run."""
        extra = cancelled_mark() if cancelled else None
        closing = [ToolCallUpdated(tool_call_id, status="failed", extra=extra) for tool_call_id in self._open]
        self._open.clear()
        return closing


# What ends a message: a chunk after one of these starts the next (whatever else passes
# between two chunks, journal-only or live-only, does not, so replay numbers as live did).
_MESSAGE_BREAKS = (ToolCallStarted, ToolCallUpdated, PlanUpdated, PromptReceived, TurnFinished)


def prompt_message_id(run_id: str) -> str:
    """The `messageId` of a run's prompt: the run's first message."""
    return f"{run_id}:0"


class MessageIds:
    """The `messageId`s of one run's chunks, from its events alone, so a replay gives the ids the
    editor was shown live without storing any: `<run id>:<n>`, n counting the run's messages
    (its prompt is 0). Consecutive chunks of one kind are one message; a tool call, a plan or a
    change of kind starts the next. An agent below's own id, when it sent one, is kept."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._count = 0
        self._last: tuple[str, str | None] | None = None
        self._current = ""

    def see(self, event: RuntimeEvent) -> str | None:
        """Call with every event of the run, in order; a chunk's message id, else None."""
        if type(event) is TextDelta or type(event) is ThoughtDelta or type(event) is DrawnDelta:  # kept cheap
            key = (event.kind, event.message_id)
            if key != self._last:
                self._count += 1
                self._last = key
                self._current = event.message_id or f"{self.run_id}:{self._count}"
            return self._current
        if isinstance(event, _MESSAGE_BREAKS):
            self._last = None
        return None


def user_message_chunks(event: PromptReceived, message_id: str | None = None) -> list[dict[str, Any]]:
    """A replayed prompt, block by block, as `user_message_chunk` updates; a follow-up's (the
    agent sent it) marked with its origin in `_meta`."""
    meta: dict[str, Any] = {} if event.origin is None else {"_meta": {"acp-server": {"origin": event.origin}}}
    if message_id is not None:
        meta["messageId"] = message_id
    return [{"sessionUpdate": "user_message_chunk", "content": block} | meta for block in event.blocks]


def live_updates(event: RuntimeEvent, ids: MessageIds | None = None, *, plans: bool = False) -> list[dict[str, Any]]:
    """What the editor is shown live of one event: `to_update`'s, and a follow-up's prompt (the
    editor did not send it, so it has not shown it) as user message chunks. `ids`: the run's."""
    message_id = None if ids is None else ids.see(event)
    if isinstance(event, PromptReceived) and event.origin is not None:
        return user_message_chunks(event, None if ids is None else prompt_message_id(ids.run_id))
    update = to_update(event, message_id, plans=plans)
    return [] if update is None else [update]
