"""An ACP agent below acp-server gets a terminal (`terminal/*`), and every command it runs there
is a tool call the user sees, decided by the same policy and "always" rules as our own agents'
commands: asked in ask mode, refused with a message the agent can read, remembered when allowed
always, run in the editor's terminal when it has one and locally in the session's cwd when not,
never in a directory outside the session's."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from acp_child import Runtimes
from harness import FakeEditor, answer_permissions, running

from acp_server.acp.handlers import AcpAgent
from acp_server.downstream.terminals import KILLED
from acp_server.protocol import methods

FAKE_AGENT = str(Path(__file__).with_name("fake_acp_agent.py"))


@pytest.fixture
def runtimes():
    made = Runtimes()
    yield made
    made.close()


def agent(tmp_path: Path, runtimes: Runtimes) -> AcpAgent:
    calls = tmp_path / "calls.jsonl"
    argv = (sys.executable, FAKE_AGENT, "--store", str(tmp_path / "store.json"), "--calls", str(calls))
    return AcpAgent(runtimes.make(argv))


def terminal_prompt(command: str, *args: str, **more: Any) -> str:
    """The fake agent's prompt that runs `command args` through terminal/create."""
    return "terminal " + json.dumps({"create": {"command": command, "args": list(args), **more}})


def told(editor: FakeEditor, sid: str) -> dict[str, Any]:
    """What the agent was answered, by method, as it told it in its reply."""
    lines = [line.strip() for line in editor.text(sid).splitlines() if line.strip().startswith("terminal/")]
    return {name: json.loads(answer) for name, answer in (line.split("=", 1) for line in lines)}


def questions(editor: FakeEditor) -> list[dict[str, Any]]:
    return [frame["params"] for frame in editor.server_requests if frame["method"] == methods.REQUEST_PERMISSION]


async def open_session(editor: FakeEditor, workspace: Path, *, capabilities: dict[str, Any] | None = None) -> str:
    await editor.initialize(capabilities)
    return await editor.new_session(workspace)


def workspace_of(tmp_path: Path) -> Path:
    workspace = tmp_path / "work"
    workspace.mkdir()
    return workspace


async def test_the_agent_below_is_offered_a_terminal(tmp_path, runtimes):
    async with running(agent(tmp_path, runtimes)) as editor:
        await open_session(editor, workspace_of(tmp_path))
    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    (initialize,) = [call for call in calls if call["method"] == "initialize"]
    assert initialize["params"]["clientCapabilities"]["terminal"] is True


async def test_a_command_is_asked_about_in_ask_mode_and_its_output_and_exit_code_reach_the_agent(tmp_path, runtimes):
    workspace = workspace_of(tmp_path)
    async with running(agent(tmp_path, runtimes)) as editor:
        editor.handlers[methods.REQUEST_PERMISSION] = answer_permissions("allow_once")
        sid = await open_session(editor, workspace)
        await editor.prompt(sid, terminal_prompt("sh", "-c", "pwd; echo made > out.txt; exit 3"))
    (question,) = questions(editor)
    assert question["toolCall"]["rawInput"] == {"command": "pwd; echo made > out.txt; exit 3"}
    answers = told(editor, sid)
    assert answers["terminal/wait_for_exit"] == {"result": {"exitCode": 3, "signal": None}}
    output = answers["terminal/output"]["result"]
    assert output == {"output": f"{workspace}\n", "truncated": False, "exitStatus": {"exitCode": 3, "signal": None}}
    assert (workspace / "out.txt").read_text() == "made\n"  # run in the session's cwd
    calls = [u for u in editor.updates[sid] if u["sessionUpdate"] in ("tool_call", "tool_call_update")]
    assert calls[0]["kind"] == "execute" and calls[0]["title"] == "`pwd; echo made > out.txt; exit 3`"
    assert calls[-1]["status"] == "failed" and calls[-1]["rawOutput"] == {"exitCode": 3, "signal": None}


async def test_a_rejected_command_is_refused_to_the_agent_with_a_clear_error_and_never_runs(tmp_path, runtimes):
    workspace = workspace_of(tmp_path)
    async with running(agent(tmp_path, runtimes)) as editor:
        editor.handlers[methods.REQUEST_PERMISSION] = answer_permissions("reject_once")
        sid = await open_session(editor, workspace)
        await editor.prompt(sid, terminal_prompt("touch", "made.txt"))
    assert len(questions(editor)) == 1
    error = told(editor, sid)["terminal/create"]["error"]
    assert error["message"] == "Refused: the command `touch made.txt` was not allowed (Permission denied by the user)"
    assert not (workspace / "made.txt").exists()
    assert [u.get("status") for u in editor.updates[sid] if u["sessionUpdate"] == "tool_call_update"][-1] == "failed"


async def test_an_always_allowed_command_runs_unasked_the_next_time(tmp_path, runtimes):
    workspace = workspace_of(tmp_path)
    async with running(agent(tmp_path, runtimes)) as editor:
        editor.handlers[methods.REQUEST_PERMISSION] = answer_permissions("allow_always")
        sid = await open_session(editor, workspace)
        await editor.prompt(sid, terminal_prompt("echo", "hello"))
        await editor.prompt(sid, terminal_prompt("echo", "hello"))
    (question,) = questions(editor)
    assert {o["kind"]: o["name"] for o in question["options"]}["allow_always"] == "Always allow `echo hello`"
    outputs = [line for line in editor.text(sid).splitlines() if line.strip().startswith("terminal/output=")]
    assert len(outputs) == 2 and all('"output": "hello\\n"' in line for line in outputs)


async def test_a_command_runs_in_the_editors_terminal_when_it_has_one(tmp_path, runtimes):
    workspace = workspace_of(tmp_path)
    async with running(agent(tmp_path, runtimes)) as editor:
        editor.enable_terminal()
        editor.handlers[methods.REQUEST_PERMISSION] = answer_permissions("allow_once")
        sid = await open_session(editor, workspace, capabilities={"terminal": True})
        await editor.prompt(sid, terminal_prompt("echo", "in the editor"))
    assert "create" in editor.terminal_calls
    calls = [u for u in editor.updates[sid] if u["sessionUpdate"] in ("tool_call", "tool_call_update")]
    embedded = [c for u in calls for c in u.get("content") or [] if c["type"] == "terminal"]
    assert embedded  # the user sees the editor's terminal in the call
    assert told(editor, sid)["terminal/output"]["result"]["output"] == "in the editor\n"


async def test_a_command_in_a_directory_outside_the_session_is_refused_unasked(tmp_path, runtimes):
    workspace = workspace_of(tmp_path)
    async with running(agent(tmp_path, runtimes)) as editor:
        editor.handlers[methods.REQUEST_PERMISSION] = answer_permissions("allow_once")
        sid = await open_session(editor, workspace)
        await editor.prompt(sid, terminal_prompt("touch", "escaped.txt", cwd=str(tmp_path)))
    assert questions(editor) == []
    error = told(editor, sid)["terminal/create"]["error"]
    assert error["message"] == f"Refused: {tmp_path} is outside the session's directories"
    assert not (tmp_path / "escaped.txt").exists()


async def test_a_command_the_agent_asked_about_first_is_not_asked_about_again(tmp_path, runtimes):
    """fast-agent asks about its execute call, then runs it in the terminal it was given: one question."""
    workspace = workspace_of(tmp_path)
    async with running(agent(tmp_path, runtimes)) as editor:
        editor.handlers[methods.REQUEST_PERMISSION] = answer_permissions("allow_once", "allow_once")
        sid = await open_session(editor, workspace)
        await editor.prompt(sid, "ask, then " + terminal_prompt("ls", "-la"))
    assert len(questions(editor)) == 1
    assert told(editor, sid)["terminal/wait_for_exit"] == {"result": {"exitCode": 0, "signal": None}}


async def test_the_agent_can_kill_a_command_that_is_still_running(tmp_path, runtimes):
    workspace = workspace_of(tmp_path)
    spec = {"create": {"command": "sleep", "args": ["30"]}, "then": ["kill", "wait_for_exit", "output", "release"]}
    async with running(agent(tmp_path, runtimes)) as editor:
        editor.handlers[methods.REQUEST_PERMISSION] = answer_permissions("allow_once")
        sid = await open_session(editor, workspace)
        await editor.prompt(sid, "terminal " + json.dumps(spec))
    answers = told(editor, sid)
    assert answers["terminal/kill"] == {"result": {}}
    assert answers["terminal/wait_for_exit"] == {"result": {"exitCode": None, "signal": "SIGKILL"}}
    assert answers["terminal/output"]["result"]["exitStatus"] == {"exitCode": None, "signal": "SIGKILL"}
    last = [u for u in editor.updates[sid] if u["sessionUpdate"] == "tool_call_update"][-1]
    assert last["status"] == "failed"
    assert last["content"] == [{"type": "content", "content": {"type": "text", "text": KILLED}}]


async def test_read_only_mode_refuses_a_command_unasked(tmp_path, runtimes):
    workspace = workspace_of(tmp_path)
    async with running(agent(tmp_path, runtimes)) as editor:
        sid = await open_session(editor, workspace)
        await editor.request(methods.SESSION_SET_MODE, {"sessionId": sid, "modeId": "read-only"})
        await editor.prompt(sid, terminal_prompt("touch", "made.txt"))
    assert questions(editor) == []
    error = told(editor, sid)["terminal/create"]["error"]
    assert error["message"] == "Refused: the command `touch made.txt` was not allowed (Refused by read-only mode)"
    assert not (workspace / "made.txt").exists()
