"""A plain ACP client for a real agent process, on the repository's own JSON-RPC `Peer`.

`connect(launch, log=...)` starts the agent in a process group of its own, speaks ACP over its
stdin/stdout, answers its requests (permission questions by option kind, `fs/*` from the local
disk through the `prompt` client's handlers), keeps every frame it wrote, and at the end kills
the whole group, and any descendant that left it, then waits until none of them is left.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
from agents import Launch
from schema_check import check_agent_frame

from acp_server.cli.local import read_text_file, write_text_file
from acp_server.protocol import methods
from acp_server.rpc.dispatch import Dispatcher
from acp_server.rpc.peer import Peer
from acp_server.rpc.wire import Frame, FrameWriter, PipeWriter, read_frames

STARTUP_TIMEOUT = 180.0  # seconds for initialize + session/new: Node agents and fast-agent are slow to start
TURN_TIMEOUT = 90.0  # seconds for one prompt turn against the fake
EXIT_TIMEOUT = 10.0  # seconds for killed processes to be gone
MAX_FRAME = 1 << 24
CAPABILITIES = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False}


class AgentClient:
    """The client side of one connection: requests out, the agent's frames kept and answered."""

    def __init__(self) -> None:
        self.peer = Peer()
        self.frames: list[tuple[dict[str, Any], str | None]] = []  # (frame, the method a response answers)
        self.updates: list[dict[str, Any]] = []  # session/update params, in order
        self.permissions: list[dict[str, Any]] = []  # session/request_permission params
        self.announced_before: list[list[str]] = []  # for each question: the tool calls announced before it
        self.written: list[str] = []  # paths the agent wrote through fs/write_text_file
        self.pid = 0  # the agent's process, and its process group
        self.choice = "allow_once"  # the kind of option every permission question is answered with
        self.ready_after: float | None = None  # seconds from the start to session/new's answer
        self.escaped: list[int] = []  # descendants that had left the agent's process group
        self._sent: dict[int, str] = {}
        self._changed = anyio.Event()
        self._started = time.monotonic()

    def handlers(self) -> dict[str, Callable[[dict[str, Any]], Any]]:
        return {
            methods.SESSION_UPDATE: self._on_update,
            methods.REQUEST_PERMISSION: self._on_permission,
            methods.FS_READ_TEXT_FILE: read_text_file,
            methods.FS_WRITE_TEXT_FILE: self._on_write,
        }

    async def open_session(self, cwd: Path) -> str:
        """initialize + session/new; the session's id."""
        with anyio.fail_after(STARTUP_TIMEOUT):
            await self.peer.request(methods.INITIALIZE, {"protocolVersion": 1, "clientCapabilities": CAPABILITIES})
            session = await self.peer.request(methods.SESSION_NEW, {"cwd": str(cwd), "mcpServers": []})
        self.ready_after = time.monotonic() - self._started
        return session["sessionId"]

    async def prompt(self, session_id: str, text: str) -> dict[str, Any]:
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        return await self.peer.request(methods.SESSION_PROMPT, params, timeout=TURN_TIMEOUT)

    async def cancel(self, session_id: str) -> None:
        await self.peer.notify(methods.SESSION_CANCEL, {"sessionId": session_id})

    async def wait_for(self, kind: str, *, timeout: float = TURN_TIMEOUT) -> dict[str, Any]:
        """The first session/update of this `sessionUpdate` kind, waiting for it if need be."""
        with anyio.fail_after(timeout):
            while not (found := [u["update"] for u in self.updates if u["update"].get("sessionUpdate") == kind]):
                await self._changed.wait()
        return found[0]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [u["update"] for u in self.updates if u["update"].get("sessionUpdate") == kind]

    def text(self) -> str:
        """Everything the agent said (agent_message_chunk texts), joined."""
        return "".join(u["content"].get("text", "") for u in self.of_kind("agent_message_chunk"))

    def schema_problems(self) -> list[str]:
        """What in the agent's frames is not valid against the ACP schema, one line each."""
        problems = []
        for frame, answered in self.frames:
            try:
                check_agent_frame(frame, answered)
            except AssertionError as exc:
                problems.append(str(exc).split("\n")[0])
        return problems

    async def _on_update(self, params: dict[str, Any]) -> None:
        self.updates.append(params)
        self._changed.set()
        self._changed = anyio.Event()

    async def _on_permission(self, params: dict[str, Any]) -> dict[str, Any]:
        self.permissions.append(params)
        self.announced_before.append([u["toolCallId"] for u in self.of_kind("tool_call")])
        option = next(o for o in params["options"] if o["kind"] == self.choice)
        return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}

    async def _on_write(self, params: dict[str, Any]) -> dict[str, Any]:
        self.written.append(params.get("path", ""))
        return await write_text_file(params)

    async def record(self, frames: AsyncIterator[Frame]) -> AsyncIterator[Frame]:
        async for frame in frames:
            if isinstance(frame, bytes):
                with suppress(ValueError):
                    message = json.loads(frame)
                    answered = None if "method" in message else self._sent.get(message.get("id"))
                    self.frames.append((message, answered))
            yield frame


class _Recording:
    """Our frames to the agent, passed on; notes which method each of our requests called."""

    def __init__(self, inner: FrameWriter, sent: dict[int, str]) -> None:
        self._inner, self._sent = inner, sent

    async def write(self, data: bytes) -> None:
        for line in data.splitlines():
            message = json.loads(line)
            if "method" in message and "id" in message:
                self._sent[message["id"]] = message["method"]
        await self._inner.write(data)

    async def aclose(self) -> None:
        await self._inner.aclose()


@asynccontextmanager
async def connect(launch: Launch, *, log: Path) -> AsyncIterator[AgentClient]:
    """The agent started from `launch` (its stderr in `log`), and a client talking to it."""
    process = _spawn(launch, log)
    assert process.stdin is not None and process.stdout is not None
    client = AgentClient()
    client.pid = process.pid
    writer = _Recording(await PipeWriter.open(os.dup(process.stdin.fileno())), client._sent)
    process.stdin.close()
    try:
        async with anyio.create_task_group() as tg:
            frames = client.record(read_frames(process.stdout.fileno(), MAX_FRAME))
            tg.start_soon(client.peer.run, frames, writer, Dispatcher(client.handlers()))
            try:
                yield client
            finally:
                client.escaped = await kill_agent(process)
                tg.cancel_scope.cancel()
    finally:
        process.stdout.close()


def _spawn(launch: Launch, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as stderr:
        return subprocess.Popen(
            launch.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=launch.env,
            cwd=launch.cwd,
            start_new_session=True,  # a process group of its own, killed as one at the end
        )


async def kill_agent(process: subprocess.Popen[bytes]) -> list[int]:
    """SIGKILL the agent's process group and every descendant outside it; wait until all are
    gone. Returns the descendants that had left the group."""
    tree = descendants(process.pid)
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    escaped = [pid for pid in tree if group_of(pid) not in (None, process.pid)]
    for pid in escaped:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    await anyio.to_thread.run_sync(process.wait, EXIT_TIMEOUT)
    for pid in tree:
        await anyio.to_thread.run_sync(_wait_gone, pid)
    return escaped


def live_processes_of(group: int) -> list[int]:
    """The processes of a process group that are still running (zombies left out)."""
    return [pid for pid, (_, pgrp, state) in _processes().items() if pgrp == group and state not in "ZX"]


def descendants(root: int) -> list[int]:
    table = _processes()
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, (ppid, _, _) in table.items() if ppid == parent]
        found += children
        frontier += children
    return found


def group_of(pid: int) -> int | None:
    entry = _processes().get(pid)
    return entry[1] if entry else None


def _processes() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, process group, state), from /proc."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError, ValueError, IndexError):
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
                table[int(entry.name)] = (int(fields[1]), int(fields[2]), fields[0])
    return table


def _wait_gone(pid: int) -> None:
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        select.select([handle], [], [], EXIT_TIMEOUT)
    finally:
        os.close(handle)
