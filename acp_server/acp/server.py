"""Serving ACP over stdio: claim stdout, wire the agent to a peer, stop cleanly.

stdin EOF and SIGTERM both stop the reading, cancel running turns, let their final frames and
responses go out, and return, so the process exits 0 within a couple of seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from acp_server.acp.handlers import AcpAgent
from acp_server.protocol import methods
from acp_server.rpc.dispatch import Dispatcher
from acp_server.rpc.peer import Peer
from acp_server.rpc.wire import FrameWriter, PipeWriter, claim_stdout, read_frames

log = logging.getLogger(__name__)


def connect(agent: AcpAgent, *, max_frame_bytes: int = 64 << 20) -> Peer:
    """A peer serving `agent`; `initialize` is handled in order so nothing overtakes it."""
    peer = Peer(Dispatcher(agent.handlers()), sequential=frozenset({methods.INITIALIZE}),
                max_frame_bytes=max_frame_bytes)
    agent.peer = peer
    peer.on_close = agent.on_close
    return peer


async def serve_stdio(agent: AcpAgent, *, max_frame_bytes: int = 64 << 20) -> None:
    wire_fd = claim_stdout()
    writer: FrameWriter = await PipeWriter.open(wire_fd)
    peer = connect(agent, max_frame_bytes=max_frame_bytes)
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGTERM, peer.stop)
    log.info("serving ACP on stdio with agent %s", agent.adapter.name)
    await peer.run(read_frames(0, max_frame_bytes), writer)
    log.info("input closed; exiting")
