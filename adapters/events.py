"""The normalized runtime events every adapter produces, whatever agent it wraps.

Agents report through a sink; the server turns each report into one of these frozen values,
numbers it with a per-run `seq`, and hands it to one mapper (live streaming) and, later, to
the journal. Nothing here knows about ACP or SQLite.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Literal, get_args

from adapters.frozen import frozen

ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"]
ToolStatus = Literal["pending", "in_progress", "completed", "failed"]
StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]
TOOL_KINDS: frozenset[str] = frozenset(get_args(ToolKind))
STOP_REASONS: frozenset[str] = frozenset(get_args(StopReason))


# --- tool call content -------------------------------------------------------------------


@frozen
class TextContent:
    text: str
    kind: Literal["text"] = "text"


@frozen
class DiffContent:
    path: str
    new_text: str
    old_text: str | None = None
    kind: Literal["diff"] = "diff"


@frozen
class TerminalContent:
    terminal_id: str
    kind: Literal["terminal"] = "terminal"


ToolContent = TextContent | DiffContent | TerminalContent


@frozen
class Location:
    """A file a tool call touches: its absolute path, and the 1-based line a read starts at.
    A plain string is a path alone (what a location was before lines, in older journals too)."""

    path: str
    line: int | None = None


ToolLocation = str | Location


@frozen
class PlanEntry:
    content: str
    status: Literal["pending", "in_progress", "completed"] = "pending"
    priority: Literal["high", "medium", "low"] = "medium"


# --- events --------------------------------------------------------------------------------


@frozen
class PromptReceived:
    """The run's prompt, as plain content blocks; first event of every run. `origin` is None for
    the user's prompt; a follow-up turn the agent asked for (`Sink.follow_up`) names what for."""

    blocks: tuple[dict[str, Any], ...]
    origin: str | None = None
    kind: Literal["prompt"] = "prompt"


@frozen
class TextDelta:
    """A piece of the agent's reply; `message_id` is the id an agent below gave its message."""

    text: str
    message_id: str | None = None
    kind: Literal["text"] = "text"


@frozen
class ThoughtDelta:
    """A piece of the agent's reasoning; `message_id` is the id an agent below gave its message."""

    text: str
    message_id: str | None = None
    kind: Literal["thought"] = "thought"


@frozen
class ToolCallStarted:
    tool_call_id: str
    title: str
    tool_kind: ToolKind = "other"
    name: str | None = None
    raw_input: Any = None
    locations: tuple[ToolLocation, ...] = ()
    content: tuple[ToolContent, ...] = ()
    extra: Any = None  # an agent below's fields we do not know (`_meta`, a vendor's), passed on as they came
    kind: Literal["tool_started"] = "tool_started"


@frozen
class ToolCallUpdated:
    """A change to a visible tool call; fields left as None are unchanged."""

    tool_call_id: str
    status: ToolStatus | None = None
    title: str | None = None
    content: tuple[ToolContent, ...] | None = None
    raw_output: Any = None
    locations: tuple[ToolLocation, ...] | None = None
    tool_kind: ToolKind | None = None
    raw_input: Any = None
    extra: Any = None  # as `ToolCallStarted.extra`
    kind: Literal["tool_updated"] = "tool_updated"


@frozen
class PlanUpdated:
    """The agent's plan, whole. `plan_id` names it when the agent keeps several (an agent below's
    own ids); None is the session's one plan. No entries: the plan is gone."""

    entries: tuple[PlanEntry, ...]
    extra: Any = None  # as `ToolCallStarted.extra`
    plan_id: str | None = None
    kind: Literal["plan"] = "plan"


@frozen
class UsageReported:
    """Token usage; `cost_usd` is None when the runtime does not know it (never invented)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    context_used: int | None = None
    context_size: int | None = None
    cached_read_tokens: int | None = None  # prompt tokens the provider served from its cache
    kind: Literal["usage"] = "usage"


@frozen
class TitleChanged:
    title: str
    kind: Literal["title"] = "title"


@frozen
class PermissionDecided:
    """How a permission question about a tool call was settled, and by whom."""

    tool_call_id: str
    outcome: Literal["allowed", "rejected", "cancelled", "timed_out"]
    by: Literal["user", "policy", "remembered"]
    option: str | None = None
    kind: Literal["permission"] = "permission"


@frozen
class TranscriptSaved:
    """Messages of the agent's own transcript (journal-only, never shown): appended to what was
    saved before, or, with `base`, replacing it (a compaction). See `adapters.conversation`."""

    format: str
    messages: tuple[Any, ...]
    base: bool = False
    kind: Literal["transcript"] = "transcript"


@frozen
class StateSaved:
    """A value the agent keeps with the session under `key` (journal-only, never shown); the
    latest of each key comes back in `TurnInput.state`, after a restart too."""

    key: str
    value: Any
    kind: Literal["state"] = "state"


CompactionStatus = Literal["in_progress", "completed", "failed", "cancelled"]
NoticeSeverity = Literal["info", "warning", "error"]


@frozen
class CompactionUpdated:
    """The agent compacted (or is compacting) its context; `summary` replaces the shown summary.
    Only for an editor that advertised `session.compaction` (the agent checks)."""

    compaction_id: str
    status: CompactionStatus
    summary: str | None = None
    error: str | None = None
    kind: Literal["compaction"] = "compaction"


@frozen
class CompactionChunk:
    """A piece of a compaction's summary as the model streams it."""

    compaction_id: str
    text: str
    kind: Literal["compaction_chunk"] = "compaction_chunk"


@frozen
class NoticeShown:
    """Information for the user that is not conversation (an editor with `session.notices`)."""

    title: str
    severity: NoticeSeverity = "info"
    description: str | None = None
    kind: Literal["notice"] = "notice"


@frozen
class TerminalExited:
    """An editor terminal's command ended: its output, kept so a replay can show it as text (the
    terminal itself belongs to the connection that made it). Journal-only."""

    terminal_id: str
    output: str
    exit_code: int | None = None
    signal: str | None = None
    truncated: bool = False
    tool_call_id: str | None = None
    kind: Literal["terminal_exited"] = "terminal_exited"


@frozen
class TurnFinished:
    """The last event of a run: how it ended, and why when it failed."""

    reason: str
    message: str | None = None
    kind: Literal["done"] = "done"


RuntimeEvent = (
    PromptReceived
    | TextDelta
    | ThoughtDelta
    | ToolCallStarted
    | ToolCallUpdated
    | PlanUpdated
    | UsageReported
    | TitleChanged
    | PermissionDecided
    | TranscriptSaved
    | StateSaved
    | TerminalExited
    | CompactionUpdated
    | CompactionChunk
    | NoticeShown
    | TurnFinished
)


@frozen
class Envelope:
    """One numbered event of one run; the journal names it `run_id:seq`, which never changes."""

    run_id: str
    session_id: str
    seq: int
    event: RuntimeEvent
    created_at: float = field(default=0.0)
