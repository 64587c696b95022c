"""The agent's process: started under its keeper, with pipes for the wire and its stderr, and
stopped with its whole process group.

The keeper is started from the runtime's event loop thread, which lives as long as acp-server
(the parent-death signal fires when the thread that forked dies). The agent's stderr is logged
line by line and its last lines kept, so that an agent that will not start says why. Its
environment is acp-server's without the `ACP_SERVER_*` settings, which are not the agent's (an
acp-server started as the agent would otherwise read them as its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping

import anyio

from acp_server.downstream.keeper import keeper_argv
from acp_server.rpc.wire import Frame, FrameWriter, PipeWriter, read_chunks, read_frames
from adapters.printable import printable

log = logging.getLogger(__name__)

MAX_FRAME_BYTES = 64 << 20
STDERR_LINES = 40  # kept for the message of an agent that fails
EOF_GRACE = 1.0  # seconds an agent gets to exit once its stdin closed, before its group is ended
TERM_GRACE = 1.0  # seconds between SIGTERM and SIGKILL of the agent's group
KEEPER_GRACE = 5.0  # seconds the keeper gets to end the group before it is killed itself
# What a failing start's stderr says that is no cause: npm's pointer to its log, its proxy
# advice, and the bare prefix of its empty lines.
NOISE = re.compile(r"complete log of this run|behind a proxy|'proxy' config|^(npm (error|ERR!)\s*)?$")
TELLING = re.compile(r"error|ECONN|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|E404|not found|no such|denied|cannot|can't", re.I)
NPM_PREFIX = re.compile(r"^npm (error|ERR!) ")
NAMED = re.compile(r"^\w*(Error|Exception)\b:")  # FetchError: ..., ModuleNotFoundError: ...


class AgentProcess:
    """One running agent: its wire (frames in, a writer out), its stderr tail, its exit."""

    def __init__(self, process: asyncio.subprocess.Process, writer: FrameWriter, *, stdout: int, stderr: int) -> None:
        self._process = process
        self.writer = writer
        self.frames: AsyncIterator[Frame] = read_frames(stdout, MAX_FRAME_BYTES)
        self.stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self.stderr_closed = anyio.Event()  # its last lines are in `stderr`
        self._fds: tuple[int, ...] = (stdout, stderr)  # ours to close once the readers have stopped

    @classmethod
    async def start(cls, argv: tuple[str, ...], *, env: Mapping[str, str] | None = None) -> AgentProcess:
        """Start `argv` under a keeper; OSError when even the keeper cannot start."""
        agent_in, to_agent = os.pipe()
        from_agent, agent_out = os.pipe()
        errors, agent_err = os.pipe()
        try:
            process = await asyncio.create_subprocess_exec(
                *keeper_argv(argv, grace=TERM_GRACE),
                stdin=agent_in,
                stdout=agent_out,
                stderr=agent_err,
                start_new_session=True,  # Ctrl-C at acp-server's terminal is not the agent's
                env=dict(env if env is not None else agent_environment()),
            )
        except BaseException:
            for fd in (to_agent, from_agent, errors):
                os.close(fd)
            raise
        finally:
            for fd in (agent_in, agent_out, agent_err):
                os.close(fd)
        return cls(process, await PipeWriter.open(to_agent), stdout=from_agent, stderr=errors)

    @property
    def pid(self) -> int:
        """The keeper's pid (the agent is its child, in the keeper's session)."""
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def log_stderr(self, label: str) -> None:
        """Log the agent's stderr until it closes, keeping its last lines."""
        pending = b""
        try:
            async for chunk in read_chunks(self._fds[1]):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self._stderr_line(label, line)
            if pending:
                self._stderr_line(label, pending)
        finally:
            self.stderr_closed.set()

    def _stderr_line(self, label: str, line: bytes) -> None:
        # Printable at once: the line is logged, and quoted in the errors an editor and a terminal show.
        text = printable(line.decode("utf-8", errors="replace").rstrip())
        if text:
            self.stderr.append(text)
            log.info("%s: %s", label, text)

    async def wait(self) -> int:
        return await self._process.wait()

    async def stop(self, *, linger: bool = False) -> None:
        """Close the agent's stdin, give it EOF_GRACE to exit (none when it is known to linger
        after EOF), then have the keeper end its group; kill the keeper as a last resort."""
        with contextlib.suppress(OSError, RuntimeError):
            await self.writer.aclose()
        if not linger and await self._exited_within(EOF_GRACE):
            return
        self._signal(signal.SIGTERM)
        if not await self._exited_within(KEEPER_GRACE):
            log.warning("the agent's keeper (pid %d) did not end its group; killing it", self.pid)
            self._signal(signal.SIGKILL)
            await self.wait()

    async def _exited_within(self, seconds: float) -> bool:
        with anyio.move_on_after(seconds):
            await self.wait()
        return self.returncode is not None

    def _signal(self, number: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._process.send_signal(number)

    def close_fds(self) -> None:
        """Give back the read ends once the process is gone (the readers have stopped)."""
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = ()


def agent_environment() -> dict[str, str]:
    """acp-server's environment without its own settings."""
    return {name: value for name, value in os.environ.items() if not name.startswith("ACP_SERVER_")}


def cause(lines: Iterable[str]) -> str | None:
    """The line of a failed start's stderr that says why, npm's noise left out: the last named
    error (`FetchError: ... ECONNREFUSED`, not "A complete log of this run can be found in"),
    else the last line that mentions an error, else the last line."""
    kept = [NPM_PREFIX.sub("", line).strip() for line in lines if not NOISE.search(line.strip())]
    kept = [line for line in kept if line]
    named = [line for line in kept if NAMED.search(line)]
    telling = [line for line in kept if TELLING.search(line)]
    return (named or telling or kept or [None])[-1]
