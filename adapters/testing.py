"""Running an adapter without the server, for tests of adapters (ours and third parties').

`RecordingSink` is a thread-safe `Sink` that numbers every report as a normalized event and
answers asks from `Answers`; `start_turn` / `run_turn` run `adapter.run_turn` in a thread and
return a `TurnRecord` with exactly one terminal result. Imports nothing from `acp_server`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import field, replace
from typing import Any

from adapters.base import (
    CommandResult,
    PermissionDecision,
    RuntimeAdapter,
    ToolRefused,
    TurnCancelled,
    TurnInput,
)
from adapters.events import (
    STOP_REASONS,
    CompactionChunk,
    CompactionStatus,
    CompactionUpdated,
    Envelope,
    NoticeSeverity,
    NoticeShown,
    PlanEntry,
    PlanUpdated,
    RuntimeEvent,
    StateSaved,
    TextDelta,
    ThoughtDelta,
    TitleChanged,
    ToolCallStarted,
    ToolCallUpdated,
    ToolContent,
    ToolKind,
    ToolLocation,
    ToolStatus,
    TranscriptSaved,
    TurnFinished,
    UsageReported,
)
from adapters.frozen import frozen

TURN_TIMEOUT = 10.0  # seconds a test turn may take before it counts as hung
SESSION_ID = "sess_test"
RUN_ID = "run_test"


@frozen
class Answers:
    """How a `RecordingSink` answers asks. `permission` and `command` may be functions of the
    tool call / command line; a `clarify` of None declines the question (ToolRefused)."""

    permission: PermissionDecision | Callable[[ToolCallStarted], PermissionDecision] = field(
        default_factory=lambda: PermissionDecision(True)
    )
    files: Mapping[str, str] = field(default_factory=dict[str, str])
    command: CommandResult | Callable[[str], CommandResult] = field(default_factory=lambda: CommandResult("", 0))
    clarify: str | None = None


REJECT = Answers(permission=PermissionDecision(False, reason="Rejected by the test"))


@frozen
class Asked:
    """One ask of the turn, numbered in the same sequence as the reports around it."""

    seq: int
    method: str
    args: tuple[Any, ...]
    answer: Any = None


class RecordingSink:
    """A `Sink` that records instead of talking to an editor. `cancel()` may be called from
    any thread; after it, and after `close()`, every call raises `TurnCancelled`."""

    def __init__(self, answers: Answers | None = None, *, session_id: str = SESSION_ID, run_id: str = RUN_ID) -> None:
        self.answers = answers or Answers()
        self._ids = (run_id, session_id)
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self._closed = False
        self._seq = 0
        self._events: list[Envelope] = []
        self._asks: list[Asked] = []
        self._late: list[str] = []
        self._tools: dict[str, ToolCallStarted] = {}
        self._tool_count = 0
        self._files = dict(self.answers.files)
        self._follow_ups: list[tuple[str, str]] = []
        self.activity = threading.Event()  # set by the turn's first sink call of any kind
        self.late_call = threading.Event()  # set by a call made after close()
        self.ended = threading.Event()  # set by close()

    # --- what was recorded -----------------------------------------------------------------

    @property
    def events(self) -> tuple[Envelope, ...]:
        with self._lock:
            return tuple(self._events)

    @property
    def asks(self) -> tuple[Asked, ...]:
        with self._lock:
            return tuple(self._asks)

    @property
    def late_calls(self) -> tuple[str, ...]:
        """Sink methods called after the turn had ended."""
        with self._lock:
            return tuple(self._late)

    @property
    def follow_ups(self) -> tuple[tuple[str, str], ...]:
        """The follow-up turns asked for, as (prompt, origin), in order."""
        with self._lock:
            return tuple(self._follow_ups)

    @property
    def files(self) -> dict[str, str]:
        """The answers' files plus everything the turn wrote, by the path it gave."""
        with self._lock:
            return dict(self._files)

    # --- control -------------------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        self._cancel.set()

    def close(self) -> None:
        """The turn is over: later calls are recorded in `late_calls` and raise."""
        with self._lock:
            self._closed = True
        self.ended.set()

    def check_cancelled(self) -> None:
        self._touch("check_cancelled")

    def sleep(self, seconds: float) -> None:
        self._touch("sleep")
        if self._cancel.wait(max(0.0, seconds)):
            raise TurnCancelled("the turn was cancelled")

    def _touch(self, method: str) -> None:
        with self._lock:
            self._check_open(method)

    def _check_open(self, method: str) -> None:
        if self._closed:
            self._late.append(method)
            self.late_call.set()
            raise TurnCancelled(f"{method}() called after the turn ended")
        if self._cancel.is_set():
            raise TurnCancelled("the turn was cancelled")
        self.activity.set()  # after the check: a cancel from here on cannot drop this call's record

    def _report(self, method: str, event: RuntimeEvent) -> None:
        with self._lock:
            self._check_open(method)
            self._seq += 1
            self._events.append(Envelope(*self._ids, seq=self._seq, event=event, created_at=time.time()))

    def _asked(self, method: str, args: tuple[Any, ...], answer: Any) -> None:
        with self._lock:
            self._check_open(method)
            self._seq += 1
            self._asks.append(Asked(self._seq, method, args, answer))

    # --- reports -------------------------------------------------------------------------

    # A delta is checked and recorded in one step (`_report`): a cancel that comes once
    # `activity` is set (a test waiting for the first delta, say) cannot drop the delta that set it.

    def text(self, text: str, *, message_id: str | None = None) -> None:
        if text:  # as the server does: an empty chunk would show as an empty message
            self._report("text", TextDelta(text, message_id))
        else:
            self._touch("text")

    def thought(self, text: str, *, message_id: str | None = None) -> None:
        if text:
            self._report("thought", ThoughtDelta(text, message_id))
        else:
            self._touch("thought")

    def tool_call(
        self,
        title: str,
        *,
        kind: ToolKind = "other",
        name: str | None = None,
        raw_input: Any = None,
        locations: Sequence[ToolLocation] = (),
        tool_call_id: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> str:
        with self._lock:
            self._tool_count += 1
            if not tool_call_id or tool_call_id in self._tools:
                tool_call_id = f"call_{self._tool_count}"
        event = ToolCallStarted(tool_call_id, title, kind, name, raw_input, tuple(locations), extra=extra or None)
        self._report("tool_call", event)
        with self._lock:
            self._tools[tool_call_id] = event
        return tool_call_id

    def tool_update(
        self,
        tool_call_id: str,
        *,
        status: ToolStatus | None = None,
        title: str | None = None,
        content: Sequence[ToolContent] | None = None,
        raw_output: Any = None,
        kind: ToolKind | None = None,
        raw_input: Any = None,
        locations: Sequence[ToolLocation] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self._known(tool_call_id)
        frozen = None if content is None else tuple(content)
        where = None if locations is None else tuple(locations)
        update = ToolCallUpdated(tool_call_id, status, title, frozen, raw_output, where, kind, raw_input, extra or None)
        self._report("tool_update", update)
        if kind is not None or raw_input is not None:
            with self._lock:
                tool = self._tools[tool_call_id]
                self._tools[tool_call_id] = replace(
                    tool, tool_kind=kind or tool.tool_kind, raw_input=tool.raw_input if raw_input is None else raw_input
                )

    def plan(
        self, entries: Sequence[PlanEntry], *, plan_id: str | None = None, extra: Mapping[str, Any] | None = None
    ) -> None:
        self._report("plan", PlanUpdated(tuple(entries), extra=extra or None, plan_id=plan_id))

    def usage(
        self,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_usd: float | None = None,
        context_used: int | None = None,
        context_size: int | None = None,
        cached_read_tokens: int | None = None,
    ) -> None:
        event = UsageReported(input_tokens, output_tokens, cost_usd, context_used, context_size, cached_read_tokens)
        self._report("usage", event)

    def title(self, title: str) -> None:
        self._report("title", TitleChanged(title))

    def save_transcript(self, format: str, messages: Sequence[Any], *, base: bool = False) -> None:
        self._report("save_transcript", TranscriptSaved(format, tuple(messages), base))

    def save_state(self, key: str, value: Any) -> None:
        self._report("save_state", StateSaved(key, value))

    def follow_up(self, prompt: str, *, origin: str) -> None:
        with self._lock:
            self._check_open("follow_up")
            self._follow_ups.append((prompt, origin))

    def compaction(
        self, compaction_id: str, status: CompactionStatus, *, summary: str | None = None, error: str | None = None
    ) -> None:
        self._report("compaction", CompactionUpdated(compaction_id, status, summary, error))

    def compaction_chunk(self, compaction_id: str, text: str) -> None:
        self._report("compaction_chunk", CompactionChunk(compaction_id, text))

    def notice(self, title: str, *, severity: NoticeSeverity = "info", description: str | None = None) -> None:
        self._report("notice", NoticeShown(title, severity, description))

    # --- asks ----------------------------------------------------------------------------

    def request_permission(self, tool_call_id: str, *, offered: Collection[str] | None = None) -> PermissionDecision:
        tool = self._known(tool_call_id)
        answer = self.answers.permission
        decision = answer(tool) if callable(answer) else answer
        self._asked("request_permission", (tool_call_id,), decision)
        if decision.cancelled:
            self.check_cancelled()
        return decision

    def read_text_file(self, path: str, *, line: int | None = None, limit: int | None = None) -> str:
        with self._lock:
            text = self._files.get(path)
        self._asked("read_text_file", (path, line, limit), text)
        if text is None:
            raise ToolRefused(f"No such file: {path}")
        lines = text.splitlines(keepends=True)
        start = max((line or 1) - 1, 0)
        return "".join(lines[start:] if limit is None else lines[start : start + limit])

    def write_text_file(self, path: str, content: str) -> None:
        with self._lock:
            old = self._files.get(path)
        self._asked("write_text_file", (path, content), old)
        with self._lock:
            self._files[path] = content

    def run_command(
        self,
        command: str,
        *,
        tool_call_id: str | None = None,
        timeout: float | None = None,
        stoppable: Callable[[Callable[[], object]], None] | None = None,
    ) -> CommandResult:
        answer = self.answers.command
        result = answer(command) if callable(answer) else answer
        self._asked("run_command", (command, tool_call_id, timeout), result)
        return result

    def clarify(self, question: str, *, choices: Sequence[str] = (), tool_call_id: str | None = None) -> str:
        self._asked("clarify", (question, tuple(choices), tool_call_id), self.answers.clarify)
        if self.answers.clarify is None:
            raise ToolRefused("The question was declined")
        return self.answers.clarify

    def elicit(self, request: Mapping[str, Any]) -> dict[str, Any] | None:
        self._asked("elicit", (dict(request),), None)
        return None  # shows no elicitation: the agent's own way of asking is used

    def elicitation_complete(self, elicitation_id: str) -> None:
        self._asked("elicitation_complete", (elicitation_id,), None)

    def _known(self, tool_call_id: str) -> ToolCallStarted:
        with self._lock:
            tool = self._tools.get(tool_call_id)
        if tool is None:
            raise ValueError(f"unknown tool call id {tool_call_id!r}: start it with tool_call()")
        return tool


@frozen
class TurnRecord:
    """One finished turn: the adapter's reports and asks, and its one terminal result."""

    events: tuple[Envelope, ...]
    asks: tuple[Asked, ...]
    finished: TurnFinished  # reason: a stop reason, or "failed"
    error: BaseException | None = None
    returned: Any = None
    cancel_latency: float | None = None  # seconds from cancel() to the end of run_turn

    @property
    def reason(self) -> str:
        return self.finished.reason

    @property
    def text(self) -> str:
        return "".join(e.event.text for e in self.events if isinstance(e.event, TextDelta))

    def of_kind(self, kind: type[Any]) -> list[Any]:
        return [e.event for e in self.events if isinstance(e.event, kind)]


class RunningTurn:
    """A turn running in its own daemon thread (a hung adapter cannot block the test run)."""

    def __init__(self, adapter: RuntimeAdapter, turn: TurnInput, sink: RecordingSink) -> None:
        self.adapter, self.turn, self.sink = adapter, turn, sink
        self._done = threading.Event()
        self._returned: Any = None
        self._error: BaseException | None = None
        self._cancelled_at: float | None = None
        self._ended_at = 0.0
        self._ended_cancelled = False
        self._thread = threading.Thread(target=self._work, name=f"turn-{adapter.name}", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        try:
            self._returned = self.adapter.run_turn(self.turn, self.sink)
        except BaseException as exc:  # the record decides what an exception means
            self._error = exc
        finally:
            self._ended_at = time.monotonic()
            self._ended_cancelled = self.sink.cancelled
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def cancel(self) -> None:
        """What the server does on session/cancel: cancel the sink, then the adapter's hook."""
        self._cancelled_at = time.monotonic()
        self.sink.cancel()
        self.adapter.cancel(self.turn.session_id)

    def wait(self, timeout: float = TURN_TIMEOUT) -> TurnRecord:
        """The record once run_turn has ended; TimeoutError (after a cancel) if it hangs."""
        if not self._done.wait(timeout):
            self.sink.cancel()
            raise TimeoutError(f"{self.adapter.name}: run_turn did not end within {timeout:g} s")
        self.sink.close()
        latency = None if self._cancelled_at is None else max(0.0, self._ended_at - self._cancelled_at)
        return TurnRecord(self.sink.events, self.sink.asks, self._finished(), self._error, self._returned, latency)

    def _finished(self) -> TurnFinished:
        # The same rules as the server's turn supervisor.
        if self._ended_cancelled or isinstance(self._error, TurnCancelled):
            return TurnFinished("cancelled")
        if self._error is not None:
            return TurnFinished("failed", f"{type(self._error).__name__}: {self._error}")
        if not isinstance(self._returned, str) or self._returned not in STOP_REASONS - {"cancelled"}:
            return TurnFinished("failed", f"run_turn returned {self._returned!r}, which is not a stop reason")
        return TurnFinished(self._returned)


class RecordingNotes:
    """SessionNotes that keep what the agent told them, for tests of what comes after a turn."""

    def __init__(self) -> None:
        self.titles: list[str] = []
        self._told = threading.Event()

    def title(self, title: str) -> None:
        self.titles.append(title)
        self._told.set()

    def wait_title(self, timeout: float) -> str:
        """The first title told; TimeoutError if none comes within `timeout` seconds."""
        if not self._told.wait(timeout):
            raise TimeoutError(f"no title within {timeout:g} s")
        return self.titles[0]


def turn_input(prompt: str | TurnInput, **fields: Any) -> TurnInput:
    """A TurnInput from prompt text; `fields` override session_id, cwd, history, mode, config."""
    if isinstance(prompt, TurnInput):
        return prompt
    fields.setdefault("session_id", SESSION_ID)
    fields.setdefault("cwd", os.getcwd())
    return TurnInput(prompt=({"type": "text", "text": prompt},), **fields)


def start_turn(
    adapter: RuntimeAdapter, prompt: str | TurnInput, *, sink: RecordingSink | None = None, **fields: Any
) -> RunningTurn:
    turn = turn_input(prompt, **fields)
    return RunningTurn(adapter, turn, sink or RecordingSink(session_id=turn.session_id))


def run_turn(
    adapter: RuntimeAdapter,
    prompt: str | TurnInput,
    *,
    sink: RecordingSink | None = None,
    timeout: float = TURN_TIMEOUT,
    **fields: Any,
) -> TurnRecord:
    """Run one whole turn in a thread and return its record."""
    return start_turn(adapter, prompt, sink=sink, **fields).wait(timeout)
