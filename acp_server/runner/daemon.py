"""The runner process: ACP over a Unix domain socket, one `RunnerAgent` per connection, over one
`Hub`, and (with `--listen`, or when told to) over its remote endpoint (`runner.web`); a control
socket beside it answers `status`, `stop`, `listen`, `pair` and `revoke`.

Only the runner's own user may connect (peer credentials); the socket lives in a 0700 directory.
It exits after `idle` seconds with no connection and no live turn (never while it listens), on `stop` (after cancelling
its live turns) and on SIGTERM (likewise).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import SocketAttribute, SocketListener, SocketStream, TaskGroup

from acp_server.acp.server import serve
from acp_server.rpc.trace import Trace, TracedWriter, traced_frames
from acp_server.rpc.wire import Frame, FrameWriter, split_lines
from acp_server.runner.hub import Hub
from acp_server.runner.listen import ListenAddress
from acp_server.runner.paths import RunnerPlace, peer_uid, same_user
from acp_server.runner.routes import first_of
from acp_server.runner.tokens import TokenStore
from acp_server.runner.web import RemoteEndpoint

log = logging.getLogger(__name__)

CHUNK = 1 << 16
CONTROL_TIMEOUT = 5.0
CONTROL_BYTES = 1 << 14
BROKEN_IDLE = 5.0  # seconds a runner whose agent would not start waits for another front


class SocketFrameWriter:
    """The peer's writer over a socket; a gone reader is the OSError the peer expects."""

    def __init__(self, stream: SocketStream) -> None:
        self._stream = stream

    async def write(self, data: bytes) -> None:
        try:
            await self._stream.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise BrokenPipeError("the front closed the connection") from exc

    async def aclose(self) -> None:
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self._stream.aclose()


async def socket_frames(stream: SocketStream, max_frame_bytes: int) -> AsyncIterator[Frame]:
    feed = split_lines(max_frame_bytes)
    while True:
        try:
            chunk = await stream.receive(CHUNK)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            break
        for frame in feed(chunk):
            yield frame
    for frame in feed(b"\n"):
        if frame:
            yield frame


def allowed(stream: SocketStream) -> bool:
    raw: socket.socket = stream.extra(SocketAttribute.raw_socket)  # noqa: S610 -- anyio, not Django
    uid = peer_uid(raw)
    if same_user(uid):
        return True
    log.warning("refused a connection from uid %s (only uid %d may connect)", uid, os.getuid())
    return False


class Runner:
    """One runner: the hub, its listeners, and when to stop."""

    def __init__(
        self,
        *,
        hub: Hub,
        place: RunnerPlace,
        idle: float,
        max_frame_bytes: int,
        trace: Trace | None = None,
        listen: ListenAddress | None = None,
        broken: Callable[[], bool] = lambda: False,
    ) -> None:
        self.hub = hub
        self.listen = listen
        self.endpoint: RemoteEndpoint | None = None
        self._tasks: TaskGroup | None = None
        self.trace = trace  # every connection's frames, in one file
        self.place = place
        self.idle = idle
        self.max_frame_bytes = max_frame_bytes
        self.broken = broken  # whether the agent's last start failed
        self.started = time.time()
        self._stop = anyio.Event()

    async def run(self, announce: Callable[[], None]) -> None:
        await self.hub.run(lambda: self._listen(announce))

    async def _listen(self, announce: Callable[[], None]) -> None:
        listener = await anyio.create_unix_listener(self.place.socket, mode=0o600)
        control = await anyio.create_unix_listener(self.place.control, mode=0o600)
        ours = {path: path.stat().st_ino for path in (self.place.socket, self.place.control)}
        try:
            async with anyio.create_task_group() as tasks:
                self._tasks = tasks
                if self.listen is not None:
                    await self.start_endpoint(self.listen)
                accepting = anyio.CancelScope()
                tasks.start_soon(self._accept, listener, tasks, accepting)
                tasks.start_soon(control.serve, self._control)
                tasks.start_soon(self._on_sigterm)
                announce()
                log.info("runner %s listening on %s (pid %d)", self.place.key, self.place.socket, os.getpid())
                idle = await self._until_done()
                # Stop accepting first: a front that connected just before an idle exit is served
                # to its end (and a later one finds no runner and starts a fresh one).
                accepting.cancel()
                await listener.aclose()
                _unlink_if(self.place.socket, ours.pop(self.place.socket))
                while idle and (self.hub.connections or self.hub.live_turns) and not self._stop.is_set():
                    await first_of(self.hub.changed.wait, self._stop.wait)
                if self._stop.is_set():
                    await self.hub.stop_turns()
                tasks.cancel_scope.cancel()
        finally:
            for path, inode in ours.items():
                _unlink_if(path, inode)
            log.info("runner %s exiting", self.place.key)

    async def _until_done(self) -> bool:
        """Return on stop (False), or once idle (no connection, no live turn) for `idle` seconds."""
        hub = self.hub
        while not self._stop.is_set():
            changed = hub.changed
            if hub.connections or hub.live_turns or self.endpoint is not None:
                await first_of(changed.wait, self._stop.wait)
                continue
            # A runner whose agent would not start serves nobody: it does not wait out `idle`.
            seconds = min(self.idle, BROKEN_IDLE) if self.broken() else self.idle
            with anyio.move_on_after(seconds) as idle:
                await first_of(changed.wait, self._stop.wait)
            if idle.cancelled_caught:
                log.info("idle for %g s with no connection and no live turn", seconds)
                return True
        return False

    async def _accept(self, listener: SocketListener, tasks: TaskGroup, scope: anyio.CancelScope) -> None:
        """Accept connections into the runner's task group, each counted the moment it is accepted."""
        with scope:
            while True:
                stream = await listener.accept()
                self.hub.connections += 1
                self.hub.touch()
                tasks.start_soon(self._connection, stream)

    async def _on_sigterm(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM) as signals:
            async for _ in signals:
                self._stop.set()

    async def _connection(self, stream: SocketStream) -> None:
        if not allowed(stream):
            self.hub.connections -= 1
            self.hub.touch()
            await stream.aclose()
            return
        frames: AsyncIterator[Frame] = socket_frames(stream, self.max_frame_bytes)
        writer: FrameWriter = SocketFrameWriter(stream)
        if self.trace is not None:
            frames, writer = traced_frames(frames, self.trace), TracedWriter(writer, self.trace)
        try:
            await serve(self.hub.agent(), frames, writer)
        except Exception:
            log.exception("a connection failed")
        finally:
            self.hub.connections -= 1
            self.hub.touch()

    def status(self) -> dict[str, Any]:
        hub = self.hub
        return {
            "pid": os.getpid(),
            "key": self.place.key,
            "socket": str(self.place.socket),
            "config": self.place.config,
            "log": str(self.place.log),
            "sessions": len(hub.runtimes.all_live()),
            "agents": [runtime.adapter.name for runtime in hub.runtimes.all()],  # its own first
            "attached": hub.routes.attached(),
            "connections": hub.connections,
            "liveTurns": hub.live_turns,
            "uptime": round(time.time() - self.started, 3),
            "listen": self.endpoint.status() if self.endpoint is not None else None,
        }

    async def start_endpoint(self, address: ListenAddress) -> None:
        """Listen for remote clients at `address` (once: a second call changes nothing)."""
        if self.endpoint is not None:
            return
        assert self._tasks is not None
        endpoint = RemoteEndpoint(
            hub=self.hub,
            tokens=TokenStore(self.place.tokens),
            address=address,
            max_frame_bytes=self.max_frame_bytes,
            trace=self.trace,
        )
        await self._tasks.start(endpoint.run)
        self.endpoint = endpoint
        self.hub.touch()

    async def _answer(self, command: bytes) -> dict[str, Any] | None:
        """The answer to a control command other than `stop`; None for an unknown one."""
        word, _, rest = command.partition(b" ")
        if word == b"status":
            return self.status()
        if word == b"listen":
            try:
                await self.start_endpoint(ListenAddress.from_json(json.loads(rest)))
            except (OSError, ValueError, KeyError) as exc:
                return {"error": f"cannot listen there: {exc}"}
            return self.status()
        if word == b"pair":
            endpoint = self.endpoint
            if endpoint is None:
                return {"error": "this runner does not listen"}
            token = endpoint.tokens.mint(read_only=rest.strip() == b"read-only")
            return {"url": f"{endpoint.url}/#token={token}", "acp_url": f"{endpoint.url}/acp", "token": token}
        if word == b"revoke":
            closed = self.endpoint.revoke() if self.endpoint is not None else 0
            TokenStore(self.place.tokens).revoke()
            return {"pid": os.getpid(), "revoked": True, "closed": closed}
        return None

    async def _control(self, stream: SocketStream) -> None:
        try:
            if not allowed(stream):
                return
            with anyio.fail_after(CONTROL_TIMEOUT):
                command = (await stream.receive(CONTROL_BYTES)).strip()
            answer = await self._answer(command) if command != b"stop" else None
            if answer is not None:
                await stream.send(json.dumps(answer).encode() + b"\n")
            elif command == b"stop":
                live = self.hub.live_turns
                await self.hub.stop_turns()
                await stream.send(json.dumps({"pid": os.getpid(), "stopped": True, "cancelled": live}).encode() + b"\n")
                self._stop.set()
        except (TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError, OSError) as exc:
            log.info("control connection ended: %r", exc)
        finally:
            with contextlib.suppress(OSError, anyio.BrokenResourceError):
                await stream.aclose()


def _unlink_if(path: Path, inode: int) -> None:
    """Remove our socket file, unless a newer runner has put its own there."""
    with contextlib.suppress(OSError):
        if path.stat().st_ino == inode:
            path.unlink()
