"""Serving ACP over stdio: claim stdout, run the agent's peer with its handlers, stop cleanly.

stdin EOF and SIGTERM both stop the reading, cancel running turns, let their final frames and
responses go out, and return, so the process exits 0 within a couple of seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterable

from acp_server.acp.handlers import AcpAgent
from acp_server.rpc.dispatch import Dispatcher
from acp_server.rpc.trace import Trace, TracedWriter, traced_frames
from acp_server.rpc.wire import Frame, FrameWriter, PipeWriter, claim_stdout, read_frames

log = logging.getLogger(__name__)


async def serve(agent: AcpAgent, frames: AsyncIterable[Frame], writer: FrameWriter) -> None:
    """Serve one connection: `agent`'s handlers over its own peer, until the input ends."""
    await agent.peer.run(frames, writer, Dispatcher(agent.handlers()), on_close=agent.on_close)


async def serve_stdio(agent: AcpAgent, *, max_frame_bytes: int = 64 << 20, trace: Trace | None = None) -> None:
    """Serve stdin/stdout; with `trace`, every frame read or written is also traced."""
    wire_fd = claim_stdout()
    writer: FrameWriter = await PipeWriter.open(wire_fd)
    frames: AsyncIterable[Frame] = read_frames(0, max_frame_bytes)
    if trace is not None:
        writer, frames = TracedWriter(writer, trace), traced_frames(frames, trace)
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGTERM, agent.peer.stop)
    log.info("serving ACP on stdio with agent %s", agent.adapter.name)
    await serve(agent, frames, writer)
    log.info("input closed; exiting")
