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


async def test_a_full_buffer_blocks_the_worker_until_the_loop_catches_up():
    sink = ThreadSink(NoServices(), capacity=4)
    done = threading.Event()

    def report():
        for n in range(10):
            sink.tool_call(f"tool {n}")
        done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, report)
        with anyio.fail_after(5):
            while sink.pending < 4:
                await anyio.sleep(0.01)
        await anyio.sleep(0.1)
        assert sink.pending == 4 and not done.is_set()  # the worker waits for room
        seen = []
        while len(seen) < 10:
            seen += await sink.take()
    assert [t.title for t in seen] == [f"tool {n}" for n in range(10)]


async def test_after_cancel_every_sink_call_raises_and_a_blocked_worker_wakes():
    sink = ThreadSink(NoServices(), capacity=1)
    sink.text("fills the buffer")
    errors = []

    def blocked():
        try:
            sink.tool_call("waits for room")
        except TurnCancelled as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, blocked)
        await anyio.sleep(0.05)
        sink.cancel()
    assert len(errors) == 1
    with pytest.raises(TurnCancelled):
        sink.text("too late")
    with pytest.raises(TurnCancelled):
        sink.sleep(10)


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
