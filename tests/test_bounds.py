"""Bounded memory per connection: the peer stops reading while its output backs up, and caps
the requests in flight (waiting briefly for a place, then refusing), so cancels still get
through; a real server flooded by a client that stops reading keeps its memory flat."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
from flooding import FLOOD_REQUESTS, GROWTH_LIMIT_KB, Flood
from harness import LineWriter, limited

from acp_server.rpc import peer as peer_module
from acp_server.rpc.dispatch import Dispatcher, Handler
from acp_server.rpc.errors import REQUEST_CANCELLED
from acp_server.rpc.outbox import HIGH_WATER_BYTES
from acp_server.rpc.peer import Peer

LIMIT = 1 << 20
BIG = 256 << 10  # bytes of one answer
SESSIONS = 0


def request(request_id: int, method: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {}}).encode()


class Served:
    """A server peer over memory streams: the test writes raw lines and reads raw answers."""

    def __init__(self, peer: Peer, handlers: dict[str, Handler], *, output_buffer: float = 100) -> None:
        self.peer = peer
        self.handlers = handlers
        self.to_server, self._input = anyio.create_memory_object_stream[bytes](100)
        self._output, self.from_server = anyio.create_memory_object_stream[bytes](output_buffer)
        self.reading = anyio.Event()  # set as the server takes a frame, before it handles it
        self.frames_taken = 0

    async def _frames(self) -> AsyncIterator[Any]:
        async for frame in limited(self._input, LIMIT):
            self.frames_taken += 1
            self.reading.set()
            yield frame

    async def run(self) -> None:
        await self.peer.run(self._frames(), LineWriter(self._output), Dispatcher(self.handlers))

    async def answer(self) -> dict[str, Any]:
        return json.loads(await self.from_server.receive())


async def test_a_server_whose_answers_are_not_read_stops_reading_and_answers_everything_once_read():
    started = 0

    async def big(params: dict[str, Any]) -> str:
        nonlocal started
        started += 1
        return "x" * BIG

    served = Served(Peer(), {"big": big}, output_buffer=0)  # nobody reads the answers yet
    count = 40
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(served.run)
            for n in range(count):
                await served.to_server.send(request(n, "big"))
            await anyio.wait_all_tasks_blocked()
            # What the writer holds, what fills the queue past the high-water mark, one more.
            assert started <= HIGH_WATER_BYTES // BIG + 3 < count
            answered = sorted([(await served.answer())["id"] for _ in range(count)])
            assert answered == list(range(count))
            tg.cancel_scope.cancel()


async def test_at_the_cap_a_request_waits_for_one_in_flight_to_finish_rather_than_being_refused():
    release = anyio.Event()

    async def hold(params: dict[str, Any]) -> str:
        await release.wait()
        return "held"

    async def quick(params: dict[str, Any]) -> str:
        return "quick"

    served = Served(Peer(max_in_flight=1), {"hold": hold, "quick": quick})
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(served.run)
            await served.to_server.send(request(1, "hold"))
            await served.reading.wait()
            served.reading = anyio.Event()
            await served.to_server.send(request(2, "quick"))
            await served.reading.wait()  # taken while the first is in flight
            release.set()
            answers = {(a := await served.answer())["id"]: a for _ in range(2)}
            tg.cancel_scope.cancel()
    assert answers[1]["result"] == "held"
    assert answers[2]["result"] == "quick"


async def test_requests_still_over_the_cap_are_refused_and_a_cancel_behind_them_still_acts(monkeypatch):
    monkeypatch.setattr(peer_module, "BUSY_WAIT", 0.05)
    cancelled = anyio.Event()

    async def hold(params: dict[str, Any]) -> None:
        try:
            await anyio.Event().wait()
        finally:
            cancelled.set()

    served = Served(Peer(max_in_flight=2), {"hold": hold})
    cancel = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}}
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(served.run)
            for n in (1, 2, 3):
                await served.to_server.send(request(n, "hold"))
            first_refused = await served.answer()
            monkeypatch.setattr(peer_module, "BUSY_WAIT", 60)  # the next one is refused without a wait
            await served.to_server.send(request(4, "hold"))
            await served.to_server.send(json.dumps(cancel).encode())
            second_refused, withdrawn = await served.answer(), await served.answer()
            await cancelled.wait()
            tg.cancel_scope.cancel()
    busy = {"code": REQUEST_CANCELLED, "message": "Server busy: 2 requests are in flight on this connection"}
    assert first_refused == {"jsonrpc": "2.0", "id": 3, "error": busy}
    assert second_refused == {"jsonrpc": "2.0", "id": 4, "error": busy}
    cancelled_error = {"code": REQUEST_CANCELLED, "message": "Request cancelled"}
    assert withdrawn == {"jsonrpc": "2.0", "id": 1, "error": cancelled_error}


def test_a_server_flooded_by_a_client_that_stops_reading_keeps_its_memory_flat_and_then_answers_all(tmp_path):
    flood = Flood("--agent", "echo", "--db", str(tmp_path / "journal.db"), cwd=str(tmp_path))
    try:
        flood.prepare()
        growth, all_written = flood.hold(flood.process.pid, FLOOD_REQUESTS)
        assert growth < GROWTH_LIMIT_KB, f"RSS grew {growth} kB while the client did not read"
        assert not all_written, "the server read every request while none of its answers were read"
        flood.read_all(FLOOD_REQUESTS)
        assert flood.prompt() == {"stopReason": "end_turn"}
    finally:
        flood.kill()
