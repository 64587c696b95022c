"""The peer's output over a real pipe: a frame sent while the writer is idle is written at once,
frames sent while the reader lags wait and arrive whole and in order, a reader that goes away
fails the output once without hanging its senders, and a response goes out with the
notifications its handler spawned to follow it."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import anyio
import pytest

from acp_server.rpc.dispatch import Dispatcher
from acp_server.rpc.outbox import Outbox
from acp_server.rpc.peer import Peer
from acp_server.rpc.wire import FrameWriter, PipeWriter


@asynccontextmanager
async def pipe_outbox() -> AsyncIterator[tuple[Outbox, int]]:
    """An outbox whose writer task runs on the write end of a pipe; yields it and the read end."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    writer: FrameWriter = await PipeWriter.open(write_fd)
    outbox = Outbox()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run, writer)
            await anyio.wait_all_tasks_blocked()  # the writer task waits for data
            yield outbox, read_fd
            outbox.close()
        await writer.aclose()
    finally:
        with suppress(OSError):  # a test may have closed it: the reader went away
            os.close(read_fd)


def read_available(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return b"".join(chunks)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


async def test_a_frame_sent_while_the_writer_is_idle_is_in_the_pipe_before_the_loop_turns_again():
    async with pipe_outbox() as (outbox, read_fd):
        outbox.put({"jsonrpc": "2.0", "method": "session/update", "params": {"n": 1}})
        # No await in between: neither the writer's task nor another loop iteration ran.
        assert read_available(read_fd) == b'{"jsonrpc":"2.0","method":"session/update","params":{"n":1}}\n'
        await outbox.send({"jsonrpc": "2.0", "id": 1, "result": {}})
        assert read_available(read_fd) == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'


async def test_frames_sent_while_the_reader_lags_wait_for_it_and_arrive_whole_and_in_order():
    text = "x" * 9_000
    count = 400  # 3.6 MB: past the pipe, what the writer task holds and the high-water mark
    received = bytearray()
    async with pipe_outbox() as (outbox, read_fd):
        sent = anyio.Event()

        async def send_all() -> None:
            for n in range(count):
                await outbox.send({"n": n, "text": text})
            sent.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(send_all)
            await anyio.wait_all_tasks_blocked()
            assert not sent.is_set(), "the sender did not wait for the reader"
            while received.count(b"\n") < count:
                await anyio.wait_readable(read_fd)
                received += read_available(read_fd)
    frames = [json.loads(line) for line in bytes(received).splitlines()]
    assert [frame["n"] for frame in frames] == list(range(count))
    assert all(frame["text"] == text for frame in frames)


async def test_a_reader_that_goes_away_fails_the_output_once_and_no_sender_waits(caplog):
    caplog.set_level(logging.WARNING, logger="acp_server.rpc.outbox")
    async with pipe_outbox() as (outbox, read_fd):
        await outbox.send({"n": 0})
        await anyio.wait_readable(read_fd)
        assert read_available(read_fd) == b'{"n":0}\n'
        os.close(read_fd)
        with anyio.fail_after(10):
            for n in range(1, 300):
                await outbox.send({"n": n, "text": "y" * 10_000})
    warnings = [r for r in caplog.records if "output closed by the other side" in r.getMessage()]
    assert len(warnings) == 1


@pytest.fixture(autouse=True)
def _quiet_asyncio_pipe_warnings(caplog):
    """asyncio logs each write to a closed pipe at WARNING after the fifth; not ours to test."""
    caplog.set_level(logging.ERROR, logger="asyncio")


class CountedWrites:
    """A real pipe's writer, remembering what each write (at once, or by the writer's task) held."""

    def __init__(self, inner: PipeWriter) -> None:
        self.inner = inner
        self.writes: list[bytes] = []

    async def write(self, data: bytes) -> None:
        self.writes.append(data)
        await self.inner.write(data)

    def write_now(self, data: bytes) -> bool:
        if not self.inner.write_now(data):
            return False
        self.writes.append(data)
        return True

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_response_and_the_notifications_its_handler_spawned_go_out_in_one_write():
    """A client acts on a response at once (a prompt right after session/new): what the handler
    spawned to follow it (the session's commands) must already be there, as it was before
    frames were written at once."""
    read_fd, write_fd = os.pipe()
    writer = CountedWrites(await PipeWriter.open(write_fd))  # type: ignore[arg-type]
    peer = Peer()
    send, receive = anyio.create_memory_object_stream[bytes](10)

    async def new_session(params: dict) -> dict:
        peer.spawn(lambda: peer.notify("session/update", {"sessionId": "s", "update": {"n": 1}}))
        return {"sessionId": "s"}

    async def ping(params: dict) -> dict:
        return {}

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(peer.run, receive, writer, Dispatcher({"session/new": new_session, "ping": ping}))
            await send.send(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{}}')
            await send.send(b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{}}')
            await send.aclose()
        ping_write, new_write = writer.writes
        assert ping_write == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'  # nothing follows it: written at once
        assert new_write.splitlines() == [
            b'{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s"}}',
            b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"n":1}}}',
        ]
    finally:
        os.close(read_fd)
