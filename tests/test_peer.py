"""The JSON-RPC peer on its own: two real peers over an in-memory stream pair, no sleeps."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest
from harness import LineWriter, limited

from acp_server.rpc.dispatch import Dispatcher, Handler
from acp_server.rpc.errors import PeerClosedError
from acp_server.rpc.peer import Peer
from acp_server.rpc.wire import Frame

LIMIT = 1 << 20


def streams() -> tuple[Any, Any]:
    return anyio.create_memory_object_stream[bytes](100)


async def tapped(frames: AsyncIterator[Frame], after: Callable[[bytes], None]) -> AsyncIterator[Frame]:
    """Calls `after(frame)` once the peer has finished receiving `frame` (it asks for the next)."""
    async for frame in frames:
        yield frame
        if isinstance(frame, bytes):
            after(frame)


def start_pair(
    tg: Any,
    server: Peer,
    server_handlers: dict[str, Handler],
    client: Peer,
    client_handlers: dict[str, Handler],
    *,
    client_after: Callable[[bytes], None] = lambda f: None,
) -> None:
    to_client, client_input = streams()
    to_server, server_input = streams()
    tg.start_soon(server.run, limited(server_input, LIMIT), LineWriter(to_client), Dispatcher(server_handlers))
    tg.start_soon(
        client.run,
        tapped(limited(client_input, LIMIT), client_after),
        LineWriter(to_server),
        Dispatcher(client_handlers),
    )


async def test_a_notification_sent_before_a_response_is_handled_before_the_request_returns():
    server, client = Peer(), Peer()
    order: list[str] = []
    response_read = anyio.Event()

    async def work(params: dict[str, Any]) -> dict[str, Any]:
        await server.notify("note", {})
        return {"done": True}

    async def note(params: dict[str, Any]) -> None:
        order.append("note started")
        await response_read.wait()  # the client has read the response while this still runs
        await anyio.lowlevel.checkpoint()
        order.append("note finished")

    def after(frame: bytes) -> None:
        if b'"result"' in frame:
            response_read.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            start_pair(tg, server, {"work": work}, client, {"note": note}, client_after=after)
            assert await client.request("work", {}) == {"done": True}
            order.append("response")
            tg.cancel_scope.cancel()
    assert order == ["note started", "note finished", "response"]


async def test_a_notification_handler_cannot_wait_for_a_response_but_work_it_spawns_can():
    server, client = Peer(), Peer()
    outcomes: list[Any] = []
    asked = anyio.Event()

    async def ask(params: dict[str, Any]) -> str:
        return "answered"

    async def note(params: dict[str, Any]) -> None:
        try:
            await client.request("ask", {})
        except RuntimeError as exc:
            outcomes.append(type(exc))

        async def later() -> None:
            outcomes.append(await client.request("ask", {}))
            asked.set()

        client.spawn(later)

    async def work(params: dict[str, Any]) -> None:
        await server.notify("note", {})

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            start_pair(tg, server, {"work": work, "ask": ask}, client, {"note": note})
            await client.request("work", {})
            await asked.wait()
            tg.cancel_scope.cancel()
    assert outcomes == [RuntimeError, "answered"]


async def test_a_response_read_just_before_the_input_ends_still_answers_its_request():
    client = Peer()
    to_client, client_input = streams()
    to_test, from_client = streams()
    input_ended = anyio.Event()
    results: list[Any] = []

    async def frames() -> AsyncIterator[Frame]:
        async for frame in limited(client_input, LIMIT):
            yield frame
        input_ended.set()

    async def note(params: dict[str, Any]) -> None:
        await input_ended.wait()  # still handling it when the input ends

    async def ask() -> None:
        results.append(await client.request("work", {}))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.run, frames(), LineWriter(to_test), Dispatcher({"note": note}))
            tg.start_soon(ask)
            request = json.loads(await from_client.receive())
            await to_client.send(json.dumps({"jsonrpc": "2.0", "method": "note", "params": {}}).encode())
            await to_client.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": 7}).encode())
            await to_client.aclose()
    assert results == [7]


async def test_cancel_request_acts_while_a_notification_handler_is_still_running():
    server, client = Peer(), Peer()
    release, started, cancelled = anyio.Event(), anyio.Event(), anyio.Event()

    async def note(params: dict[str, Any]) -> None:
        await release.wait()

    async def forever(params: dict[str, Any]) -> None:
        started.set()
        try:
            await anyio.Event().wait()
        finally:
            cancelled.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            start_pair(tg, server, {"note": note, "forever": forever}, client, {})
            await client.notify("note", {})
            async with anyio.create_task_group() as calls:
                calls.start_soon(client.request, "forever", {})
                await started.wait()
                calls.cancel_scope.cancel()  # the client withdraws it with $/cancel_request
            await cancelled.wait()
            assert not release.is_set()
            release.set()
            tg.cancel_scope.cancel()


async def test_spawn_on_a_closed_peer_raises_peer_closed_error():
    peer = Peer()
    raised: list[type[BaseException]] = []
    to_peer, peer_input = streams()
    to_nowhere, _nowhere = streams()

    async def on_close() -> None:
        try:
            peer.spawn(anyio.lowlevel.checkpoint)
        except PeerClosedError as exc:
            raised.append(type(exc))

    await to_peer.aclose()
    with anyio.fail_after(5):
        await peer.run(limited(peer_input, LIMIT), LineWriter(to_nowhere), Dispatcher({}), on_close=on_close)
    assert raised == [PeerClosedError]
    with pytest.raises(PeerClosedError):
        peer.spawn(anyio.lowlevel.checkpoint)
