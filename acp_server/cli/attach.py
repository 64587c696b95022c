"""`acp-server attach SESSION`: a session's running turn, live, until it ends.

When the turn runs in one of this user's runners (runner mode), the command connects to that
runner's socket as an editor would and resumes the session: the runner shows the turn from its
start, then its rest live, and asks this terminal the questions the turn has open (the session is
taken over from the editor that had it, as a second editor's load would). Otherwise (the turn runs
in another acp-server, an editor's), it follows the journal, read-only: the turn's events so far,
then each one as it is committed. The turn's end is read from the journal either way; the exit
status is `prompt`'s. Ctrl-C stops watching and leaves the turn running.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import SocketStream

from acp_server.cli.client import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_STARTUP,
    STARTUP_TIMEOUT,
    STOP_REASONS,
    Client,
    ServerAnswerError,
    start_failure,
    stop_status,
    warn,
)
from acp_server.cli.display import Display
from acp_server.cli.sessions import POLL, RECOVER_EVERY, Found, SessionError, find, runner_of, wait_for_end
from acp_server.protocol import methods
from acp_server.rpc.errors import PeerClosedError, RpcError
from acp_server.rpc.peer import Peer
from acp_server.rpc.wire import FrameWriter
from acp_server.runner.daemon import SocketFrameWriter, socket_frames
from acp_server.turns.replay import RunReplay
from acp_server.turns.rich import haui_on

if TYPE_CHECKING:
    from journal.records import RunRecord
    from journal.store import Journal

EXIT_NOTHING = 1  # no turn is running in the session (or no such session)


def run_attach_command(args: argparse.Namespace) -> int:
    try:
        found = anyio.run(find, args)
    except SessionError as exc:
        warn(f"error: {exc}")
        return EXIT_NOTHING
    session, run = found.session, found.running
    if run is None:
        warn(f"no turn is running in session {session.id}; acp-server show {session.id} prints the conversation")
        return EXIT_NOTHING
    runner = runner_of(run.owner_pid)
    try:
        if runner is not None:
            return anyio.run(_through_runner, args, found, str(runner["socket"]), backend="asyncio")
        return anyio.run(_follow, args, found, run)
    except KeyboardInterrupt:
        _detached(session.id)
        return EXIT_INTERRUPTED


def _detached(session_id: str) -> None:
    warn(f"stopped watching; the turn goes on (acp-server attach {session_id} shows it again)")


# --- through the runner ----------------------------------------------------------------------


class SocketLink:
    """A connection to a runner's socket, as a front has; closing it detaches the session."""

    def __init__(self, stream: SocketStream, max_frame_bytes: int) -> None:
        self.frames = socket_frames(stream, max_frame_bytes)
        self.writer: FrameWriter = SocketFrameWriter(stream)

    async def close(self) -> None:
        await self.writer.aclose()


async def _through_runner(args: argparse.Namespace, found: Found, path: str) -> int:
    from journal.store import Journal, default_path

    journal = await Journal.open(args.db or default_path())
    try:
        try:
            stream = await anyio.connect_unix(path)
        except OSError as exc:
            warn(f"error: the runner at {path} does not answer: {exc.strerror or exc}")
            return EXIT_STARTUP
        return await RunnerAttach(args, found, journal).attach(SocketLink(stream, args.max_frame_bytes))
    finally:
        await journal.close()


class RunnerAttach(Client):
    """Resumes the session in its runner and shows what the runner sends until the run ends."""

    def __init__(self, args: argparse.Namespace, found: Found, journal: Journal) -> None:
        super().__init__(args)
        self._found = found
        self._journal = journal
        self._detached = False

    async def attach(self, link: SocketLink) -> int:
        status = await self.serve(link, self._converse)
        if self._detached:
            _detached(self._found.session.id)
        return status

    async def _converse(self, peer: Peer) -> int:
        session, run = self._found.session, self._found.running
        assert run is not None
        try:
            with anyio.fail_after(STARTUP_TIMEOUT):
                await self.initialize(peer)
                # The turn from its start, then (after the answer) its rest live, each update once.
                params: dict[str, Any] = {"sessionId": session.id, "cwd": session.cwd, "mcpServers": []}
                await peer.request(methods.SESSION_RESUME, params)
        except (PeerClosedError, RpcError, TimeoutError, ValueError, ServerAnswerError) as exc:
            warn(f"error: the runner did not attach session {session.id}: {start_failure(exc)}")
            return EXIT_STARTUP
        self.session_id = session.id
        ended = await wait_for_end(self._journal, run, gone=self.closed)
        await self.caught_up(peer, session.cwd)
        return outcome(ended)

    async def interrupted(self, peer: Peer) -> None:
        self._detached = True
        self.abort()


# --- following the journal -------------------------------------------------------------------


async def _follow(args: argparse.Namespace, found: Found, run: RunRecord) -> int:
    from journal.store import Journal, default_path

    session = found.session
    warn(f"following the turn of session {session.id} in process {run.owner_pid} (its questions go to its editor)")
    journal = await Journal.open(args.db or default_path())
    display = Display(sys.stdout, raw=args.json, color=sys.stdout.isatty())

    def show(updates: list[dict[str, Any]]) -> None:
        for update in updates:
            display.show({"sessionId": session.id, "update": update})

    try:
        replay = RunReplay(run.id, rich=haui_on(session.config, args.haui != "off"))
        after: int | None = None
        looks = 0
        while True:
            current = await journal.get_run(run.id)  # first: once it has ended, all its events are in
            async for record in journal.events(run_id=run.id, after=after):
                show(replay.feed(record.event))
                after = record.seq
            show(replay.flush())
            if current is None or current.status.value != "running":
                break
            looks += 1
            if looks % RECOVER_EVERY == 0:
                await journal.recover_runs(session.id)  # its owner may have died
            await anyio.sleep(POLL)
        cut_off = current is not None and current.status.value == "interrupted"
        show(replay.end((current.ended_at or True) if current is not None and cut_off else False))
        display.finish()
        return outcome(current)
    finally:
        await journal.close()


def outcome(run: RunRecord | None) -> int:
    """How the turn ended, as `prompt` would have said it, and its exit status."""
    if run is None:
        warn("error: the turn's run is no longer in the journal")
        return EXIT_ERROR
    if run.stop_reason in STOP_REASONS:
        return stop_status(run.stop_reason)
    warn(f"error: the turn ended {run.status.value}" + (f": {run.error}" if run.error else ""))
    return EXIT_ERROR
