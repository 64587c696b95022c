"""Follow-up turns and kept state, for any adapter, through the real server stack: a turn may ask
for one more turn of its session (`Sink.follow_up`), which runs within the open prompt as a run
of its own (its prompt journaled with its origin and shown live) unless another prompt waits, and
may keep values with the session (`Sink.save_state`), which come back in `TurnInput.state`.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from harness import FakeEditor, running

from acp_server.acp.handlers import AcpAgent
from adapters.base import Sink, TurnInput
from adapters.callable import SimpleAdapter
from adapters.events import PromptReceived, StopReason
from journal.store import Journal

ORIGIN = "count"


class Counting(SimpleAdapter):
    """Counts to the number the user's prompt ends with, one turn per number: the count is kept
    with the session, and each turn short of the target asks for the next (whose prompt looks
    like a built-in command, and still goes to the agent). `gate_at` has that count's turn wait
    for `release` (or, with `sleep`, sleep until cancelled)."""

    name = "counting"

    def __init__(self, *, gate_at: int | None = None, sleep: bool = False) -> None:
        self.gate_at, self.sleep = gate_at, sleep
        self.seen: list[TurnInput] = []
        self.cancelled: list[str] = []
        self.waiting, self.release = threading.Event(), threading.Event()

    def run_turn(self, turn: TurnInput, sink: Sink) -> StopReason:
        self.seen.append(turn)
        if turn.origin is None:
            target, count = int(turn.text.split()[-1]), 1
        else:
            target, count = turn.state["count"]["target"], turn.state["count"]["at"] + 1
        sink.text(str(count))
        sink.usage(input_tokens=10, output_tokens=1)
        sink.save_state("count", {"target": target, "at": count})
        if count == self.gate_at:
            self.waiting.set()
            if self.sleep:
                sink.sleep(30)
            else:
                self.release.wait(30)
        if count < target:
            sink.follow_up("/status", origin=ORIGIN)
        return "end_turn"

    def cancel(self, session_id: str) -> None:
        self.cancelled.append(session_id)


@asynccontextmanager
async def serving(adapter: Counting, root: Path) -> AsyncIterator[tuple[FakeEditor, Journal]]:
    async with (
        await Journal.open(root / "journal.db") as journal,
        running(AcpAgent(adapter, journal=journal)) as editor,
    ):
        await editor.initialize()
        yield editor, journal


async def runs_of(journal: Journal, sid: str) -> list[tuple[str, str | None, str]]:
    found = []
    for run in await journal.runs(sid):
        prompt = (await anext(aiter(journal.events(run_id=run.id)))).event
        assert isinstance(prompt, PromptReceived)
        found.append((run.status.value, prompt.origin, prompt.blocks[0]["text"]))
    return found


async def run_ids(journal: Journal, sid: str) -> list[str]:
    return [run.id for run in await journal.runs(sid)]


async def waiting(event: threading.Event) -> None:
    assert await anyio.to_thread.run_sync(event.wait, 10)


async def test_follow_ups_run_within_the_prompt_each_a_run_with_its_prompt_marked_and_shown(tmp_path: Path) -> None:
    adapter = Counting()
    async with serving(adapter, tmp_path) as (editor, journal):
        sid = await editor.new_session(tmp_path)
        answer = await editor.prompt(sid, "count to 3")
        assert answer == {
            "stopReason": "end_turn",
            "usage": {"inputTokens": 30, "outputTokens": 3, "totalTokens": 33},
        }
        assert editor.text(sid) == "123"
        assert await runs_of(journal, sid) == [
            ("completed", None, "count to 3"),
            ("completed", ORIGIN, "/status"),  # the agent's prompt, never taken for the built-in command
            ("completed", ORIGIN, "/status"),
        ]
        shown = [u for u in editor.updates[sid] if u["sessionUpdate"] == "user_message_chunk"]
        follow_ups = [f"{run}:0" for run in await run_ids(journal, sid)][1:]
        assert shown == [
            {
                "sessionUpdate": "user_message_chunk",
                "content": {"type": "text", "text": "/status"},
                "_meta": {"acp-server": {"origin": ORIGIN}},
                "messageId": message_id,  # each follow-up a message of its own run
            }
            for message_id in follow_ups
        ]  # the editor's own prompt it shows itself
        assert [turn.origin for turn in adapter.seen] == [None, ORIGIN, ORIGIN]


async def test_a_prompt_sent_meanwhile_goes_first_and_its_turn_decides_what_follows(tmp_path: Path) -> None:
    adapter = Counting(gate_at=1)
    async with serving(adapter, tmp_path) as (editor, journal):
        sid = await editor.new_session(tmp_path)
        first = await editor.start_prompt(sid, "count to 3")
        await waiting(adapter.waiting)
        second = await editor.start_prompt(sid, "count to 1")
        adapter.release.set()
        assert (await first)["result"]["stopReason"] == "end_turn"
        assert (await second)["result"]["stopReason"] == "end_turn"
        # the first turn's follow-up waited behind the prompt; that prompt's turn asked for none
        assert await runs_of(journal, sid) == [("completed", None, "count to 3"), ("completed", None, "count to 1")]


async def test_a_built_in_command_sent_meanwhile_goes_first_and_the_follow_up_runs_after_it(tmp_path: Path) -> None:
    adapter = Counting(gate_at=1)
    async with serving(adapter, tmp_path) as (editor, journal):
        sid = await editor.new_session(tmp_path)
        first = await editor.start_prompt(sid, "count to 2")
        await waiting(adapter.waiting)
        command = await editor.start_prompt(sid, "/help")
        adapter.release.set()
        assert (await first)["result"]["stopReason"] == "end_turn"
        assert (await command)["result"]["stopReason"] == "end_turn"
        assert await runs_of(journal, sid) == [
            ("completed", None, "count to 2"),
            ("completed", None, "/help"),  # answered by the server: the agent's follow-up still stands
            ("completed", ORIGIN, "/status"),
        ]


async def test_a_cancel_during_a_follow_up_ends_the_prompt_cancelled_and_nothing_follows(tmp_path: Path) -> None:
    adapter = Counting(gate_at=2, sleep=True)
    async with serving(adapter, tmp_path) as (editor, journal):
        sid = await editor.new_session(tmp_path)
        looping = await editor.start_prompt(sid, "count to 5")
        await waiting(adapter.waiting)
        await editor.notify("session/cancel", {"sessionId": sid})
        assert (await looping)["result"]["stopReason"] == "cancelled"
        assert adapter.cancelled == [sid]
        assert [(status, origin) for status, origin, _ in await runs_of(journal, sid)] == [
            ("completed", None),
            ("cancelled", ORIGIN),
        ]


async def test_kept_state_comes_back_in_later_turns_and_after_a_restart(tmp_path: Path) -> None:
    async with serving(Counting(), tmp_path) as (editor, _):
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "count to 2")
    restarted = Counting()
    async with serving(restarted, tmp_path) as (editor, _):
        await editor.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        await editor.prompt(sid, "count to 1")
    assert restarted.seen[0].state == {"count": {"target": 2, "at": 2}}
