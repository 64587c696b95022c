"""The thread bridge's buffer: order kept, deltas merged only while the loop lags, bounded."""

from __future__ import annotations

import threading

import anyio
import pytest

from acp_server.turns.bridge import Finished, ThreadSink
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


async def test_deltas_reported_while_the_loop_is_busy_merge_without_reordering():
    sink = ThreadSink(NoServices())

    def report():
        for _ in range(1000):
            sink.text("a")
        sink.thought("hmm")
        sink.text("b")
        sink.tool_call("Read", kind="read")
        sink.text("c")

    await anyio.to_thread.run_sync(report)
    items = await sink.take()
    assert [type(i) for i in items] == [TextDelta, ThoughtDelta, TextDelta, ToolCallStarted, TextDelta]
    assert [getattr(i, "text", None) for i in items] == ["a" * 1000, "hmm", "b", None, "c"]


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
    sink.text("fills the buffer")
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
            sink.text("x")
            raise ValueError("broken")

    await anyio.to_thread.run_sync(sink.work, Failing(), None)
    items = await sink.take()
    assert isinstance(items[-1], Finished)
    assert isinstance(items[-1].error, ValueError)
    assert items[0] == TextDelta("x")
