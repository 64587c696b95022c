"""The thread bridge: a synchronous agent in a worker thread, the asyncio loop on the other side.

Reports (text, thoughts, tool calls, ...) go into a bounded buffer without a round trip: the
worker only wakes the loop when the buffer was empty, and while the loop lags behind,
consecutive text deltas merge in the buffer instead of piling up. Only the first delta of a run
waits until it is published, so the first words reach the editor at once. A stream faster than
an editor draws (DENSE deltas or more within a frame) is published once a frame: its next deltas
wait for the next frame (FRAME) and merge meanwhile, without waking the loop, so that a fast
agent's stream costs a journal commit, a frame and one wake-up per frame, not per few deltas
(each wake-up takes the GIL from an agent thread that parses); anything but a delta is taken at
once. While such a stream runs, the GIL's switch interval is a frame (`LongSlices`): the loop,
which publishes only once a frame, waits for the agent's thread to let go of the GIL (its next
read from the model) rather than forcing it out every 5 ms, several times a frame.
Asks (permission, files, commands) travel through the same buffer, so they reach the editor
after every report made before them, and the worker blocks on a future until the loop answers;
once a permission question named a tool call, later title changes of that call are dropped.
After `cancel`, every sink call raises `TurnCancelled` and nothing the worker reports reaches
the editor.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import sys
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from acp_server.turns.mapping import cancelled_mark
from adapters.base import (
    CommandResult,
    PermissionDecision,
    RuntimeAdapter,
    TurnCancelled,
    TurnInput,
)
from adapters.events import (
    CompactionChunk,
    CompactionStatus,
    CompactionUpdated,
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
    UsageReported,
)
from adapters.frozen import frozen

log = logging.getLogger(__name__)

MERGE_LIMIT = 16 * 1024
FRAME = 1 / 60  # seconds: a fast stream's deltas reach the editor at most this often (its frame rate)
DENSE = 16  # deltas taken within one frame: a stream faster than an editor draws (about 1,000/s)

T = TypeVar("T")
Stoppable = Callable[[Callable[[], object]], None]


class LongSlices:
    """The GIL's switch interval while at least one dense stream runs (`hold`, `release`): a
    frame, not Python's default 5 ms. A thread that wants the GIL waits that long before it
    forces the holder out; an agent thread that parses a fast stream lets go of it on its own
    (reading the model's socket) long before, so the loop takes it then, instead of forcing a
    handover for each of its steps (the poll, the journal's commit, the write): Hermes' parsing
    thread waits half as often (docs/performance.md). The loop publishes such a stream once a
    frame anyway; outside one (a sparse stream, asks, a turn's end) the interval is whatever it
    was. Used from the loop's thread; the lock covers servers on loops of their own."""

    def __init__(self, interval: float) -> None:
        self._interval = interval
        self._lock = threading.Lock()
        self._holders = 0
        self._saved = 0.0

    @property
    def holders(self) -> int:
        return self._holders

    def hold(self) -> None:
        with self._lock:
            if self._holders == 0:
                self._saved = sys.getswitchinterval()
                sys.setswitchinterval(max(self._saved, self._interval))
            self._holders += 1

    def release(self) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders == 0:
                sys.setswitchinterval(self._saved)


LONG_SLICES = LongSlices(FRAME)


class TurnServices(Protocol):
    """What a turn's asks need from the editor side; implemented by `acp_server.turns.services.ClientTools`."""

    async def request_permission(
        self, tool: ToolCallStarted, offered: Collection[str] | None = None
    ) -> PermissionDecision: ...
    async def read_text_file(self, path: str, line: int | None, limit: int | None) -> str: ...
    async def write_text_file(self, path: str, content: str) -> None: ...
    async def run_command(self, command: str, tool_call_id: str | None, timeout: float | None) -> CommandResult: ...
    async def clarify(self, question: str, choices: tuple[str, ...], tool_call_id: str | None) -> str: ...
    async def elicit(self, request: dict[str, Any]) -> dict[str, Any] | None: ...
    async def elicitation_complete(self, elicitation_id: str) -> None: ...


@dataclass(slots=True)
class Ask:
    """A question from the worker, answered on the loop through `future`."""

    call: Callable[[], Awaitable[Any]]
    future: concurrent.futures.Future[Any]


@frozen
class Finished:
    """The worker's last item: the adapter's return value or the exception it raised."""

    result: Any = None
    error: BaseException | None = None


@frozen
class FollowUp:
    """A turn the agent asked for once this one has ended (`Sink.follow_up`)."""

    prompt: tuple[dict[str, Any], ...]
    origin: str


Item = RuntimeEvent | Ask | Finished | FollowUp


@dataclass(slots=True)
class _Deltas:
    """Consecutive deltas of one kind waiting in the buffer, joined once when the loop takes them
    (appending a part per delta, not copying the text so far, keeps merging linear)."""

    delta: type[TextDelta] | type[ThoughtDelta]
    parts: list[str]
    size: int
    message_id: str | None = None

    def event(self) -> TextDelta | ThoughtDelta:
        return self.delta("".join(self.parts), self.message_id)


class ThreadSink:
    """The `Sink` a worker thread holds; also the loop's end of the buffer."""

    def __init__(self, services: TurnServices, *, capacity: int = 256, frame: float = FRAME) -> None:
        self._loop = asyncio.get_running_loop()
        self._services = services
        self._capacity = capacity
        self._frame = frame
        self._paced_until = 0.0  # loop time until which a run of deltas waits for more (a fast stream)
        self._frame_start = 0.0  # loop time of the first take in the current frame ...
        self._frame_deltas = 0  # ... and the deltas taken since
        self._buffer: deque[Item | _Deltas] = deque()
        self._lock = threading.Lock()
        self._not_full = threading.Condition(self._lock)
        self._parked = False  # the loop waits for a report ...
        self._paced = False  # ... and, within a fast stream's frame, for one that is not a delta
        self._wake = asyncio.Event()
        self._cancel_event = threading.Event()
        self._asks: set[concurrent.futures.Future[Any]] = set()
        self._tools: dict[str, ToolCallStarted] = {}  # each call as a permission question would show it
        self._asked: set[str] = set()  # calls a permission question was put about: their titles stay
        self._stopped: set[str] = set()  # calls whose command a client stopped, until their last update
        self._last: type[TextDelta] | type[ThoughtDelta] | None = None  # the kind of delta reported last
        self._dense = False  # a stream found dense holds LONG_SLICES until it is not, or `close`

    # --- worker side: control ------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        return self._cancel_event.is_set()

    def check_cancelled(self) -> None:
        if self._cancel_event.is_set():
            raise TurnCancelled("the turn was cancelled")

    def sleep(self, seconds: float) -> None:
        if self._cancel_event.wait(max(0.0, seconds)):
            raise TurnCancelled("the turn was cancelled")

    def _push(self, item: Item) -> None:
        with self._lock:
            while len(self._buffer) >= self._capacity and not self._cancel_event.is_set():
                self._not_full.wait()
            self.check_cancelled()
            if isinstance(item, TextDelta | ThoughtDelta):
                last = self._buffer[-1] if self._buffer else None
                if (
                    isinstance(last, _Deltas)
                    and last.delta is type(item)
                    and last.message_id == item.message_id
                    and last.size < MERGE_LIMIT
                ):
                    last.parts.append(item.text)
                    last.size += len(item.text)
                    return
                self._buffer.append(_Deltas(type(item), [item.text], len(item.text), item.message_id))
                # Within a fast stream's frame a new run waits for the frame like the deltas
                # before it, unless the run before it is full.
                urgent = not self._paced or (isinstance(last, _Deltas) and last.size >= MERGE_LIMIT)
            else:
                self._buffer.append(item)
                if not isinstance(item, Ask):
                    self._last = None  # a report between deltas: the next delta starts a new run
                urgent = True
            wake = self._parked and urgent
            if wake:
                self._parked = False
        if wake and not self._woke():
            raise TurnCancelled("the server stopped before the turn ended")

    def _ask(self, call: Callable[[], Awaitable[T]], stoppable: Stoppable | None = None) -> T:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._lock:
            self._asks.add(future)
        try:
            self._push(Ask(call, future))
            if stoppable is not None:
                stoppable(future.cancel)  # withdrawn, the loop cancels the ask too (`AskScopes.serve`)
            return future.result()
        except concurrent.futures.CancelledError:
            raise TurnCancelled("the turn was cancelled") from None
        finally:
            with self._lock:
                self._asks.discard(future)

    # --- worker side: reports ------------------------------------------------------------

    def text(self, text: str, *, message_id: str | None = None) -> None:
        if text and not self._merged(TextDelta, text, message_id):
            self._stream(TextDelta(text, message_id))

    def thought(self, text: str, *, message_id: str | None = None) -> None:
        if text and not self._merged(ThoughtDelta, text, message_id):
            self._stream(ThoughtDelta(text, message_id))

    def _merged(self, kind: type[TextDelta] | type[ThoughtDelta], text: str, message_id: str | None) -> bool:
        """A stream's hot path: `text` joined to the run of deltas of its kind still waiting in
        the buffer, without building an event (a fast agent streams tens of thousands a turn).
        False when it starts a run, or the buffer's last item is anything else: `_stream` then."""
        with self._lock:
            if self._last is not kind or not self._buffer or self._cancel_event.is_set():
                return False
            last = self._buffer[-1]
            if (
                type(last) is not _Deltas
                or last.delta is not kind
                or last.message_id != message_id
                or last.size >= MERGE_LIMIT
            ):
                return False
            last.parts.append(text)
            last.size += len(text)
            return True

    def _stream(self, delta: TextDelta | ThoughtDelta) -> None:
        """The first delta of a run of them waits until the editor has it: an agent streaming
        on a busy thread (its HTTP parser) would otherwise hold the GIL while the loop, the
        journal and the writer each wait their turn for it (about 50 ms before the first
        word); the deltas after it flow without a round trip."""
        first = self._last is not type(delta)
        self._push(delta)
        self._last = type(delta)
        if first:
            self._ask(_published)

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
        if not tool_call_id or tool_call_id in self._tools:
            tool_call_id = f"call_{os.urandom(8).hex()}"
        event = ToolCallStarted(tool_call_id, title, kind, name, raw_input, tuple(locations), extra=_dict(extra))
        self._push(event)
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
        if tool_call_id not in self._tools:
            raise ValueError(f"unknown tool call id {tool_call_id!r}: start it with tool_call()")
        if tool_call_id in self._asked:
            # What the user decided on keeps its name and input ("ls" cannot become "rm -rf ~").
            title, kind, raw_input = None, None, None
        shown = None if content is None else tuple(content)
        where = None if locations is None else tuple(locations)
        marked = _dict(extra)
        if status in ("completed", "failed") and tool_call_id in self._stopped:
            self._stopped.discard(tool_call_id)
            marked = cancelled_mark(marked)
        self._push(ToolCallUpdated(tool_call_id, status, title, shown, raw_output, where, kind, raw_input, marked))
        # A permission question shows the call as the editor last saw it: a diff included.
        self._tools[tool_call_id] = _changed(self._tools[tool_call_id], title, kind, raw_input, shown, where)
        if status == "in_progress":
            # The tool is about to run: wait until its "dispatched" record is published (and
            # journaled), so a crash can never hide a side effect that happened.
            self._ask(_published)

    def plan(
        self, entries: Sequence[PlanEntry], *, plan_id: str | None = None, extra: Mapping[str, Any] | None = None
    ) -> None:
        self._push(PlanUpdated(tuple(entries), extra=_dict(extra), plan_id=plan_id))

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
        self._push(UsageReported(input_tokens, output_tokens, cost_usd, context_used, context_size, cached_read_tokens))

    def title(self, title: str) -> None:
        self._push(TitleChanged(title))

    def save_transcript(self, format: str, messages: Sequence[Any], *, base: bool = False) -> None:
        self._push(TranscriptSaved(format, tuple(messages), base))

    def save_state(self, key: str, value: Any) -> None:
        self._push(StateSaved(key, value))

    def follow_up(self, prompt: str, *, origin: str) -> None:
        self._push(FollowUp(({"type": "text", "text": prompt},), origin))

    def compaction(
        self, compaction_id: str, status: CompactionStatus, *, summary: str | None = None, error: str | None = None
    ) -> None:
        self._push(CompactionUpdated(compaction_id, status, summary, error))

    def compaction_chunk(self, compaction_id: str, text: str) -> None:
        self._push(CompactionChunk(compaction_id, text))

    def notice(self, title: str, *, severity: NoticeSeverity = "info", description: str | None = None) -> None:
        self._push(NoticeShown(title, severity, description))

    # --- worker side: asks ---------------------------------------------------------------

    def request_permission(self, tool_call_id: str, *, offered: Collection[str] | None = None) -> PermissionDecision:
        tool = self._tools.get(tool_call_id)
        if tool is None:
            raise ValueError(f"unknown tool call id {tool_call_id!r}: start it with tool_call()")
        self._asked.add(tool_call_id)
        decision = self._ask(lambda: self._services.request_permission(tool, offered))
        if decision.cancelled:
            self.check_cancelled()
        return decision

    def read_text_file(self, path: str, *, line: int | None = None, limit: int | None = None) -> str:
        return self._ask(lambda: self._services.read_text_file(path, line, limit))

    def write_text_file(self, path: str, content: str) -> None:
        self._ask(lambda: self._services.write_text_file(path, content))

    def run_command(
        self,
        command: str,
        *,
        tool_call_id: str | None = None,
        timeout: float | None = None,
        stoppable: Stoppable | None = None,
    ) -> CommandResult:
        result: CommandResult = self._ask(lambda: self._services.run_command(command, tool_call_id, timeout), stoppable)
        if result.stopped and tool_call_id is not None:
            self._stopped.add(tool_call_id)
        return result

    def clarify(self, question: str, *, choices: Sequence[str] = (), tool_call_id: str | None = None) -> str:
        return self._ask(lambda: self._services.clarify(question, tuple(choices), tool_call_id))

    def elicit(self, request: Mapping[str, Any]) -> dict[str, Any] | None:
        return self._ask(lambda: self._services.elicit(dict(request)))

    def elicitation_complete(self, elicitation_id: str) -> None:
        self._ask(lambda: self._services.elicitation_complete(elicitation_id))

    # --- worker side: the turn itself ----------------------------------------------------

    def work(self, adapter: RuntimeAdapter, turn: TurnInput) -> None:
        """Runs in the worker thread: the whole turn, ending with exactly one `Finished`."""
        try:
            finished = Finished(result=adapter.run_turn(turn, self))
        except BaseException as exc:  # the loop decides what an exception means
            finished = Finished(error=exc)
        with self._lock:
            self._buffer.append(finished)
            wake, self._parked = self._parked, False
        if wake:
            self._woke()

    def _woke(self) -> bool:
        """Wake the loop; False when it is closed (the turn was abandoned: nobody takes it)."""
        try:
            self._loop.call_soon_threadsafe(self._wake.set)
        except RuntimeError:
            return False
        return True

    # --- loop side -----------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Items reported but not yet taken."""
        with self._lock:
            return len(self._buffer)

    async def take(self) -> list[Item]:
        """Everything the worker has queued, in order; waits while there is nothing, and while
        only deltas of a fast stream wait within a frame of the last take (more merge meanwhile)."""
        while True:
            with self._lock:
                pause = self._pause()
                if self._buffer and pause <= 0:
                    return self._take_all()
                self._wake.clear()
                self._parked = True  # a report other than a merged delta wakes the loop ...
                self._paced = pause > 0  # ... and within a fast stream's frame, only a report
            if pause <= 0:
                await self._wake.wait()
                continue
            timer = self._loop.call_later(pause, self._wake.set)
            try:
                await self._wake.wait()
            finally:
                timer.cancel()

    def _pause(self) -> float:
        """How long the loop may wait for the next frame of a stream found fast: while the buffer
        holds nothing but runs of deltas, none of them full (nothing at all, between deltas)."""
        if any(type(item) is not _Deltas or item.size >= MERGE_LIMIT for item in self._buffer):
            return 0.0
        return self._paced_until - self._loop.time()

    def _take_all(self) -> list[Item]:
        now = self._loop.time()
        if now - self._frame_start >= self._frame:
            self._frame_start, self._frame_deltas = now, 0
        self._frame_deltas += sum(len(item.parts) for item in self._buffer if isinstance(item, _Deltas))
        dense = isinstance(self._buffer[-1], _Deltas) and self._frame_deltas >= DENSE
        self._paced_until = now + self._frame if dense else 0.0
        self._held(dense)
        items = [item.event() if isinstance(item, _Deltas) else item for item in self._buffer]
        self._buffer.clear()
        self._not_full.notify_all()
        return items

    def close(self) -> None:
        """From the loop, once the turn is over (however it ended): a dense stream's hold ends."""
        self._held(False)

    def _held(self, dense: bool) -> None:
        """LONG_SLICES held while the stream is dense: taken or given back as that changes."""
        if dense != self._dense:
            self._dense = dense
            (LONG_SLICES.hold if dense else LONG_SLICES.release)()

    def cancel(self) -> None:
        """From the loop: every later sink call raises, and every pending ask is abandoned."""
        with self._lock:
            self._cancel_event.set()
            self._not_full.notify_all()
            asks = list(self._asks)
        for future in asks:
            future.cancel()


def _changed(
    tool: ToolCallStarted,
    title: str | None,
    kind: ToolKind | None,
    raw_input: Any,
    content: tuple[ToolContent, ...] | None,
    locations: tuple[ToolLocation, ...] | None,
) -> ToolCallStarted:
    """The call as the editor now shows it, after an update's fields that are not None."""
    changes: dict[str, Any] = {"title": title, "tool_kind": kind, "raw_input": raw_input}
    changes |= {"content": content, "locations": locations}
    given = {name: value for name, value in changes.items() if value is not None}
    return replace(tool, **given) if given else tool


def _dict(extra: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return dict(extra) if extra else None


async def _published() -> None:
    """An ask that answers at once: reaching it means every earlier report was published."""


def answer(ask: Ask, *, result: Any = None, error: BaseException | None = None) -> None:
    """Hand a result to the waiting worker; a no-op when the worker stopped waiting."""
    try:
        if error is not None:
            ask.future.set_exception(error)
        else:
            ask.future.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass
