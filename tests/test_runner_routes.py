"""The runner's routes on their own, over real peers on in-memory streams: updates held during a
load follow its answer minus what the replay showed, even when the loading editor prompts before
the hand-over; a question goes to every editor able to answer (also one attaching while it waits),
the first answer wins and the others' copies are withdrawn; a read-only editor is never asked; a
file request goes to the prompting editor; with no editor a request fails closed."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from test_peer import start_pair

from acp_server.rpc.errors import RpcError
from acp_server.rpc.peer import Peer
from acp_server.runner.routes import Client, Routes, current_cursor, current_prompter
from acp_server.turns.client import ClientCapabilities

UPDATE = "session/update"
ASK = "session/request_permission"
READ = "fs/read_text_file"
FORM = "elicitation/create"


class Editor:
    """An editor's peer that records the updates it gets and answers questions with its name."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.peer = Peer()
        self.seen: list[int] = []
        self.asked = anyio.Event()
        self.withdrawn = anyio.Event()
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
                try:
                    await anyio.sleep_forever()
                finally:
                    self.withdrawn.set()  # its copy was withdrawn with `$/cancel_request`
            return {"by": self.name}

        return {UPDATE: update, ASK: ask, READ: ask, FORM: ask}


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
            routes.begin_load("s", Client(side))
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
            routes.begin_load("s", Client(side))
            for seq in range(5):
                await notify(routes, seq)
            routes.attach("s", Client(side))  # its session/prompt, read before the load's hand-over ran
            await notify(routes, 5)
            await routes.finish_load("s", side, {"run_1": 2})
            await editor.got.wait()
            tg.cancel_scope.cancel()
    assert editor.seen == [3, 4, 5]
    assert routes.clients("s") == [side]


async def test_a_question_goes_to_every_editor_the_first_answer_wins_and_the_other_copy_is_withdrawn():
    routes = Routes(detached_wait=10)
    first, second, watcher = Editor("silent"), Editor("second"), Editor("watcher")
    first_side, second_side, watcher_side = Peer(), Peer(), Peer()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            start_pair(tg, first_side, {}, first.peer, first.handlers())
            start_pair(tg, second_side, {}, second.peer, second.handlers())
            start_pair(tg, watcher_side, {}, watcher.peer, watcher.handlers())
            answers: list[Any] = []
            answered = anyio.Event()

            async def ask() -> None:
                answers.append(await routes.request(ASK, {"sessionId": "s"}))
                answered.set()

            tg.start_soon(ask)
            routes.attach("s", Client(watcher_side, read_only=True))  # never asked
            routes.attach("s", Client(first_side))  # the question, waiting for an editor, goes there
            await first.asked.wait()
            routes.attach("s", Client(second_side))  # and to one attaching while it waits
            await answered.wait()
            await first.withdrawn.wait()
            tg.cancel_scope.cancel()
    assert answers == [{"by": "second"}]
    assert not watcher.asked.is_set()

    with anyio.fail_after(10), pytest.raises(RpcError, match="no editor answered"):
        await Routes(detached_wait=0.01).request(ASK, {"sessionId": "s"})


async def test_a_file_request_goes_to_the_prompting_editor_or_else_to_one_that_can_read_files():
    routes = Routes(detached_wait=10)
    first, second, third = Editor("first"), Editor("second"), Editor("third")
    sides = [Peer(), Peer(), Peer()]
    reads = ClientCapabilities(read_text_file=True)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for side, editor in zip(sides, (first, second, third), strict=True):
                start_pair(tg, side, {}, editor.peer, editor.handlers())
            routes.attach("s", Client(sides[0], capabilities=lambda: reads))
            routes.attach("s", Client(sides[1], capabilities=lambda: reads))
            current_prompter.set(sides[1])
            by_prompter = await routes.request(READ, {"sessionId": "s"})
            routes.attach("s", Client(sides[2]))  # offers no file reads
            current_prompter.set(sides[2])
            by_reader = await routes.request(READ, {"sessionId": "s"})
            tg.cancel_scope.cancel()
    assert by_prompter == {"by": "second"} and by_reader == {"by": "first"}
    assert not third.asked.is_set()


async def test_a_form_goes_only_to_the_editors_that_show_forms():
    routes = Routes(detached_wait=10)
    plain, forms = Editor("plain"), Editor("forms")
    plain_side, forms_side = Peer(), Peer()
    shows_forms = ClientCapabilities(elicitation_form=True)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            start_pair(tg, plain_side, {}, plain.peer, plain.handlers())
            start_pair(tg, forms_side, {}, forms.peer, forms.handlers())
            routes.attach("s", Client(plain_side))
            routes.attach("s", Client(forms_side, capabilities=lambda: shows_forms))
            answer = await routes.request(FORM, {"sessionId": "s"})
            tg.cancel_scope.cancel()
    assert answer == {"by": "forms"}
    assert not plain.asked.is_set()


async def test_a_url_goes_only_to_the_editors_that_show_urls_and_the_first_answer_wins():
    routes = Routes(detached_wait=10)
    forms, silent, urls = Editor("forms"), Editor("silent"), Editor("urls")
    sides = [Peer(), Peer(), Peer()]
    shows_forms = ClientCapabilities(elicitation_form=True)
    shows_urls = ClientCapabilities(elicitation_form=True, elicitation_url=True)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for side, editor in zip(sides, (forms, silent, urls), strict=True):
                start_pair(tg, side, {}, editor.peer, editor.handlers())
            answers: list[Any] = []
            answered = anyio.Event()

            async def ask() -> None:
                answers.append(await routes.request(FORM, {"sessionId": "s", "mode": "url"}))
                answered.set()

            routes.attach("s", Client(sides[0], capabilities=lambda: shows_forms))  # shows no URL: never asked
            routes.attach("s", Client(sides[1], capabilities=lambda: shows_urls))
            tg.start_soon(ask)
            await silent.asked.wait()
            routes.attach("s", Client(sides[2], capabilities=lambda: shows_urls))
            await answered.wait()
            await silent.withdrawn.wait()
            tg.cancel_scope.cancel()
    assert answers == [{"by": "urls"}]
    assert not forms.asked.is_set()
