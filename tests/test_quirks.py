"""Where commands run (`--terminal`), and the table of known client quirks: every entry of
`QUIRKS` has a test here (`ENTRY_TESTS`), which initializes with that client's `clientInfo` and
checks what the server sends it."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import uuid
from functools import partial
from typing import Any

import anyio
import pytest
from harness import FakeEditor, running
from stdio_server import StdioServer

from acp_server.acp.handlers import AcpAgent, AgentOptions
from acp_server.turns.quirks import QUIRKS, parse_version, quirks_for
from adapters.scripted import ScriptedAdapter

RUN = {"tool": "Run", "kind": "execute", "run": "echo hi; exit 3"}
NEXT = "the next step ran"


def agent(*, terminal: Any = "auto", command: str = RUN["run"]) -> AcpAgent:
    steps = [{**RUN, "run": command}, {"say": NEXT}]
    script = ScriptedAdapter.from_data({"scenarios": [{"match": "go", "steps": steps}]})
    return AcpAgent(script, AgentOptions(terminal=terminal))


async def initialize_as(editor: FakeEditor, name: str, version: str | None, caps: dict[str, Any]) -> None:
    info = {"name": name} if version is None else {"name": name, "version": version}
    await editor.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps, "clientInfo": info})


def like_vscode_acp_client(editor: FakeEditor) -> None:
    """terminal/create as the VS Code "ACP Client" extension 0.2.0 runs it: `command` and `args`
    joined with spaces and handed to a shell (node's `spawn(..., {shell: true})`)."""
    editor.enable_terminal()

    async def create(params: dict[str, Any]) -> dict[str, Any]:
        line = " ".join([params["command"], *params.get("args", [])])
        tid = f"term-{uuid.uuid4().hex[:8]}"
        popen = partial(
            subprocess.Popen,
            line,
            shell=True,  # the client's mistake, reproduced
            cwd=params.get("cwd"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        editor.terminals[tid] = await anyio.to_thread.run_sync(popen)
        editor.terminal_calls.append("create")
        return {"terminalId": tid}

    editor.handlers["terminal/create"] = create


def command_result(editor: FakeEditor, sid: str) -> tuple[str, Any, str]:
    final = [u for u in editor.updates[sid] if u["sessionUpdate"] == "tool_call_update" and "status" in u][-1]
    text = "".join(c["content"]["text"] for c in final["content"] if c["type"] == "content")
    return final["status"], final.get("rawOutput"), text


def terminal_creates(editor: FakeEditor) -> list[dict[str, Any]]:
    return [r["params"] for r in editor.server_requests if r["method"] == "terminal/create"]


# --- the quirks table ----------------------------------------------------------------------


async def test_vscode_acp_client_gets_the_whole_command_line_and_its_commands_work(tmp_path, caplog):
    async with running(agent()) as editor:
        like_vscode_acp_client(editor)
        with caplog.at_level(logging.INFO, logger="acp_server.acp.handlers"):
            await initialize_as(editor, "vscode-acp-client", "0.2.0", {"terminal": True})
        sid = await editor.new_session(tmp_path)
        assert (await editor.prompt(sid, "go"))["stopReason"] == "end_turn"
        [create] = terminal_creates(editor)
        assert create == {
            "sessionId": sid,
            "command": "echo hi; exit 3",
            "cwd": str(tmp_path),
            "outputByteLimit": create["outputByteLimit"],
        }
        assert command_result(editor, sid) == ("failed", {"exitCode": 3}, "hi\n")
    assert "client vscode-acp-client: applying quirk terminal_shell_command_line" in caplog.text


@pytest.mark.parametrize(
    ("version", "command", "status", "output"),
    [
        ("0.3.0", "echo hi", 0, "\n"),  # an empty line instead of "hi"
        ("0.3.0", "exit 3", 0, ""),  # every exit code reads 0
        ("0.2.0", "echo hi", 0, "hi\n"),
        ("0.2.0", "exit 3", 3, ""),
    ],
)
async def test_that_client_gets_commands_wrong_without_the_quirk_and_right_with_it(
    tmp_path, version, command, status, output
):
    """The defect the quirk exists for, shown with a version the table does not cover (0.3.0)."""
    async with running(agent(command=command)) as editor:
        like_vscode_acp_client(editor)
        await initialize_as(editor, "vscode-acp-client", version, {"terminal": True})
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "go")
        _, raw_output, text = command_result(editor, sid)
        assert (raw_output, text) == ({"exitCode": status}, output)


@pytest.mark.parametrize(
    ("name", "version", "quirked"),
    [
        ("vscode-acp-client", "0.2.0", True),
        ("vscode-acp-client", "0.2.17", True),
        ("vscode-acp-client", "0.1.3", True),
        ("vscode-acp-client", None, True),  # an unknown version: the safer guess
        ("vscode-acp-client", "nightly", True),
        ("vscode-acp-client", "0.3.0", False),
        ("vscode-acp-client", "1.0.0", False),
        ("zed", "0.2.0", False),
        ("VSCode-ACP-Client", "0.2.0", False),  # names match exactly
    ],
)
async def test_the_terminal_quirk_applies_by_client_name_and_version(tmp_path, name, version, quirked):
    async with running(agent()) as editor:
        editor.enable_terminal()
        await initialize_as(editor, name, version, {"terminal": True})
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "go")
        [create] = terminal_creates(editor)
        assert ("args" not in create) is quirked
        assert create["command"] == ("echo hi; exit 3" if quirked else "/bin/sh")


async def test_no_quirk_is_logged_for_a_client_without_one(tmp_path, caplog):
    async with running(agent()) as editor:
        with caplog.at_level(logging.INFO, logger="acp_server.acp.handlers"):
            await initialize_as(editor, "zed", "0.200.0", {"terminal": True})
    assert "quirk" not in caplog.text


ENTRY_TESTS = {"terminal_shell_command_line": test_vscode_acp_client_gets_the_whole_command_line_and_its_commands_work}


def test_every_entry_of_the_quirks_table_has_its_test():
    assert {entry.quirk for entry in QUIRKS} == set(ENTRY_TESTS)
    for entry in QUIRKS:
        assert quirks_for(entry.client, None).has(entry.quirk)
        if entry.below is not None:
            assert not quirks_for(entry.client, ".".join(map(str, entry.below))).has(entry.quirk)


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("0.2.0", (0, 2, 0)),
        ("v1.4-beta", (1, 4)),
        ("12", (12,)),
        (" 0.3.1+build", (0, 3, 1)),
        ("dev", None),
        ("", None),
    ],
)
def test_versions_are_read_from_their_leading_numbers(text, version):
    assert parse_version(text) == version


# --- --terminal ----------------------------------------------------------------------------


async def test_terminal_local_runs_commands_locally_even_when_the_editor_offers_its_terminal(tmp_path):
    async with running(agent(terminal="local")) as editor:
        editor.enable_terminal()
        await editor.initialize({"terminal": True})
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "go")
        assert editor.terminal_calls == []
        assert command_result(editor, sid) == ("failed", {"exitCode": 3}, "hi\n")


async def test_terminal_editor_fails_commands_clearly_when_the_editor_offers_no_terminal(tmp_path):
    async with running(agent(terminal="editor")) as editor:
        await editor.initialize({})
        sid = await editor.new_session(tmp_path)
        assert (await editor.prompt(sid, "go"))["stopReason"] == "end_turn"
        status, _, text = command_result(editor, sid)
        assert status == "failed"
        assert text == (
            "Commands run only in the editor's terminal (--terminal editor), "
            "and this editor did not offer one (no `terminal` client capability)"
        )
        assert editor.text(sid) == NEXT


async def test_terminal_editor_uses_the_editors_terminal_when_offered(tmp_path):
    async with running(agent(terminal="editor")) as editor:
        editor.enable_terminal()
        await editor.initialize({"terminal": True})
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "go")
        assert editor.terminal_calls == ["create", "wait_for_exit", "output", "release"]
        assert command_result(editor, sid) == ("failed", {"exitCode": 3}, "hi\n")


@pytest.mark.parametrize("how", ["flag", "env"])
def test_an_unknown_terminal_choice_is_refused_at_start(tmp_path, how):
    argv = [sys.executable, "-m", "acp_server", "--agent", "echo"]
    env = dict(os.environ)
    if how == "flag":
        argv += ["--terminal", "vscode"]
    else:
        env["ACP_SERVER_TERMINAL"] = "vscode"
    result = subprocess.run(
        argv, env=env, cwd=tmp_path, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60
    )
    assert result.returncode == 2
    assert "--terminal must be auto, editor or local" in result.stderr
    assert result.stdout == ""


def test_the_terminal_choice_is_read_from_the_environment(tmp_path, monkeypatch):
    """ACP_SERVER_TERMINAL=local: a real server over pipes never sends terminal/* requests."""
    script = tmp_path / "script.json"
    script.write_text('{"scenarios": [{"match": "go", "steps": [{"tool": "Run", "run": "echo hi"}]}]}')
    monkeypatch.setenv("ACP_SERVER_TERMINAL", "local")
    server = StdioServer("--agent", "scripted", "--script", str(script), "--db", str(tmp_path / "j.db"))
    try:
        server.call("initialize", {"protocolVersion": 1, "clientCapabilities": {"terminal": True}})
        sid = server.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
        assert server.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}) == {
            "stopReason": "end_turn"
        }
        assert not [f for f in server.frames if str(f.get("method", "")).startswith("terminal/")]
        texts = [
            c["content"]["text"]
            for f in server.frames
            if f.get("method") == "session/update"
            for c in f["params"]["update"].get("content") or []
            if isinstance(c, dict) and c.get("type") == "content"
        ]
        assert "hi\n" in texts
    finally:
        server.close_stdin()
        server.wait()
        server.kill()
