"""While an agent's thread streams faster than an editor draws, the GIL's switch interval is a
frame (`bridge.LongSlices`), so the loop stops forcing a parsing agent thread out every 5 ms;
before and after such a stream, and beside a slow one, it is what it was."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator

import anyio
import pytest
from harness import running

from acp_server.acp.handlers import AcpAgent, AgentOptions
from acp_server.turns.bridge import FRAME, LongSlices
from adapters.base import AdapterCapabilities

DEFAULT = 0.005  # Python's own switch interval
STREAM_FOR = 10.0  # seconds a stream goes on at most, waiting to be found dense
RAISED = round(FRAME, 5)


def interval() -> float:
    """The switch interval (Python keeps it in microseconds: 1/60 s reads 0.016666)."""
    return round(sys.getswitchinterval(), 5)


@pytest.fixture(autouse=True)
def default_interval() -> Iterator[None]:
    saved = sys.getswitchinterval()
    sys.setswitchinterval(DEFAULT)
    yield  # conftest checks that no stream held on (`LONG_SLICES.holders`)
    sys.setswitchinterval(saved)


class Streaming:
    """A "fast" turn streams one-character deltas until its own thread sees the interval raised
    (a dense stream, found by the loop) and notes what it saw; "slow" sends a few deltas, each
    behind a tool call, and notes the interval after each; "deaf" then waits for `release`
    without a word more, deaf to a cancel."""

    name = "streaming"

    def __init__(self) -> None:
        self.seen: list[float] = []
        self.streaming = threading.Event()
        self.release = threading.Event()

    def capabilities(self) -> AdapterCapabilities:
        return AdapterCapabilities()

    def run_turn(self, turn, sink):
        if turn.text == "slow":
            for index in range(5):
                sink.tool_call(f"step {index}", kind="other")
                sink.text("word ")
                self.seen.append(interval())
            return "end_turn"
        deadline = time.monotonic() + STREAM_FOR
        while interval() == DEFAULT and time.monotonic() < deadline:
            sink.text("x")
        self.seen.append(interval())
        if turn.text == "deaf":
            self.streaming.set()
            self.release.wait(STREAM_FOR)  # deaf to the cancel: the turn is abandoned mid-stream
        return "end_turn"

    def cancel(self, session_id: str) -> None:
        pass


async def test_a_fast_stream_holds_the_gil_a_frame_at_a_time_until_its_turn_ends_or_is_abandoned(tmp_path):
    adapter = Streaming()
    async with running(AcpAgent(adapter, AgentOptions(cancel_grace=0.05))) as editor:
        await editor.initialize()
        session = await editor.new_session(tmp_path)

        assert await editor.prompt(session, "slow") == {"stopReason": "end_turn"}
        assert adapter.seen == [DEFAULT] * 5, "a stream an editor keeps up with leaves the interval alone"

        adapter.seen.clear()
        assert await editor.prompt(session, "fast") == {"stopReason": "end_turn"}
        assert adapter.seen == [RAISED]
        assert interval() == DEFAULT

        adapter.seen.clear()
        turn = await editor.start_prompt(session, "deaf")
        try:
            assert await anyio.to_thread.run_sync(adapter.streaming.wait, STREAM_FOR)
            assert adapter.seen == [RAISED]
            await editor.notify("session/cancel", {"sessionId": session})
            assert (await turn)["result"] == {"stopReason": "cancelled"}
            assert interval() == DEFAULT, "an abandoned turn's stream still held the GIL"
        finally:
            adapter.release.set()


def test_the_interval_stays_long_until_the_last_stream_ends_and_never_shortens():
    slices = LongSlices(FRAME)
    slices.hold()
    slices.hold()  # two sessions stream at once
    slices.release()
    assert interval() == RAISED
    slices.release()
    assert interval() == DEFAULT

    sys.setswitchinterval(0.05)  # set longer by whoever embeds the server: kept
    slices.hold()
    assert interval() == 0.05
    slices.release()
    assert interval() == 0.05
