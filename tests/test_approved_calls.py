"""What a permission answer approved stays what it approved, through the real server stack.

Once a question named a tool call, the agent can neither rename the call (its title stays) nor
run another command for it than the one the question named: another command is a new question
(about that command, so an "always" answer to it is keyed on what runs), and a call the user
refused runs no command at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness import answer_permissions, running

from acp_server.acp.handlers import AcpAgent
from adapters.base import RuntimeAdapter, Sink, ToolRefused, TurnInput
from adapters.callable import SimpleAdapter
from adapters.events import StopReason
from adapters.scripted import ScriptedAdapter


def questions(editor) -> list[dict[str, Any]]:
    return [r["params"]["toolCall"] for r in editor.server_requests if r["method"] == "session/request_permission"]


def titles(editor, sid: str) -> list[str]:
    return [u["title"] for u in editor.updates[sid] if u["sessionUpdate"].startswith("tool_call") and "title" in u]


async def play(adapter: RuntimeAdapter, cwd: Path, *answers: str, prompts: tuple[str, ...] = ("go",)):
    async with running(AcpAgent(adapter)) as editor:
        editor.handlers["session/request_permission"] = answer_permissions(*answers)
        await editor.initialize()
        sid = await editor.new_session(cwd)
        for prompt in prompts:
            await editor.prompt(sid, prompt)
        return editor, sid


class Renaming(SimpleAdapter):
    """Asks about `ls`, renames the call before and after the answer, then runs `ls`."""

    def run_turn(self, turn: TurnInput, sink: Sink) -> StopReason:
        tid = sink.tool_call("list files", kind="execute", raw_input={"command": "ls"})
        sink.tool_update(tid, title="ls")
        if sink.request_permission(tid).allowed:
            sink.tool_update(tid, title="rm -rf ~")
            sink.run_command("ls", tool_call_id=tid)
            sink.tool_update(tid, status="completed")
        return "end_turn"


class Insisting(SimpleAdapter):
    """Runs its command whatever the answer was."""

    def run_turn(self, turn: TurnInput, sink: Sink) -> StopReason:
        tid = sink.tool_call("touch pwned", kind="execute", raw_input={"command": "touch pwned"})
        sink.request_permission(tid)
        try:
            sink.run_command("touch pwned", tool_call_id=tid)
        except ToolRefused as exc:
            sink.text(str(exc))
        return "end_turn"


async def test_a_question_shows_the_call_under_its_latest_title(tmp_path):
    editor, _ = await play(Renaming(), tmp_path, "allow_once")
    (question,) = questions(editor)
    assert question["title"] == "ls"


async def test_a_call_keeps_the_title_its_question_showed_once_it_was_asked_about(tmp_path):
    editor, sid = await play(Renaming(), tmp_path, "allow_once")
    assert titles(editor, sid) == ["list files", "ls"]  # started, then renamed before the question
    assert editor.updates[sid][-1]["status"] == "completed"


async def test_a_command_other_than_the_one_approved_is_asked_about_and_remembered_by_what_runs(tmp_path):
    step = {"tool": "ls", "kind": "execute", "input": {"command": "ls"}, "ask": True, "run": "touch pwned"}
    scenarios = [{"match": "go", "steps": [step]}]
    editor, sid = await play(
        ScriptedAdapter.from_data({"scenarios": scenarios}),
        tmp_path,
        "allow_always",
        "reject_once",
        prompts=("go", "/permissions"),
    )
    first, second = questions(editor)
    assert (first["rawInput"], second["rawInput"]) == ({"command": "ls"}, {"command": "touch pwned"})
    assert second["title"] == "Run `touch pwned`"
    assert not (tmp_path / "pwned").exists()
    assert "1. always allow `command:ls`" in editor.text(sid)
    assert "2." not in editor.text(sid)


async def test_a_call_the_user_refused_runs_no_command(tmp_path):
    editor, sid = await play(Insisting(), tmp_path, "reject_once")
    assert not (tmp_path / "pwned").exists()
    assert editor.text(sid) == "Refused: this tool call was not allowed"


async def test_a_question_about_a_call_with_a_secret_shows_it_redacted_as_the_journal_keeps_it(tmp_path):
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8J9k0" * 2
    command = f"curl -H 'Authorization: Bearer {key}' https://api.example.com"
    step = {"tool": command, "kind": "execute", "ask": True, "input": {"command": command}}
    adapter = ScriptedAdapter.from_data({"scenarios": [{"match": "", "steps": [step]}]})
    editor, sid = await play(adapter, tmp_path, "reject_once")
    (asked,) = [r["params"] for r in editor.server_requests if r["method"] == "session/request_permission"]
    assert key not in str(asked)
    assert "[REDACTED]" in asked["toolCall"]["title"] and "[REDACTED]" in str(asked["toolCall"]["rawInput"])
    (started,) = [u for u in editor.updates[sid] if u["sessionUpdate"] == "tool_call"]
    assert asked["toolCall"]["title"] == started["title"]  # the question names the call the editor was shown
