"""Turn supervision: one turn per session at a time, a FIFO of waiting prompts, cancellation.

`TurnQueue` admits prompts in arrival order; `session/cancel` ends the running turn and every
prompt queued before it. `run_turn` drives one turn: the worker thread on one side, the pump
that numbers each event and publishes it on the other, and a grace period after which a
worker that ignores cancellation is abandoned (its thread keeps its `Workers` slot until it
returns). Cleanup sits in `finally` blocks that also run on cancellation, so a stopped turn
never wedges its session.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import Any

import anyio

from acp_server.turns.bridge import Ask, Finished, FollowUp, ThreadSink, TurnServices, answer
from acp_server.turns.mapping import OpenToolCalls
from acp_server.turns.workers import Workers
from adapters.base import AgentError, AuthRequired, RuntimeAdapter, TurnCancelled, TurnInput
from adapters.events import (
    STOP_REASONS,
    Envelope,
    PromptReceived,
    RuntimeEvent,
    StateSaved,
    TextDelta,
    TranscriptSaved,
    TurnFinished,
    UsageReported,
)
from adapters.frozen import frozen

log = logging.getLogger(__name__)

Publish = Callable[[Envelope], Awaitable[None]]


# A list the queue adds each ticket it hands out to, for whoever set it: a runner's handler learns
# the ticket of the prompt it waits for, which runs in another task.
entered: contextvars.ContextVar[list[Ticket] | None] = contextvars.ContextVar("entered", default=None)


class Ticket:
    """A prompt's place in its session's queue."""

    def __init__(self) -> None:
        self.cancelled = False
        self._ready = anyio.Event()
        self._on_cancel: Callable[[], None] | None = None

    async def wait(self) -> None:
        await self._ready.wait()

    def admit(self) -> None:
        self._ready.set()

    @property
    def waiting(self) -> bool:
        """Still in the queue: neither admitted nor cancelled."""
        return not self._ready.is_set()

    def cancel(self) -> None:
        self.cancelled = True
        self._ready.set()
        if self._on_cancel is not None:
            self._on_cancel()

    def on_cancel(self, callback: Callable[[], None]) -> None:
        self._on_cancel = callback
        if self.cancelled:
            callback()


class TurnQueue:
    def __init__(self) -> None:
        self._tickets: deque[Ticket] = deque()
        self._idle = anyio.Event()
        self._idle.set()

    async def drained(self) -> None:
        """Returns once no turn is running or waiting."""
        while self._tickets:
            await self._idle.wait()

    def enter(self) -> Ticket:
        ticket = Ticket()
        if not self._tickets:
            self._idle = anyio.Event()
        self._tickets.append(ticket)
        if len(self._tickets) == 1:
            ticket.admit()
        if (tickets := entered.get()) is not None:
            tickets.append(ticket)
        return ticket

    def leave(self, ticket: Ticket) -> None:
        was_head = bool(self._tickets) and self._tickets[0] is ticket
        self._tickets.remove(ticket)
        if was_head and self._tickets:
            self._tickets[0].admit()
        if not self._tickets:
            self._idle.set()

    def busy(self) -> bool:
        """Whether a turn runs or waits."""
        return bool(self._tickets)

    def others_waiting(self) -> bool:
        """Whether a prompt waits behind the running turn."""
        return len(self._tickets) > 1

    def cancel_all(self) -> None:
        """Cancel the running turn and every prompt waiting now; later prompts are untouched."""
        for ticket in list(self._tickets):
            ticket.cancel()


@frozen
class TurnOutcome:
    stop_reason: str
    error: str | None = None
    usage: dict[str, int] | None = None  # the turn's tokens, as the prompt response's `usage`
    follow_up: FollowUp | None = None  # the turn the agent asked for next; only after a turn that ended well
    auth_required: bool = False  # the error is the agent's demand that the user log in


class TurnTally:
    """What a turn said and spent: its reply and transcript and state saves (for the session's
    history), and token usage."""

    def __init__(self) -> None:
        self.reply: list[str] = []
        self.saves: list[TranscriptSaved | StateSaved] = []
        self._tokens: tuple[int, int] | None = None
        self._cached: int | None = None  # prompt tokens read from the provider's cache, when reported

    def add(self, event: RuntimeEvent) -> None:
        if isinstance(event, TextDelta):
            self.reply.append(event.text)
        elif isinstance(event, TranscriptSaved | StateSaved):
            self.saves.append(event)
        elif isinstance(event, UsageReported) and (event.input_tokens or event.output_tokens):
            # A report of the context window alone (an ACP agent's usage_update) spends nothing.
            spent = self._tokens or (0, 0)
            self._tokens = (spent[0] + event.input_tokens, spent[1] + event.output_tokens)
            if event.cached_read_tokens is not None:
                self._cached = (self._cached or 0) + event.cached_read_tokens

    def usage(self) -> dict[str, int] | None:
        if self._tokens is None:
            return None
        tokens_in, tokens_out = self._tokens
        usage = {"inputTokens": tokens_in, "outputTokens": tokens_out, "totalTokens": tokens_in + tokens_out}
        return usage | ({"cachedReadTokens": self._cached} if self._cached is not None else {})


class RunNumbering:
    """Numbers a run's events: seq starts at 1 and only grows."""

    def __init__(self, run_id: str, session_id: str) -> None:
        self.run_id = run_id
        self.session_id = session_id
        self.seq = 0

    def envelope(self, event: RuntimeEvent) -> Envelope:
        self.seq += 1
        return Envelope(self.run_id, self.session_id, self.seq, event, time.time())


def _withdrawn(scope: anyio.CancelScope, loop: asyncio.AbstractEventLoop, future: Any) -> None:
    """An ask the worker withdrew (a command it stopped) is cancelled on the loop too."""
    if future.cancelled():
        with contextlib.suppress(RuntimeError):  # the loop has stopped: nothing runs any more
            loop.call_soon_threadsafe(scope.cancel)


class AskScopes:
    """The cancel scopes of a turn's outstanding asks; cancelling the turn withdraws them all."""

    def __init__(self) -> None:
        self.cancelled = False
        self._scopes: set[anyio.CancelScope] = set()

    def cancel(self) -> None:
        self.cancelled = True
        for scope in self._scopes:
            scope.cancel()

    async def serve(self, ask: Ask) -> None:
        try:
            if self.cancelled:
                return
            with anyio.CancelScope() as scope:
                self._scopes.add(scope)
                ask.future.add_done_callback(partial(_withdrawn, scope, asyncio.get_running_loop()))
                try:
                    result = await ask.call()
                except Exception as exc:
                    answer(ask, error=exc)
                else:
                    answer(ask, result=result)
                finally:
                    self._scopes.discard(scope)
        finally:
            if not ask.future.done():
                ask.future.cancel()


class WorkerClaim:
    """A turn's claim on a worker thread: `start` waits for a free one and runs the turn in it;
    a claim withdrawn while it waits never starts."""

    def __init__(self, workers: Workers, work: Callable[[], object]) -> None:
        self.started = False
        self._workers = workers
        self._work = work
        self._waiting = anyio.CancelScope()

    async def start(self) -> None:
        with self._waiting:
            await self._workers.start(self._work)
            self.started = True

    def withdraw(self) -> None:
        self._waiting.cancel()


async def run_turn(
    *,
    adapter: RuntimeAdapter,
    turn: TurnInput,
    ticket: Ticket,
    services: TurnServices,
    publish: Publish,
    numbering: RunNumbering,
    workers: Workers,
    grace: float,
) -> TurnOutcome:
    sink = ThreadSink(services)
    asks = AskScopes()
    open_tools = OpenToolCalls()

    async def tracked(envelope: Envelope) -> None:
        open_tools.add(envelope.event)
        await publish(envelope)

    await publish(numbering.envelope(PromptReceived(turn.prompt, turn.origin)))
    outcome: TurnOutcome | None = None

    def stop() -> None:
        sink.cancel()
        asks.cancel()
        call_cancel_hook(adapter, turn.session_id)

    worker = WorkerClaim(workers, partial(sink.work, adapter, turn))
    try:
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as pump_scope:
                tg.start_soon(worker.start)

                def cancel() -> None:
                    stop()
                    worker.withdraw()
                    # A worker that never started has nothing to finish: the turn ends at once.
                    wait = grace if worker.started else 0
                    pump_scope.deadline = min(pump_scope.deadline, anyio.current_time() + wait)

                ticket.on_cancel(cancel)
                outcome = await _pump(sink, tracked, numbering, tg, asks)
            if outcome is None:
                if worker.started:
                    log.warning("turn of session %s ignored cancellation for %.1f s; abandoned", turn.session_id, grace)
                outcome = TurnOutcome("cancelled")
            tg.cancel_scope.cancel()  # the asks of an abandoned worker must not hold the turn open
    finally:
        sink.close()
        if outcome is None:
            stop()
        final = outcome or TurnOutcome("cancelled")
        with anyio.CancelScope(shield=True):
            for closing in open_tools.close_all(cancelled=final.stop_reason == "cancelled"):
                await publish(numbering.envelope(closing))
            await publish(numbering.envelope(TurnFinished(final.stop_reason, final.error)))
    return TurnOutcome("cancelled") if ticket.cancelled else final


async def _pump(
    sink: ThreadSink, publish: Publish, numbering: RunNumbering, tg: anyio.abc.TaskGroup, asks: AskScopes
) -> TurnOutcome | None:
    follow_up: FollowUp | None = None  # the last one the agent asked for
    while True:
        for item in await sink.take():
            if isinstance(item, Finished):
                outcome = _outcome(item, cancelled=sink.cancelled)
                ended_well = outcome.stop_reason not in ("cancelled", "error")
                return replace(outcome, follow_up=follow_up) if ended_well else outcome
            if isinstance(item, FollowUp):
                follow_up = item
            elif isinstance(item, Ask):
                tg.start_soon(asks.serve, item)
            else:
                await publish(numbering.envelope(item))


def _outcome(finished: Finished, *, cancelled: bool) -> TurnOutcome:
    if cancelled or isinstance(finished.error, TurnCancelled):
        return TurnOutcome("cancelled")
    if finished.error is not None:
        if isinstance(finished.error, AgentError):
            return TurnOutcome("error", str(finished.error), auth_required=isinstance(finished.error, AuthRequired))
        log.error("the agent raised", exc_info=finished.error)
        return TurnOutcome(
            "error", f"The agent failed ({type(finished.error).__name__}); the server log has the details"
        )
    if finished.result not in STOP_REASONS or finished.result == "cancelled":
        log.warning("the agent returned %r, not a stop reason; treating it as end_turn", finished.result)
        return TurnOutcome("end_turn")
    return TurnOutcome(finished.result)


def call_cancel_hook(adapter: RuntimeAdapter, session_id: str) -> None:
    try:
        adapter.cancel(session_id)
    except Exception:
        log.exception("the adapter's cancel hook failed")
