"""The agent below as processes: served over real pipes by a real `acp-server --agent acp --`,
ended with its whole tree when acp-server ends (EOF, or SIGKILL: the keeper's lifeline), even
when it ignores EOF and SIGTERM and leaves a child in a session of its own; and an agent that
dies mid-turn fails that turn clearly and is started again, its session brought back; in runner
mode the agent lives in the runner, and its turn outlives the editor that started it."""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import sys
import time
from pathlib import Path

import anyio
import pytest
from acp_child import Runtimes, child_argv, descendants
from harness import running
from runner_fronts import Front, short_runtime_dir, stop_runners
from stdio_server import StdioServer

from acp_server.acp.handlers import AcpAgent
from acp_server.protocol import methods

FAKE_AGENT = str(Path(__file__).with_name("fake_acp_agent.py"))
GONE_WITHIN = 5.0  # seconds: the bound for no agent process left after acp-server died


def fake_agent(root: Path, *flags: str) -> tuple[str, ...]:
    return (
        sys.executable,
        FAKE_AGENT,
        "--store",
        str(root / "agent-store.json"),
        "--pidfile",
        str(root / "agent.pid"),
        *flags,
    )


def agent_pids(root: Path) -> list[int]:
    return [int(pid) for pid in (root / "agent.pid").read_text().split()]


def still_running(pids: set[int], within: float) -> set[int]:
    """The processes of `pids` still running after up to `within` seconds (pidfds, no polling)."""
    fds: dict[int, int] = {}
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            fds[os.pidfd_open(pid)] = pid
    deadline = time.monotonic() + within
    try:
        while fds and (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select(list(fds), [], [], left)
            for fd in ready:
                del fds[fd]
                os.close(fd)
        return set(fds.values())
    finally:
        for fd in fds:
            os.close(fd)


@pytest.fixture
def servers():
    started: list[StdioServer] = []
    yield started
    for server in started:
        server.kill()


def test_a_real_server_serves_an_acp_agent_over_stdio_and_ends_it_on_eof(tmp_path, servers):
    edit = {
        "match": "edit",
        "steps": [
            {"tool": "Write a.txt", "kind": "edit", "ask": True, "write_file": {"path": "a.txt", "content": "A\n"}},
            {"say": "written"},
        ],
    }
    server = StdioServer("--agent", "acp", "--", *child_argv(tmp_path, [edit]), cwd=str(tmp_path))
    servers.append(server)
    sid = server.start_session(str(tmp_path))
    tree = descendants(server.process.pid)
    result = server.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "edit"}]})
    assert result["stopReason"] == "end_turn"
    assert (tmp_path / "a.txt").read_text() == "A\n"
    asked = [f for f in server.frames if f.get("method") == "session/request_permission"]
    assert len(asked) == 1 and asked[0]["params"]["toolCall"]["title"] == "Write a.txt"
    server.close_stdin()
    assert server.wait() == 0, server.exit_report()
    assert tree and still_running(tree, GONE_WITHIN) == set()


def test_an_agent_that_ignores_eof_and_sigterm_is_ended_with_its_whole_tree(tmp_path, servers):
    server = StdioServer("--agent", "acp", "--", *fake_agent(tmp_path, "--linger", "--orphan"), cwd=str(tmp_path))
    servers.append(server)
    server.start_session(str(tmp_path))
    agent, orphan = agent_pids(tmp_path)
    server.close_stdin()
    assert server.wait() == 0, server.exit_report()
    assert still_running({agent, orphan}, GONE_WITHIN) == set()


def test_sigkill_of_acp_server_leaves_no_agent_process(tmp_path, servers):
    server = StdioServer("--agent", "acp", "--", *fake_agent(tmp_path, "--linger", "--orphan"), cwd=str(tmp_path))
    servers.append(server)
    server.start_session(str(tmp_path))
    agent, orphan = agent_pids(tmp_path)
    tree = descendants(server.process.pid)
    assert {agent, orphan} <= tree
    assert os.getpgid(orphan) != os.getpgid(agent), "the orphan is out of reach of a signal to the agent's group"
    server.process.send_signal(signal.SIGKILL)
    server.process.wait()
    assert still_running(tree, GONE_WITHIN) == set()


@pytest.fixture
def runtimes():
    made = Runtimes()
    yield made
    made.close()


async def test_an_agent_that_dies_mid_turn_fails_the_turn_and_is_brought_back_with_its_memory(tmp_path, runtimes):
    agent = AcpAgent(runtimes.make(fake_agent(tmp_path)))
    async with running(agent) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "first")
        turn = await editor.start_prompt(sid, "slow")
        await editor.wait_for(lambda: "working" in editor.text(sid))
        (pid,) = agent_pids(tmp_path)
        os.kill(pid, signal.SIGKILL)
        with anyio.fail_after(10):
            failed = await turn
        assert failed["error"]["message"].startswith("The agent exited during the turn (exit status")
        assert "it is started again for the next prompt" in failed["error"]["message"]
        before = len(editor.updates[sid])
        await editor.prompt(sid, "again")
        (restarted,) = agent_pids(tmp_path)
        assert restarted != pid
        said = "".join(
            u["content"]["text"] for u in editor.updates[sid][before:] if u["sessionUpdate"] == "agent_message_chunk"
        )
        assert said == "You said again; I remember first."


async def test_cancel_reaches_the_agent_and_its_next_prompt_waits_for_the_cancelled_answer(tmp_path, runtimes):
    agent = AcpAgent(runtimes.make(fake_agent(tmp_path)))
    async with running(agent) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        turn = await editor.start_prompt(sid, "slow")
        await editor.wait_for(lambda: "working" in editor.text(sid))
        await editor.notify(methods.SESSION_CANCEL, {"sessionId": sid})
        assert (await turn)["result"] == {"stopReason": "cancelled"}
        before = len(editor.updates[sid])
        await editor.prompt(sid, "next")
        said = "".join(
            u["content"]["text"] for u in editor.updates[sid][before:] if u["sessionUpdate"] == "agent_message_chunk"
        )
        assert said == "You said next; I remember slow."


@pytest.fixture
def runner_env(tmp_path, monkeypatch):
    run_dir = short_runtime_dir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", run_dir)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    yield ("--db", str(tmp_path / "journal.db"), "--agent", "acp", "--", *fake_agent(tmp_path))
    stop_runners()
    shutil.rmtree(run_dir, ignore_errors=True)


def test_in_runner_mode_the_agents_turn_survives_the_editor_and_goes_on_for_the_next(tmp_path, runner_env):
    first = Front(*runner_env, cwd=str(tmp_path))
    first.initialize()
    sid = first.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
    first.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "slow"}]})
    while "working" not in text(first.frames):
        assert first.next_frame() is not None, first.exit_report()
    first.kill_group()
    second = Front(*runner_env, cwd=str(tmp_path))
    try:
        second.initialize()
        second.call("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        assert "working" in text(second.frames), "the replay shows the turn the first editor started"
        second.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
        before = len(second.frames)
        second.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "after"}]})
        assert text(second.frames[before:]) == "You said after; I remember slow."
    finally:
        second.kill_group()


def text(frames) -> str:
    updates = [f["params"]["update"] for f in frames if f.get("method") == "session/update"]
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")


def test_the_agent_gets_the_environment_without_acp_servers_own_settings(monkeypatch):
    from acp_server.downstream.process import agent_environment

    monkeypatch.setenv("ACP_SERVER_AGENT", "acp")
    monkeypatch.setenv("ACP_SERVER_RUNNER", "1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    env = agent_environment()
    assert not [name for name in env if name.startswith("ACP_SERVER_")]
    assert env["ANTHROPIC_API_KEY"] == "sk-ant-test"


async def test_a_question_the_agent_asks_after_a_cancel_is_answered_cancelled(tmp_path, runtimes):
    agent = AcpAgent(runtimes.make(fake_agent(tmp_path)))
    async with running(agent) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        turn = await editor.start_prompt(sid, "slow, then a late question")
        await editor.wait_for(lambda: "working" in editor.text(sid))
        await editor.notify(methods.SESSION_CANCEL, {"sessionId": sid})
        assert (await turn)["result"] == {"stopReason": "cancelled"}
        before = len(editor.updates[sid])
        await editor.prompt(sid, "next")
        said = "".join(
            u["content"]["text"] for u in editor.updates[sid][before:] if u["sessionUpdate"] == "agent_message_chunk"
        )
        assert said == 'You said next; I remember slow, then a late question ({"outcome": {"outcome": "cancelled"}}).'
        assert editor.server_requests == [], "the editor is not asked about a cancelled turn"
