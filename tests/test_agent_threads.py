"""`--max-workers` bounds the agent threads really running: a turn that ignores cancel is answered
`cancelled` in time, but its thread keeps its place until it returns, and later turns wait."""

from __future__ import annotations

import asyncio
import logging
import threading

import anyio
from harness import running

from acp_server.acp.handlers import AcpAgent, AgentOptions
from adapters.base import AdapterCapabilities

HOLD = 30.0  # seconds a held turn waits at most, should the test fail before releasing it


class HoldingAdapter:
    """A "hold" turn waits for `release` without asking its sink, so a cancel goes unheard; any
    other turn returns at once. Counts the turns running at once, and tells the loop when two
    turns hold (`held`) and when a turn of another text starts (`entered`)."""

    name = "holding"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.held = anyio.Event()
        self.entered = anyio.Event()
        self.loop = asyncio.get_running_loop()
        self.lock = threading.Lock()
        self.active = 0
        self.most = 0
        self.holding = 0

    def capabilities(self) -> AdapterCapabilities:
        return AdapterCapabilities()

    def run_turn(self, turn, sink):
        with self.lock:
            self.active += 1
            self.most = max(self.most, self.active)
            self.holding += turn.text == "hold"
            if self.holding == 2:
                self.loop.call_soon_threadsafe(self.held.set)
        try:
            if turn.text == "hold":
                self.release.wait(HOLD)
            else:
                self.loop.call_soon_threadsafe(self.entered.set)
        finally:
            with self.lock:
                self.active -= 1
        return "end_turn"

    def cancel(self, session_id: str) -> None:
        pass


class WaitSeen(logging.Handler):
    """Sets `event` when the server logs that a turn waits for a free agent thread."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.event = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "a turn waits for one" in record.getMessage():
            self.event.set()


async def first(*events: anyio.Event) -> None:
    async with anyio.create_task_group() as tg:

        async def one(event: anyio.Event) -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        for event in events:
            tg.start_soon(one, event)


async def test_turns_that_ignore_cancel_keep_their_threads_and_later_turns_wait_for_a_free_one(tmp_path):
    adapter = HoldingAdapter()
    seen = WaitSeen()
    logger = logging.getLogger("acp_server.turns.workers")
    logger.addHandler(seen)
    logger.setLevel(logging.INFO)
    try:
        async with running(AcpAgent(adapter, AgentOptions(max_workers=2, cancel_grace=0.05))) as editor:
            await editor.initialize()
            held = [await editor.new_session(tmp_path) for _ in range(2)]
            later, cancelled_while_waiting = await editor.new_session(tmp_path), await editor.new_session(tmp_path)
            try:
                turns = [await editor.start_prompt(sid, "hold") for sid in held]
                await adapter.held.wait()
                for sid in held:
                    await editor.notify("session/cancel", {"sessionId": sid})
                for turn in turns:
                    assert (await turn)["result"] == {"stopReason": "cancelled"}
                assert adapter.active == 2  # answered while both threads still run

                waiting = await editor.start_prompt(cancelled_while_waiting, "quick")
                await first(seen.event, adapter.entered)
                assert not adapter.entered.is_set(), "a third agent thread started beside the two held ones"
                await editor.notify("session/cancel", {"sessionId": cancelled_while_waiting})
                assert (await waiting)["result"] == {"stopReason": "cancelled"}  # it never needed a thread

                third = await editor.start_prompt(later, "quick")
            finally:
                adapter.release.set()
            assert (await third)["result"] == {"stopReason": "end_turn"}
    finally:
        logger.removeHandler(seen)
        logger.setLevel(logging.NOTSET)
    assert adapter.most == 2
