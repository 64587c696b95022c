"""An "always allow" answer covers exactly what its question named, through the real server stack.

After "always allow `git status`", each command line below once ran without a question (the rule
was keyed on the program's name). Each must now be asked, through the scripted agent and the
openai agent (its model played by the fake endpoint); the editor rejects the second question and
nothing the line would do happens. The workspace is a git repository, so `git status` succeeds
and what follows `&&` would run.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, openai_adapter, reply
from harness import answer_permissions, running

from acp_server.acp.handlers import AcpAgent
from adapters.base import RuntimeAdapter
from adapters.openai import OpenAIAdapter
from adapters.scripted import ScriptedAdapter

pytest.importorskip("httpx", reason="the openai extra is not installed")

BYPASSES = [
    "git status; touch x",
    "git log $(touch x)",
    "git status && rm -rf dir",
    "GIT_DIR=x git status ; rm -rf dir",
    "./git status",
    "{bin}/git status",
    "git --version && touch pwned",
]


@pytest.fixture
def workspace(tmp_path) -> Path:
    """A git repository with a directory to lose and two scripts named git that leave a mark."""
    ws = tmp_path / "ws"
    (ws / "dir").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    for script in (ws / "git", tmp_path / "bin" / "git"):
        script.parent.mkdir(exist_ok=True)
        script.write_text(f"#!/bin/sh\ntouch {ws}/pwned\n")
        script.chmod(0o755)
    return ws


def untouched(ws: Path) -> bool:
    return not (ws / "x").exists() and not (ws / "pwned").exists() and (ws / "dir").is_dir()


def questions(editor) -> list[dict[str, Any]]:
    return [r["params"] for r in editor.server_requests if r["method"] == "session/request_permission"]


def command_step(command: str, *, run: bool = True) -> dict[str, Any]:
    step = {"tool": command, "kind": "execute", "input": {"command": command}, "ask": True}
    return {**step, "run": command} if run else step


def scripted(*lines: str) -> ScriptedAdapter:
    """Prompt `n` asks about (and runs) the n-th line; the first is only asked about."""
    scenarios = [{"match": str(n), "steps": [command_step(line, run=n > 0)]} for n, line in enumerate(lines)]
    return ScriptedAdapter.from_data({"scenarios": scenarios})


@pytest.fixture
def openai(tmp_path) -> Iterator[tuple[FakeOpenAI, OpenAIAdapter]]:
    with openai_adapter(tmp_path) as served:
        yield served


def commands(fake: FakeOpenAI, *lines: str) -> None:
    """The model runs each line in a prompt of its own, then says it is done."""
    for line in lines:
        fake.script(reply(tools=[("run_command", {"command": line})]), reply("done"))


async def prompts(adapter: RuntimeAdapter, ws: Path, count: int, *answers: str):
    """Prompts "0", "1", ... in one session of `adapter`, the editor giving `answers`."""
    async with running(AcpAgent(adapter)) as editor:
        editor.handlers["session/request_permission"] = answer_permissions(*answers)
        await editor.initialize()
        sid = await editor.new_session(ws)
        for n in range(count):
            await editor.prompt(sid, str(n))
        return editor


@pytest.mark.parametrize("line", BYPASSES)
async def test_always_allowing_git_status_does_not_let_another_line_run_unasked_in_the_scripted_agent(workspace, line):
    line = line.format(bin=workspace.parent / "bin")
    editor = await prompts(scripted("git status", line), workspace, 2, "allow_always", "reject_once")
    first, second = questions(editor)
    assert [o["name"] for o in first["options"] if o["kind"] == "allow_always"] == ["Always allow `git status`"]
    assert second["toolCall"]["rawInput"] == {"command": line}
    assert untouched(workspace)


@pytest.mark.parametrize("line", BYPASSES)
async def test_always_allowing_git_status_does_not_let_another_line_run_unasked_in_the_openai_agent(
    openai, workspace, line
):
    line = line.format(bin=workspace.parent / "bin")
    fake, adapter = openai
    commands(fake, "git status", line)
    editor = await prompts(adapter, workspace, 2, "allow_always", "reject_once")
    assert [q["toolCall"]["rawInput"]["command"] for q in questions(editor)] == ["git status", line]
    assert untouched(workspace)


async def test_an_always_allowed_command_runs_unasked_again_however_it_is_quoted(openai, workspace):
    fake, adapter = openai
    commands(fake, "git status", "git 'status'", "git status && git status")
    editor = await prompts(adapter, workspace, 3, "allow_always")
    assert len(questions(editor)) == 1
    assert "exit code 0" in fake.chats[-1]["messages"][-1]["content"]


async def test_always_allowing_a_list_covers_each_of_its_commands_on_its_own(workspace):
    editor = await prompts(scripted("git status && git log -1", "git log -1"), workspace, 2, "allow_always")
    (question,) = questions(editor)
    assert {o["kind"]: o["name"] for o in question["options"]}["allow_always"] == (
        "Always allow `git status` and `git log -1`"
    )


async def test_always_rejecting_a_command_refuses_a_later_line_that_runs_it_without_asking(workspace):
    editor = await prompts(scripted("rm -rf dir", "git status && rm -rf dir"), workspace, 2, "reject_always")
    assert len(questions(editor)) == 1
    assert untouched(workspace)


async def test_a_line_with_a_substitution_offers_no_always_allow(workspace):
    editor = await prompts(scripted("echo $(touch x)"), workspace, 1, "reject_once")
    (question,) = questions(editor)
    assert [o["kind"] for o in question["options"]] == ["allow_once", "reject_once", "reject_always"]
    assert question["options"][2]["name"] == "Always reject exactly `echo $(touch x)`"
