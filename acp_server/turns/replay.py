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

from acp_server.turns.mapping import OpenToolCalls, to_update, user_message_chunks
from acp_server.turns.rich import RichReply
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
    return [{"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": INTERRUPTED_NOTICE}}, info]


class _TextMerger:
    """Collects consecutive deltas of one kind; `flush` maps them as one event."""

    def __init__(self) -> None:
        self._kind: type[TextDelta] | type[ThoughtDelta] | None = None
        self._parts: list[str] = []
        self._size = 0

    def add(self, event: TextDelta | ThoughtDelta) -> list[dict[str, Any]]:
        flushed = self.flush() if type(event) is not self._kind or self._size >= REPLAY_CHUNK_CHARS else []
        self._kind = type(event)
        self._parts.append(event.text)
        self._size += len(event.text)
        return flushed

    def flush(self) -> list[dict[str, Any]]:
        if self._kind is None:
            return []
        update = to_update(self._kind("".join(self._parts)))
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


def _failure_notice(event: TurnFinished) -> dict[str, Any]:
    text = f"\n\n_[The turn failed: {event.message or 'agent error'}]_"
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}


def _no_run() -> str | None:
    return None  # typed as a run id, so the checker keeps the loop's comparison honest


async def replay_updates(
    records: AsyncIterable[Replayable],
    interrupted: Callable[[str], float | bool | None],
    *,
    rich: bool = True,
) -> AsyncIterator[dict[str, Any]]:
    """`interrupted(run_id)` is False for a run that ended normally; otherwise the time it was
    found cut off (or True when unknown). `rich`: each run's text is shown with its HAUI fences
    drawn, through the same `RichReply` as live streaming."""
    merger = _TextMerger()
    open_tools = OpenToolCalls()
    terminals = _Terminals()
    reply = RichReply(enabled=rich)
    run_id: str | None = None
    run_id = _no_run()

    def end_of_run(finished_run: str | None) -> list[dict[str, Any]]:
        updates = [update for held in reply.finish() for update in show(held)] + merger.flush()
        closing = open_tools.close_all()
        cut_off = False if finished_run is None else interrupted(finished_run)
        if finished_run is not None and cut_off is not False:
            updates += [update for event in closing if (update := to_update(event)) is not None]
            updates += interrupted_notice(finished_run, None if cut_off is True else cut_off)
        return updates

    def show(event: RuntimeEvent) -> list[dict[str, Any]]:
        if isinstance(event, TextDelta | ThoughtDelta):
            return merger.add(event)
        updates = merger.flush()
        if isinstance(event, PromptReceived):
            updates += user_message_chunks(event)
        elif isinstance(event, TurnFinished) and event.reason == "error":
            updates.append(_failure_notice(event))
        elif isinstance(event, LIVE_ONLY):
            pass
        elif isinstance(event, TerminalExited):
            shown = terminals.exited(event)
            if shown is not None and (update := to_update(shown)) is not None:
                updates.append(update)
        elif (update := to_update(terminals.rewrite(event))) is not None:
            updates.append(update)
        return updates

    async for record in records:
        open_tools.add(record.event)
        if record.run_id != run_id:
            for update in end_of_run(run_id):
                yield update
            run_id, terminals = record.run_id, _Terminals()
            reply = RichReply(enabled=rich)
        for event in reply.shown(record.event):
            for update in show(event):
                yield update
    for update in end_of_run(run_id):
        yield update
