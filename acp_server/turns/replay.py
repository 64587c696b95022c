"""Replaying a journaled conversation as `session/update` payloads, streamed, in order.

Consecutive text of one kind within a run is merged (a reply streamed as 20,000 deltas
replays as a few chunks), prompts become `user_message_chunk`s, and everything else goes
through the same `to_update` as live streaming. A run that was cut off ends with a visible
notice instead of pretending it finished. An editor terminal embedded in a tool call belonged
to the connection that made it, so replay shows its captured output as text instead. A run's
text is shown with its HAUI fences drawn, as it was live (turns.rich).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Protocol

from acp_server.turns.mapping import MessageIds, OpenToolCalls, prompt_message_id, to_update, user_message_chunks
from acp_server.turns.rich import DrawnDelta, RichReply
from adapters.events import (
    CompactionChunk,
    CompactionUpdated,
    NoticeShown,
    PromptReceived,
    RuntimeEvent,
    TerminalContent,
    TerminalExited,
    TextContent,
    TextDelta,
    ThoughtDelta,
    ToolCallStarted,
    ToolCallUpdated,
    ToolContent,
    TurnFinished,
)

# Sent live only to an editor that advertised them; the one loading the session may not have
# (ACP: MUST only send when advertised), and a notice is not session history.
LIVE_ONLY = (CompactionUpdated, CompactionChunk, NoticeShown)

REPLAY_CHUNK_CHARS = 64 * 1024

INTERRUPTED_NOTICE = "\n\n_[This turn was interrupted: the agent server stopped before it finished.]_"


class Replayable(Protocol):
    @property
    def run_id(self) -> str: ...
    @property
    def event(self) -> RuntimeEvent: ...


def iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


def interrupted_notice(run_id: str, ended_at: float | None) -> list[dict[str, Any]]:
    info: dict[str, Any] = {"sessionUpdate": "session_info_update", "_meta": {"acp-server": {"interruptedRun": run_id}}}
    if ended_at is not None:
        info["updatedAt"] = iso(ended_at)
    notice = {"type": "text", "text": INTERRUPTED_NOTICE}
    return [{"sessionUpdate": "agent_message_chunk", "content": notice, "messageId": f"{run_id}:interrupted"}, info]


class _TextMerger:
    """Collects consecutive deltas of one kind and message; `flush` maps them as one event."""

    def __init__(self) -> None:
        self._kind: type[TextDelta] | type[ThoughtDelta] | None = None
        self._message_id: str | None = None
        self._parts: list[str] = []
        self._size = 0

    def add(self, event: TextDelta | ThoughtDelta, message_id: str | None) -> list[dict[str, Any]]:
        joins = type(event) is self._kind and message_id == self._message_id and self._size < REPLAY_CHUNK_CHARS
        flushed = [] if joins else self.flush()
        self._kind, self._message_id = type(event), message_id
        self._parts.append(event.text)
        self._size += len(event.text)
        return flushed

    def flush(self) -> list[dict[str, Any]]:
        if self._kind is None:
            return []
        update = to_update(self._kind("".join(self._parts)), self._message_id)
        self._kind, self._parts, self._size = None, [], 0
        return [update] if update is not None else []


def terminal_text(exited: TerminalExited) -> str:
    """What a replay shows in place of a terminal: its output, and how the command ended."""
    ended = f"signal {exited.signal}" if exited.signal else f"exit code {exited.exit_code}"
    cut = " (output truncated)" if exited.truncated else ""
    output = exited.output.rstrip()
    return f"```\n{output}\n```\n{ended}{cut}" if output else f"{ended}{cut}, no output"


class _Terminals:
    """A run's terminals, as replay shows them: by their captured output, or not at all."""

    def __init__(self) -> None:
        self._exited: dict[str, TerminalExited] = {}
        self._shown: dict[str, tuple[ToolContent, ...]] = {}  # tool call -> its content as journaled

    def rewrite(self, event: RuntimeEvent) -> RuntimeEvent:
        """The event with every terminal in its content replaced by the terminal's output."""
        if not isinstance(event, ToolCallStarted | ToolCallUpdated) or event.content is None:
            return event
        self._shown[event.tool_call_id] = event.content
        if not any(isinstance(item, TerminalContent) for item in event.content):
            return event
        return replace(event, content=self._swap(event.content))

    def exited(self, event: TerminalExited) -> ToolCallUpdated | None:
        """The update that shows a finished terminal's output in the tool call that embeds it."""
        self._exited[event.terminal_id] = event
        shown = self._shown.get(event.tool_call_id or "", ())
        if TerminalContent(event.terminal_id) not in shown:
            return None
        return ToolCallUpdated(event.tool_call_id or "", content=self._swap(shown))

    def _swap(self, content: tuple[ToolContent, ...]) -> tuple[ToolContent, ...]:
        texts = {item.text.strip() for item in content if isinstance(item, TextContent)}
        swapped: list[ToolContent] = []
        for item in content:
            if not isinstance(item, TerminalContent):
                swapped.append(item)
            elif (exited := self._exited.get(item.terminal_id)) is not None and exited.output.strip() not in texts:
                swapped.append(TextContent(terminal_text(exited)))  # unless the agent shows it already
        return tuple(swapped)


def _failure_notice(event: TurnFinished, run_id: str) -> dict[str, Any]:
    text = f"\n\n_[The turn failed: {event.message or 'agent error'}]_"
    return {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": text},
        "messageId": f"{run_id}:failed",
    }


class RunReplay:
    """One run's replay: `feed` it the run's events in order, then `end` it. What it shows
    depends on the run alone (its events, how it ended, `rich`), never on the runs before it."""

    def __init__(self, run_id: str, *, rich: bool, plans: bool = False) -> None:
        self.run_id = run_id
        self._plans = plans  # the client takes plan operations (mapping._plan)
        self._merger = _TextMerger()
        self._open_tools = OpenToolCalls()
        self._terminals = _Terminals()
        self._reply = RichReply(enabled=rich)
        self._ids = MessageIds(run_id)

    def feed(self, event: RuntimeEvent) -> list[dict[str, Any]]:
        if type(event) is TextDelta:  # most events: text to merge, no tool call to track
            return [update for shown in self._reply.text(event) for update in self._text(shown)]
        self._open_tools.add(event)
        return [update for shown in self._reply.shown(event) for update in self._show(shown)]

    def flush(self) -> list[dict[str, Any]]:
        """The text held for merging, now: a reader following a live run shows it as it comes."""
        return self._merger.flush()

    def end(self, cut_off: float | bool | None, *, running: bool = False) -> list[dict[str, Any]]:
        """The rest of the run; `cut_off` is what `replay_updates`' `interrupted` says of it. A
        `running` run's held text (a HAUI fence still open) stays held: the live filter holds the
        same text and sends it when the fence closes, so it is not drawn twice, nor half drawn."""
        held = [] if running else self._reply.finish()
        updates = [update for event in held for update in self._show(event)] + self._merger.flush()
        closing = self._open_tools.close_all()
        if cut_off is not False:
            updates += [update for event in closing if (update := to_update(event)) is not None]
            updates += interrupted_notice(self.run_id, None if cut_off is True else cut_off)
        return updates

    def _text(self, shown: TextDelta) -> list[dict[str, Any]]:
        message_id = self._ids.see(shown)
        if type(shown) is DrawnDelta:  # a fence's chunk stands alone, as live: its `_meta` is its own
            update = to_update(shown, message_id)
            return self._merger.flush() + ([update] if update is not None else [])
        return self._merger.add(shown, message_id)

    def _show(self, event: RuntimeEvent) -> list[dict[str, Any]]:
        if isinstance(event, TextDelta):
            return self._text(event)
        message_id = self._ids.see(event)
        if isinstance(event, ThoughtDelta):
            return self._merger.add(event, message_id)
        updates = self._merger.flush()
        if isinstance(event, PromptReceived):
            updates += user_message_chunks(event, prompt_message_id(self.run_id))
        elif isinstance(event, TurnFinished) and event.reason == "error":
            updates.append(_failure_notice(event, self.run_id))
        elif isinstance(event, LIVE_ONLY):
            pass
        elif isinstance(event, TerminalExited):
            shown = self._terminals.exited(event)
            if shown is not None and (update := to_update(shown)) is not None:
                updates.append(update)
        elif (update := to_update(self._terminals.rewrite(event), plans=self._plans)) is not None:
            updates.append(update)
        return updates


async def replay_updates(
    records: AsyncIterable[Replayable],
    interrupted: Callable[[str], float | bool | None],
    *,
    rich: bool = True,
) -> AsyncIterator[dict[str, Any]]:
    """`interrupted(run_id)` is False for a run that ended normally; otherwise the time it was
    found cut off (or True when unknown). `rich`: each run's text is shown with its HAUI fences
    drawn, through the same `RichReply` as live streaming."""
    run: RunReplay | None = None
    async for record in records:
        if run is None or record.run_id != run.run_id:
            if run is not None:
                for update in run.end(interrupted(run.run_id)):
                    yield update
            run = RunReplay(record.run_id, rich=rich)
        for update in run.feed(record.event):
            yield update
    if run is not None:
        for update in run.end(interrupted(run.run_id)):
            yield update
