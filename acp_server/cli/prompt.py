"""`acp-server prompt`: a real ACP client that runs one prompt against a server subprocess.

It starts `python -m acp_server` with pipes (in runner mode that process is a front, and the
turn runs in the runner), opens a session (`session/new`, or with `--session` `session/load` of a
stored one, its replay not shown), sends the prompt, shows the streamed updates (`client`), and
turns the stop reason into an exit status. Ctrl-C cancels the turn; a second one quits.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any, cast

import anyio

from acp_server.cli.client import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_STARTUP,
    STARTUP_TIMEOUT,
    Client,
    ServerAnswerError,
    checked,
    start_failure,
    stop_status,
    turn_failure,
    warn,
)
from acp_server.cli.settings import server_args
from acp_server.protocol import methods
from acp_server.protocol.answers import NewSessionAnswer, PromptAnswer
from acp_server.rpc.errors import PeerClosedError, RpcError
from acp_server.rpc.peer import Peer
from acp_server.rpc.wire import FrameWriter, PipeWriter, read_frames

if TYPE_CHECKING:
    from acp_server.cli.sessions import Found
    from journal.store import Journal

__all__ = ["EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_STARTUP", "PromptClient", "run_prompt_command"]

REAP_GRACE = 5.0  # seconds the server gets to exit after its stdin closes


def run_prompt_command(args: argparse.Namespace) -> int:
    """Run one prompt turn against a fresh server; the exit status reflects how it ended."""
    found: Found | None = None
    if getattr(args, "session", None) is not None:
        if args.cwd is not None:
            warn("error: --cwd does not go with --session: a session keeps the working directory it was made in")
            return EXIT_STARTUP
        from acp_server.cli.sessions import SessionError, session_to_continue

        try:
            found = session_to_continue(args)
            with_session_agent(args, found.session.id, found.session.launch)
        except SessionError as exc:
            warn(f"error: {exc}")
            return EXIT_STARTUP
    command = [sys.executable, "-m", "acp_server", *server_args(args)]
    try:
        # A session of its own, so a Ctrl-C at the terminal reaches only us: we cancel politely.
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        warn(f"error: cannot start the ACP server ({' '.join(command)}): {exc}")
        return EXIT_STARTUP
    try:
        return anyio.run(_converse_with, args, process, found, backend="asyncio")
    except KeyboardInterrupt:  # Ctrl-C before the signal receiver was in place
        if process.poll() is None:
            process.kill()
        return EXIT_INTERRUPTED


def with_session_agent(args: argparse.Namespace, session_id: str, launch: dict[str, Any]) -> None:
    """Continue the session with the agent and settings it was made with (kept in the journal),
    where the command line does not say otherwise; another agent named outright is refused (it
    would continue a conversation it never had). A session from before acp-server kept them
    runs as the command line says."""
    from acp_server.cli.sessions import SessionError

    agent = launch.get("agent")
    if not isinstance(agent, str):
        return
    given: set[str] = getattr(args, "flags", set())
    if ("agent" in given or args.agent_command) and args.agent != agent:
        raise SessionError(
            f"session {session_id} is continued by its own agent, {agent!r}, not {args.agent!r}: "
            "leave --agent out (or start a new session)"
        )
    args.agent = agent
    for dest in ("script", "model", "base_url"):
        if dest not in given and isinstance(launch.get(dest), str):
            setattr(args, dest, launch[dest])
    command = launch.get("command")
    if not args.agent_command and isinstance(command, list):
        args.agent_command = tuple(str(word) for word in cast(list[Any], command))


async def _converse_with(args: argparse.Namespace, process: subprocess.Popen[bytes], found: Found | None) -> int:
    if found is None or found.running is None:
        return await PromptClient(args, process, found).run()
    from journal.store import Journal, default_path

    journal = await Journal.open(args.db or default_path())  # to see the running turn end
    try:
        return await PromptClient(args, process, found, journal).run()
    finally:
        await journal.close()


class PipeLink:
    """A server subprocess's stdin and stdout; closing gives it EOF and waits for it to exit."""

    def __init__(self, process: subprocess.Popen[bytes], writer: _ClosingOnce, max_frame_bytes: int) -> None:
        assert process.stdout is not None
        self._process = process
        self.writer: FrameWriter = writer
        self._closing = writer
        self.frames = read_frames(process.stdout.fileno(), max_frame_bytes)

    @classmethod
    async def open(cls, process: subprocess.Popen[bytes], max_frame_bytes: int) -> PipeLink:
        assert process.stdin is not None
        # Our own copy of the write end, so closing it is what gives the server its EOF.
        writer = _ClosingOnce(await PipeWriter.open(os.dup(process.stdin.fileno())))
        process.stdin.close()
        return cls(process, writer, max_frame_bytes)

    async def close(self) -> None:
        await self._closing.aclose()
        try:
            await anyio.to_thread.run_sync(self._process.wait, REAP_GRACE)
        except subprocess.TimeoutExpired:
            warn(f"the ACP server did not exit within {REAP_GRACE:g} s of its input closing; killing it")
            self._process.kill()
            await anyio.to_thread.run_sync(self._process.wait)


class PromptClient(Client):
    """One server process, one session (new, or `found` loaded), one prompt. A turn still running
    in the loaded session (in the runner) is shown to its end before the prompt is sent."""

    def __init__(
        self,
        args: argparse.Namespace,
        process: subprocess.Popen[bytes],
        found: Found | None = None,
        journal: Journal | None = None,
    ) -> None:
        super().__init__(args)
        self._process = process
        self._session = found.session if found is not None else None
        self._running = found.running if found is not None else None
        self._journal = journal
        self._cwd = self._session.cwd if self._session is not None else os.path.abspath(args.cwd or os.getcwd())
        self._turn_running = False

    async def run(self) -> int:
        assert self._process.stdout is not None
        try:
            link = await PipeLink.open(self._process, self.args.max_frame_bytes)
            return await self.serve(link, self._converse)
        finally:
            self._process.stdout.close()

    async def _converse(self, peer: Peer) -> int:
        try:
            with anyio.fail_after(STARTUP_TIMEOUT):
                await self.initialize(peer)
                self.session_id = await self._open_session(peer)
        except (PeerClosedError, RpcError, TimeoutError, ValueError, ServerAnswerError) as exc:
            if self._session is not None and isinstance(exc, RpcError):
                warn(f"error: the ACP server could not load session {self._session.id}: {exc.message}")
            else:
                warn(f"error: the ACP server did not start: {start_failure(exc)}")
            return EXIT_STARTUP
        self._turn_running = True
        if self._running is not None and self._journal is not None:
            from acp_server.cli.sessions import wait_for_end

            await wait_for_end(self._journal, self._running, gone=self.closed)
            await self.caught_up(peer, self._cwd)
        try:
            result = await peer.request(
                methods.SESSION_PROMPT,
                {"sessionId": self.session_id, "prompt": [{"type": "text", "text": self.args.text}]},
            )
            stop_reason = checked(methods.SESSION_PROMPT, PromptAnswer, result).stop_reason
        except (RpcError, PeerClosedError, ServerAnswerError) as exc:
            # The peer handled every update sent before the answer (or the end) by now.
            self.display.finish()
            warn(f"error: {turn_failure(exc)}")
            return EXIT_ERROR
        finally:
            self._turn_running = False
        self.display.finish()
        return stop_status(stop_reason)

    async def _open_session(self, peer: Peer) -> str:
        if self._session is None:
            session = await peer.request(methods.SESSION_NEW, {"cwd": self._cwd, "mcpServers": []})
            return checked(methods.SESSION_NEW, NewSessionAnswer, session).session_id
        # The replay is the conversation so far, which `acp-server show` prints: not shown again.
        # In runner mode, the rest of a turn still running follows the answer, and is shown.
        self.muted = True
        try:
            await peer.request(
                methods.SESSION_LOAD, {"sessionId": self._session.id, "cwd": self._cwd, "mcpServers": []}
            )
        finally:
            self.muted = False
        return self._session.id

    async def interrupted(self, peer: Peer) -> None:
        if self._turn_running and not self.cancelling:
            self.display.finish()
            warn("cancelling the turn (press Ctrl-C again to quit at once)")
            await self.cancel_turn(peer)
        else:
            self.abort()
            if self._process.poll() is None:
                self._process.kill()


class _ClosingOnce:
    """A frame writer we may close early (EOF for the server) and the peer may close again."""

    def __init__(self, inner: FrameWriter) -> None:
        self._inner = inner
        self._closed = False

    async def write(self, data: bytes) -> None:
        if self._closed:
            raise BrokenPipeError("the server's input is closed")
        await self._inner.write(data)

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self._inner.aclose()
