"""Adapters hear when a session is created, loaded or resumed (`open_session`), in a worker
thread and without delaying the answer, so they can get ready before the first prompt."""

from __future__ import annotations

import threading

import anyio
from harness import running

from acp_server.acp.handlers import AcpAgent
from adapters.base import TurnInput
from adapters.callable import SimpleAdapter
from journal.store import Journal


class Opening(SimpleAdapter):
    name = "opening"

    def __init__(self) -> None:
        self.opened: list[TurnInput] = []
        self.changed = threading.Condition()
        self.release = threading.Event()

    def open_session(self, ready: TurnInput) -> None:
        with self.changed:
            self.opened.append(ready)
            self.changed.notify_all()
        self.release.wait(10)  # a slow preparation must not hold the session/new answer

    def run_turn(self, turn, sink):
        sink.text("ok")
        return "end_turn"

    def wait_for(self, count: int) -> list[TurnInput]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.opened) >= count, 5)
            return list(self.opened)


async def test_new_load_and_resume_open_the_session_with_its_settings_without_waiting_for_it(tmp_path):
    adapter = Opening()
    extra = tmp_path / "extra"
    extra.mkdir()
    journal = await Journal.open(tmp_path / "journal.db")
    try:
        async with running(AcpAgent(adapter, journal=journal)) as editor:
            await editor.initialize()
            params = {"cwd": str(tmp_path), "mcpServers": [], "additionalDirectories": [str(extra)]}
            sid = (await editor.request("session/new", params))["sessionId"]  # answered while the hook waits
            (ready,) = await anyio.to_thread.run_sync(adapter.wait_for, 1)
            assert (ready.session_id, ready.cwd, ready.prompt) == (sid, str(tmp_path), ())
            assert ready.additional_directories == (str(extra),)
            for method in ("session/load", "session/resume"):
                await editor.request(method, {"sessionId": sid, **params})
            opened = await anyio.to_thread.run_sync(adapter.wait_for, 3)
            assert [r.session_id for r in opened] == [sid, sid, sid]
            adapter.release.set()
            assert await editor.prompt(sid, "go") == {"stopReason": "end_turn"}
    finally:
        adapter.release.set()
        await journal.close()
