"""The thread bridge's buffer: order kept, deltas merged only while the loop lags, bounded."""

from __future__ import annotations

import asyncio
import threading

import anyio
import pytest

from acp_server.turns.bridge import Ask, Finished, ThreadSink, answer
from adapters.base import TurnCancelled
from adapters.events import TextDelta, ThoughtDelta, ToolCallStarted


class NoServices:
    async def request_permission(self, tool):
        raise AssertionError("not used")

    async def read_text_file(self, path, line, limit):
        raise AssertionError("not used")

    async def write_text_file(self, path, content):
        raise AssertionError("not used")

    async def run_command(self, command, tool_call_id, timeout):
        raise AssertionError("not used")


class AskWatch:
    """Wraps a sink's `_ask` so the test knows when the worker waits for the loop to answer:
    like RoomWatch, the one sure sign that it is blocked (grey box)."""

    def __init__(self, sink: ThreadSink) -> None:
        self.asked = threading.Semaphore(0)
        self.count = 0
        original = sink._ask

        def ask(call):
            self.count += 1
            self.asked.release()
            return original(call)

        sink._ask = ask

    async def blocked(self) -> None:
        assert await anyio.to_thread.run_sync(self.asked.acquire, True, 10), "the worker should be waiting"


async def answer_ask(sink: ThreadSink) -> list:
    """The loop's part once the worker waits: take until its ask comes, answer it (as the
    supervisor does); returns the reports taken."""
    reports = []
    while True:
        for item in await sink.take():
            if not isinstance(item, Ask):
                reports.append(item)
                continue
            answer(item, result=await item.call())
            return reports


async def test_the_first_delta_of_a_run_waits_until_it_is_published_and_the_rest_flow():
    sink = ThreadSink(NoServices())
    watch = AskWatch(sink)
    done = threading.Event()

    def report():
        sink.text("a")  # the first of a run: returns once the loop has published it
        sink.text("b")
        sink.text("c")
        done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, report)
        await watch.blocked()
        assert not done.is_set()
        assert await answer_ask(sink) == [TextDelta("a")]
        assert await anyio.to_thread.run_sync(done.wait, 10)
    assert watch.count == 1, "only the first delta of the run waits"
    assert await sink.take() == [TextDelta("bc")]


async def test_deltas_reported_while_the_loop_is_busy_merge_without_reordering():
    sink = ThreadSink(NoServices())
    watch = AskWatch(sink)
    done = threading.Event()

    def report():
        for _ in range(1000):
            sink.text("a")
        sink.thought("hmm")
        sink.text("b")
        sink.tool_call("Read", kind="read")
        sink.text("c")
        done.set()

    reports = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, report)
        for _ in range(4):  # the first delta of each run waits; the loop takes only then (it lags)
            await watch.blocked()
            reports += await answer_ask(sink)
        assert await anyio.to_thread.run_sync(done.wait, 10)
    assert sink.pending == 0
    assert [type(i) for i in reports] == [TextDelta, TextDelta, ThoughtDelta, TextDelta, ToolCallStarted, TextDelta]
    assert [getattr(i, "text", None) for i in reports] == ["a", "a" * 999, "hmm", "b", None, "c"]


async def test_a_run_of_deltas_merges_only_within_one_message_and_stops_at_a_cancel():
    sink = ThreadSink(NoServices())
    watch = AskWatch(sink)
    done = threading.Event()

    def report():
        sink.text("a", message_id="m1")  # the run's first delta waits until published
        sink.text("b", message_id="m1")
        sink.text("c", message_id="m2")  # an agent below's next message: never glued to the last
        sink.text("d", message_id="m2")
        done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, report)
        await watch.blocked()
        assert await answer_ask(sink) == [TextDelta("a", "m1")]
        assert await anyio.to_thread.run_sync(done.wait, 10)
    assert await sink.take() == [TextDelta("b", "m1"), TextDelta("cd", "m2")]
    sink.text("e", message_id="m2")  # waiting in the buffer when the cancel comes
    sink.cancel()
    with pytest.raises(TurnCancelled):
        sink.text("f", message_id="m2")
    assert await sink.take() == [TextDelta("e", "m2")]
    assert watch.count == 1


class RoomWatch(threading.Condition):
    """The bridge's "room in the buffer" condition, telling the test when a worker waits on it.

    Waiting on this condition is the one sure sign that a worker is blocked; without it a test
    could only guess with a sleep, and a bridge that never blocks would pass whenever the
    worker happened to be slow.
    """

    def __init__(self, lock, waiting: threading.Event) -> None:
        super().__init__(lock)
        self.waiting = waiting

    def wait(self, timeout=None):
        self.waiting.set()
        return super().wait(timeout)


def watch_room(sink: ThreadSink, stopped: threading.Event) -> None:
    """Swap the sink's condition for a `RoomWatch` that sets `stopped` when a worker waits."""
    sink._not_full = RoomWatch(sink._lock, stopped)  # grey box: see RoomWatch


async def test_a_full_buffer_blocks_the_worker_until_the_loop_catches_up():
    sink = ThreadSink(NoServices(), capacity=4)
    stopped = threading.Event()  # the worker waits for room, or got through all of its reports
    watch_room(sink, stopped)
    returned = []

    def report():
        try:
            for n in range(10):
                sink.tool_call(f"tool {n}")
                returned.append(n)
        finally:
            stopped.set()

    seen = []
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, report)
            assert await anyio.to_thread.run_sync(stopped.wait, 10)
            assert returned == [0, 1, 2, 3], "the fifth report should wait for room"
            assert sink.pending == 4
            with anyio.fail_after(10):
                while len(seen) < 10:
                    seen += await sink.take()
    finally:
        sink.cancel()  # never leave a worker blocked behind a failed assertion
    assert [t.title for t in seen] == [f"tool {n}" for n in range(10)]
    assert returned == list(range(10))


async def test_after_cancel_every_sink_call_raises_and_a_blocked_worker_wakes():
    sink = ThreadSink(NoServices(), capacity=1)
    sink.tool_call("fills the buffer")
    waiting = threading.Event()
    watch_room(sink, waiting)
    errors = []

    def blocked():
        try:
            sink.tool_call("waits for room")
        except TurnCancelled as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, blocked)
        try:
            assert await anyio.to_thread.run_sync(waiting.wait, 10), "the worker should wait for room"
        finally:
            sink.cancel()
    assert len(errors) == 1
    with pytest.raises(TurnCancelled):
        sink.text("too late")
    with pytest.raises(TurnCancelled):
        sink.sleep(10)  # the sink's cancellable sleep under test: it raises at once after cancel


async def test_the_worker_always_ends_with_one_finished_item_carrying_the_exception():
    sink = ThreadSink(NoServices())

    class Failing:
        def run_turn(self, turn, sink):
            sink.tool_call("x")
            raise ValueError("broken")

    await anyio.to_thread.run_sync(sink.work, Failing(), None)
    items = await sink.take()
    assert isinstance(items[-1], Finished)
    assert isinstance(items[-1].error, ValueError)
    assert isinstance(items[0], ToolCallStarted)


async def fast_stream(sink: ThreadSink) -> AskWatch:
    """A run's first delta published, then 20 more taken at once: the sink paces the run from here."""
    watch = AskWatch(sink)
    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, sink.text, "a")
        await watch.blocked()
        assert await answer_ask(sink) == [TextDelta("a")]
    await anyio.to_thread.run_sync(lambda: [sink.text("b") for _ in range(20)])
    assert await sink.take() == [TextDelta("b" * 20)]  # the loop lags behind this stream
    return watch


async def test_once_a_fast_stream_piles_up_its_deltas_wait_for_the_next_frame_and_anything_else_does_not():
    sink = ThreadSink(NoServices(), frame=60.0)  # a frame longer than the test: only a wake ends it
    watch = await fast_stream(sink)

    await anyio.to_thread.run_sync(sink.text, "c")
    with anyio.move_on_after(0.5) as waited:
        await sink.take()
    assert waited.cancelled_caught, "the next delta of the fast stream waits for its frame"
    await anyio.to_thread.run_sync(sink.text, "d")
    await anyio.to_thread.run_sync(lambda: sink.tool_call("Read", kind="read"))
    with anyio.fail_after(10):
        taken = await sink.take()  # a tool call does not wait: the deltas before it come along
    assert [type(item) for item in taken] == [TextDelta, ToolCallStarted]
    assert taken[0] == TextDelta("cd")

    async with anyio.create_task_group() as tg:  # a new run, at the pace of a slow stream
        tg.start_soon(anyio.to_thread.run_sync, sink.text, "e")
        await watch.blocked()
        assert await answer_ask(sink) == [TextDelta("e")]
    await anyio.to_thread.run_sync(sink.text, "f")
    with anyio.fail_after(10):
        assert await sink.take() == [TextDelta("f")]
    sink.close()  # the turn's end (the supervisor's): its stream was dense


async def test_within_a_fast_streams_frame_its_deltas_leave_the_loop_asleep_and_a_report_wakes_it():
    """Each wake-up of the loop takes the GIL from the agent's thread (a parser, for a fast
    stream): within a frame, deltas only merge, and the frame's end or another report wakes it."""
    sink = ThreadSink(NoServices(), frame=60.0)  # a frame longer than the test
    await fast_stream(sink)

    loop = asyncio.get_running_loop()
    wakes: list[object] = []
    call_soon_threadsafe = loop.call_soon_threadsafe

    def counted(callback, *args, **kwargs):
        if callback == sink._wake.set:  # not anyio's own calls, which hand back a thread's result
            wakes.append(callback)
        return call_soon_threadsafe(callback, *args, **kwargs)

    loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
    try:
        taken: list = []
        async with anyio.create_task_group() as tg:

            async def take() -> None:
                taken.extend(await sink.take())

            tg.start_soon(take)
            await anyio.wait_all_tasks_blocked()  # the loop waits, its buffer empty
            await anyio.to_thread.run_sync(lambda: [sink.text(part) for part in "cde"])
            await anyio.wait_all_tasks_blocked()
            assert (taken, wakes) == ([], [])
            await anyio.to_thread.run_sync(lambda: sink.tool_call("Read", kind="read"))
        assert [type(item) for item in taken] == [TextDelta, ToolCallStarted]
        assert taken[0] == TextDelta("cde")
        assert len(wakes) == 1
    finally:
        del loop.call_soon_threadsafe
        sink.close()


def test_a_turn_that_ends_after_its_loop_closed_ends_quietly_and_its_reports_stop():
    """An abandoned turn's worker may outlive the server's loop (a turn that ignored a cancel):
    it must not raise in its thread at the end, and a report after the loop closed stops it."""

    async def parked_sink() -> ThreadSink:
        sink = ThreadSink(NoServices())
        with anyio.move_on_after(0.01):  # the loop waits for a report, as a running turn's does
            await sink.take()
        return sink

    sink = asyncio.run(parked_sink())  # asyncio.run closes the loop
    raised: list[BaseException | None] = []
    hook, threading.excepthook = threading.excepthook, lambda args: raised.append(args.exc_value)
    try:
        worker = threading.Thread(target=sink.work, args=(Answers(), None))
        worker.start()
        worker.join()
    finally:
        threading.excepthook = hook
    assert raised == []

    sink = asyncio.run(parked_sink())
    with pytest.raises(TurnCancelled):
        sink.tool_call("Read", kind="read")


class Answers:
    def run_turn(self, turn, sink):
        return "end_turn"
