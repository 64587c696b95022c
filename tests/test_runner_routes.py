"""The runner's routes on their own, over real peers on in-memory streams: updates held during a
load follow its answer minus what the replay showed, even when the loading editor prompts before
the hand-over; a question waits for an owner, moves to the next one, and fails closed when none
comes."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from test_peer import start_pair

from acp_server.rpc.errors import RpcError
from acp_server.rpc.peer import Peer
from acp_server.runner.routes import Routes, current_cursor

UPDATE = "session/update"
ASK = "session/request_permission"


class Editor:
    """An editor's peer that records the updates it gets and answers questions with its name."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.peer = Peer()
        self.seen: list[int] = []
        self.asked = anyio.Event()
        self.got = anyio.Event()
        self.expect = 0

    def handlers(self) -> dict[str, Any]:
        async def update(params: dict[str, Any]) -> None:
            self.seen.append(params["update"]["n"])
            if len(self.seen) >= self.expect:
                self.got.set()

        async def ask(params: dict[str, Any]) -> dict[str, Any]:
            self.asked.set()
            if self.name == "silent":
                await anyio.sleep_forever()
            return {"by": self.name}

        return {UPDATE: update, ASK: ask}


async def notify(routes: Routes, seq: int) -> None:
    current_cursor.set(("run_1", seq))
    await routes.notify(UPDATE, {"sessionId": "s", "update": {"n": seq}})


async def test_updates_held_during_a_load_follow_it_without_those_the_replay_showed():
    routes = Routes(detached_wait=10)
    editor, side = Editor("e"), Peer()
    editor.expect = 3
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            start_pair(tg, side, {}, editor.peer, editor.handlers())
            routes.begin_load("s", side)
            for seq in range(5):
                await notify(routes, seq)  # made while the replay runs: held
            assert editor.seen == []
            await routes.finish_load("s", side, {"run_1": 2})  # the replay showed 0..2
            await notify(routes, 5)  # live from now on
            await editor.got.wait()
            tg.cancel_scope.cancel()
    assert editor.seen == [3, 4, 5]


async def test_a_prompt_from_the_editor_still_loading_keeps_the_held_updates_in_order():
    routes = Routes(detached_wait=10)
    editor, side = Editor("e"), Peer()
    editor.expect = 3
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            start_pair(tg, side, {}, editor.peer, editor.handlers())
            routes.begin_load("s", side)
            for seq in range(5):
                await notify(routes, seq)
            routes.attach("s", side)  # its session/prompt, read before the load's hand-over ran
            await notify(routes, 5)
            await routes.finish_load("s", side, {"run_1": 2})
            await editor.got.wait()
            tg.cancel_scope.cancel()
    assert editor.seen == [3, 4, 5]
    assert routes.owner("s") is side


async def test_a_question_waits_for_an_owner_moves_to_the_next_and_fails_closed_without_one():
    routes = Routes(detached_wait=10)
    first, second = Editor("silent"), Editor("second")
    first_side, second_side = Peer(), Peer()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            start_pair(tg, first_side, {}, first.peer, first.handlers())
            start_pair(tg, second_side, {}, second.peer, second.handlers())
            answers: list[Any] = []
            answered = anyio.Event()

            async def ask() -> None:
                answers.append(await routes.request(ASK, {"sessionId": "s"}))
                answered.set()

            tg.start_soon(ask)
            routes.attach("s", first_side)  # the question, waiting for an owner, goes there
            await first.asked.wait()
            routes.attach("s", second_side)  # taken over: withdrawn there, asked here
            await second.asked.wait()
            await answered.wait()
            tg.cancel_scope.cancel()
    assert answers == [{"by": "second"}]

    with anyio.fail_after(10), pytest.raises(RpcError, match="no editor answered"):
        await Routes(detached_wait=0.01).request(ASK, {"sessionId": "s"})
