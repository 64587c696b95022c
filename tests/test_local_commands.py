"""Local commands: timeouts and output limits, and a command never outlives a killed server.

The lifetime tests are real processes: a command reports its pid through a FIFO, the server
(or a stand-in parent) is SIGKILLed, and a pidfd tells when the command is gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from harness import running
from stdio_server import StdioServer

from acp_server.acp.handlers import AcpAgent
from acp_server.turns import lifeline
from acp_server.turns.processes import OUTPUT_LIMIT, run_local
from adapters.base import CommandResult
from adapters.scripted import ScriptedAdapter

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PDEATHSIG is Linux's")
DEADLINE = 30.0  # seconds for a process to start or to die
REPO = str(Path(lifeline.__file__).resolve().parents[2])


def pid_from_fifo(fifo: str) -> int:
    """The pid the command writes into `fifo`, waiting for it up to the deadline."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        data = b""
        while not data.endswith(b"\n"):
            readable, _, _ = select.select([fd], [], [], DEADLINE)
            assert readable, "the command did not start"
            data += os.read(fd, 64)
        return int(data)
    finally:
        os.close(fd)


@contextlib.contextmanager
def watched(pid: int):
    """A pidfd for `pid` (so a reused pid cannot fool the test); the process is killed at the end."""
    pidfd = os.pidfd_open(pid)
    try:
        yield pidfd
    finally:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        os.close(pidfd)


def dies(pidfd: int) -> bool:
    readable, _, _ = select.select([pidfd], [], [], DEADLINE)
    return bool(readable)


def gone(pid: int) -> bool:
    """Whether `pid` has exited (or exits within the deadline)."""
    try:
        with watched(pid) as pidfd:
            return dies(pidfd)
    except ProcessLookupError:
        return True  # exited and reaped already


async def test_a_command_that_exits_while_its_output_stays_open_times_out_cleanly(tmp_path):
    # The shell exits at once, but a background child keeps the output pipe open until the
    # timeout: the result must still come back, and the child must be killed with its group.
    result = await run_local("echo started; (exec sleep 300) & echo $! > child.pid", cwd=str(tmp_path), timeout=0.5)
    assert result.output == "started\n\n[timed out after 0.5 s]"
    assert result.exit_code == 0 and result.signal is None
    assert gone(int((tmp_path / "child.pid").read_text()))


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rindex(b")") + 2 :].split()[1])


def ended_and_reaped(pid: int, pidfd: int) -> bool:
    """Whether `pid` has exited and left no zombie behind."""
    exited = bool(select.select([pidfd], [], [], 0)[0])
    return exited and not Path(f"/proc/{pid}").exists()


# Each writes its pid into a FIFO and sleeps, holding the command's output open: one in a session
# of its own, one that also clears its environment while its parent shell waits.
DETACHED = (
    "setsid sh -c 'echo $$ > detached; exec sleep 300' & setsid env -i sh -c 'echo $$ > bare; exec sleep 300' & wait"
)


@linux_only
async def test_a_cancelled_turn_ends_every_process_its_command_started_even_those_that_left_its_group(tmp_path):
    for name in ("detached", "bare"):
        os.mkfifo(tmp_path / name)
    steps = [{"tool": "Serve", "kind": "execute", "run": DETACHED}, {"say": "never"}]
    agent = AcpAgent(ScriptedAdapter.from_data({"scenarios": [{"match": "", "steps": steps}]}))
    async with running(agent) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        task = await editor.start_prompt(sid, "go")
        pids = [await anyio.to_thread.run_sync(pid_from_fifo, str(tmp_path / name)) for name in ("detached", "bare")]
        with watched(pids[0]) as detached, watched(pids[1]) as bare:
            await editor.notify("session/cancel", {"sessionId": sid})
            assert (await task)["result"] == {"stopReason": "cancelled"}
            assert ended_and_reaped(pids[0], detached), "the setsid child survived the cancel"
            assert ended_and_reaped(pids[1], bare), "the child without the environment survived the cancel"
        assert editor.updates[sid][-1]["status"] == "failed"


@linux_only
async def test_a_process_a_finished_command_left_running_is_adopted_by_the_server_and_reaped_when_it_exits(tmp_path):
    os.mkfifo(tmp_path / "started")
    command = "setsid sh -c 'echo $$ > started; exec sleep 300' > /dev/null 2>&1 &"
    assert (await run_local(command, cwd=str(tmp_path), timeout=None)).exit_code == 0
    pid = await anyio.to_thread.run_sync(pid_from_fifo, str(tmp_path / "started"))
    with watched(pid) as pidfd:
        assert parent_of(pid) == os.getpid(), "the orphan went to init: the server is no subreaper"
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        assert dies(pidfd)
        await run_local("true", cwd=str(tmp_path), timeout=None)
        assert ended_and_reaped(pid, pidfd)


def is_subreaper() -> bool:
    value = ctypes.c_int()
    assert ctypes.CDLL(None).prctl(37, ctypes.byref(value), 0, 0, 0) == 0  # PR_GET_CHILD_SUBREAPER
    return value.value == 1


@linux_only
async def test_the_server_is_a_subreaper_only_while_a_command_runs(tmp_path):
    # Not for good: an MCP server's orphans (its group is killed) must still go to init.
    os.mkfifo(tmp_path / "started")
    assert not is_subreaper()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: run_local("echo $$ > started; exec sleep 300", cwd=str(tmp_path), timeout=None))
        await anyio.to_thread.run_sync(pid_from_fifo, str(tmp_path / "started"))
        assert is_subreaper()
        tg.cancel_scope.cancel()
    assert not is_subreaper()


async def test_a_command_that_overruns_its_timeout_is_killed(tmp_path):
    result = await run_local("echo before; exec sleep 300", cwd=str(tmp_path), timeout=0.5)
    assert result == CommandResult("before\n\n[timed out after 0.5 s]", None, "SIGKILL", False)


async def test_only_the_tail_of_a_long_output_is_kept(tmp_path):
    result = await run_local(
        f"head -c {OUTPUT_LIMIT + 10} /dev/zero | tr '\\0' a; printf END", cwd=str(tmp_path), timeout=None
    )
    assert result.truncated and result.exit_code == 0
    assert len(result.output) == OUTPUT_LIMIT and result.output.endswith("aaEND")


@linux_only
def test_a_local_command_dies_when_the_server_is_killed(tmp_path):
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "scenarios": [
                    {
                        "match": "",
                        "steps": [{"tool": "Wait", "kind": "execute", "run": "echo $$ > started; exec sleep 300"}],
                    }
                ]
            }
        )
    )
    server = StdioServer("--agent", "scripted", "--script", str(script), cwd=str(tmp_path))
    try:
        sid = server.start_session(str(tmp_path))
        server.call("session/set_mode", {"sessionId": sid, "modeId": "yolo"})
        server.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
        with watched(pid_from_fifo(str(fifo))) as pidfd:
            server.kill()
            assert dies(pidfd), "the command outlived the killed server"
    finally:
        server.kill()


LAUNCHERS = {
    "setpriv": lambda: lifeline.setpriv_launcher(shutil.which("setpriv") or pytest.skip("no setpriv here")),
    "python": lambda: lifeline.python_launcher(sys.executable),
}
# A parent that starts the command through a launcher, then waits to be killed.
PARENT = """
import json, os, subprocess, sys
from acp_server.turns.lifeline import wrap
subprocess.Popen(wrap(tuple(json.loads(sys.argv[1])), sys.argv[2], parent=os.getpid()), start_new_session=True)
sys.stdin.read()
"""


@linux_only
@pytest.mark.parametrize("name", sorted(LAUNCHERS))
def test_each_launcher_ties_the_command_to_its_parent(tmp_path, name):
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    launcher = json.dumps(LAUNCHERS[name]())
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, launcher, "echo $$ > started; exec sleep 300"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": REPO},
    )
    try:
        with watched(pid_from_fifo(str(fifo))) as pidfd:
            parent.kill()
            parent.wait()
            assert dies(pidfd), f"the command outlived its parent ({name} launcher)"
    finally:
        parent.kill()
        parent.wait()


@linux_only
def test_a_launcher_refuses_to_start_a_command_whose_parent_is_gone(tmp_path):
    # As if the server died between fork and the launcher arming the signal.
    for launcher in (
        lifeline.python_launcher(sys.executable),
        *([lifeline.setpriv_launcher(p)] if (p := shutil.which("setpriv")) else []),
    ):
        argv = lifeline.wrap(launcher, "touch ran", parent=os.getpid() + 1_000_000)
        assert subprocess.run(argv, cwd=tmp_path, check=False).returncode == 137
        assert not (tmp_path / "ran").exists()
