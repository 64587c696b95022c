"""Attaching to a turn still running, in memory: two fake editors on one runner hub (the real
handlers, routes and journal). A load or a resume shows the running turn from its start, then
its live rest, each update once; the resuming editor's own prompt waits behind that turn, and
each turn's events stay with its own run in the journal."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from harness import FakeEditor, running

from acp_server.acp.prompting import AgentOptions
from acp_server.protocol import methods
from acp_server.runner.hub import Hub, RunnerJournal
from adapters.events import TextDelta
from adapters.scripted import ScriptedAdapter

WORDS = [f"w{i} " for i in range(600)]
GATE = {"tool": "Edit notes", "kind": "edit", "ask": True, "input": {"path": "notes"}, "result": "edited"}
SCRIPT = {
    "scenarios": [
        {"match": "gate", "steps": [{"say": "before "}, {"think": "hm"}, GATE, {"say": "after"}]},
        {
            "match": "stream",
            "steps": [
                step
                for n, word in enumerate(WORDS)
                for step in ([{"say": word}, {"sleep": 0.002}] if n % 10 == 9 else [{"say": word}])
            ],
        },
        {"match": "", "steps": [{"say": "short reply"}]},
    ]
}


@asynccontextmanager
async def hub_serving(tmp_path, script: dict[str, Any] = SCRIPT) -> AsyncIterator[Hub]:
    """A runner's hub over a real journal, its turns' task group open until the block ends."""
    journal = await RunnerJournal.open(tmp_path / "journal.db")
    hub = Hub(adapter=ScriptedAdapter.from_data(script), options=AgentOptions(), journal=journal, detached_wait=30)
    stop = anyio.Event()
    try:
        async with anyio.create_task_group() as tasks:
            started = anyio.Event()

            async def ready() -> None:
                started.set()
                await stop.wait()

            tasks.start_soon(hub.run, ready)
            await started.wait()
            try:
                yield hub
            finally:
                await hub.stop_turns()
                stop.set()
    finally:
        await journal.close()


def params(sid: str, cwd) -> dict[str, Any]:
    return {"sessionId": sid, "cwd": str(cwd), "mcpServers": []}


def before_answer(editor: FakeEditor, request_id: Any) -> list[dict[str, Any]]:
    """The updates the editor got before the answer to `request_id`."""
    frames = editor.frames[: next(i for i, f in enumerate(editor.frames) if f.get("id") == request_id)]
    return [f["params"]["update"] for f in frames if f.get("method") == methods.SESSION_UPDATE]


def shown(updates: list[dict[str, Any]], kind: str = "agent_message_chunk") -> str:
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == kind)


def turn_of(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The updates that belong to a turn (not the commands list a reattach announces)."""
    return [u for u in updates if u["sessionUpdate"] != "available_commands_update"]


async def texts_by_run(hub: Hub, sid: str) -> list[str]:
    """Each run's agent text, as the journal keeps it."""
    texts: dict[str, str] = {run.id: "" for run in await hub.journal.runs(sid)}
    async for record in hub.journal.events(sid):
        if isinstance(record.event, TextDelta):
            texts[record.run_id] += record.event.text
    return list(texts.values())


async def asked(editor: FakeEditor) -> None:
    await editor.wait_for(lambda: any(r["method"] == methods.REQUEST_PERMISSION for r in editor.server_requests))


@pytest.mark.parametrize("method", ["session/resume", "session/load"])
async def test_attaching_mid_turn_shows_the_turn_from_its_start_then_its_live_rest_and_the_next_prompt_waits(
    tmp_path, method
):
    async with hub_serving(tmp_path) as hub, running(hub.agent()) as first:
        await first.initialize()
        sid = await first.new_session(tmp_path)
        await first.prompt(sid, "hello")
        first.never_answer(methods.REQUEST_PERMISSION)
        await first.start_prompt(sid, "gate")
        await asked(first)  # the turn waits on a question nobody here answers

        async with running(hub.agent()) as second:
            await second.initialize()
            await second.request(method, params(sid, tmp_path))
            replayed = turn_of(before_answer(second, second.last_id))
            answer = await second.prompt(sid, "next")  # asked again here, allowed; then this prompt runs
            live = turn_of(second.updates[sid])[len(replayed) :]
            by_run = await texts_by_run(hub, sid)

    history = method == "session/load"  # the earlier turn: only a load shows it
    assert [u["sessionUpdate"] for u in replayed] == [
        *(["user_message_chunk", "agent_message_chunk"] if history else []),
        *("user_message_chunk", "agent_message_chunk", "agent_thought_chunk", "tool_call"),  # the running turn
    ]
    assert shown(replayed, "user_message_chunk") == ("hello" if history else "") + "gate"
    assert shown(replayed) == ("short reply" if history else "") + "before "
    assert [u["sessionUpdate"] for u in live] == [
        *("tool_call_update", "tool_call_update", "agent_message_chunk"),  # the running turn's rest
        "session_info_update",  # its end: the first editor's turn, which only it is answered about
        "agent_message_chunk",  # then the answer to "next"
    ]
    assert shown(live) == "after" + "short reply"
    assert answer == {"stopReason": "end_turn"}
    assert by_run == ["short reply", "before after", "short reply"]  # each turn's events in its own run


@pytest.mark.parametrize("method", ["session/resume", "session/load"])
async def test_attaching_while_a_turn_streams_shows_every_update_of_it_once_in_order(tmp_path, method):
    async with hub_serving(tmp_path) as hub, running(hub.agent()) as first:
        await first.initialize()
        sid = await first.new_session(tmp_path)
        await first.start_prompt(sid, "stream")
        await first.wait_for(lambda: len(shown(first.updates[sid])) > 200)  # well under way

        async with running(hub.agent()) as second:
            await second.initialize()
            await second.request(method, params(sid, tmp_path))
            replayed = shown(before_answer(second, second.last_id))
            await second.prompt(sid, "next")  # answered once the streaming turn has ended
            everything = shown(second.updates[sid])

    assert replayed.startswith("w0 ") and len(replayed) < len("".join(WORDS))  # a start, and a live rest
    assert everything == "".join(WORDS) + "short reply"  # nothing lost, nothing twice, in order
