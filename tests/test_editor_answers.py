"""Answers from the editor that do not match the schema, or that are errors: only the operation
that asked fails (its tool call ends `failed` saying what the editor sent), the turn goes on to
its next step and ends normally, and the server serves the next prompt."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest
from harness import FakeEditor, running

from acp_server.acp.handlers import AcpAgent
from acp_server.rpc.errors import INTERNAL_ERROR, RpcError
from adapters.base import Sink, ToolRefused, TurnInput
from adapters.callable import SimpleAdapter
from adapters.events import StopReason, TextContent
from adapters.scripted import ScriptedAdapter

FS = {"fs": {"readTextFile": True, "writeTextFile": True}}
TERMINAL = {"terminal": True}
FORMS = {"elicitation": {"form": {}}}
NEXT = "the next step ran"

READ = {"tool": "Read", "kind": "read", "read_file": "notes.txt"}
WRITE = {"tool": "Edit", "kind": "edit", "write_file": {"path": "notes.txt", "content": "new"}}
ASKED = {"tool": "Edit", "kind": "edit", "ask": True, "write_file": {"path": "notes.txt", "content": "new"}}
RUN = {"tool": "Run", "kind": "execute", "run": "echo hi"}


def scripted(step: dict[str, Any]) -> AcpAgent:
    steps = [step, {"say": NEXT}]
    return AcpAgent(ScriptedAdapter.from_data({"scenarios": [{"match": "go", "steps": steps}]}))


def answering(value: Any):
    async def handler(params: dict[str, Any]) -> Any:
        return value

    return handler


def malformed(method: str, problem: str) -> str:
    return f"The editor's answer to {method} was malformed: {problem}"


def final_update(editor: FakeEditor, sid: str) -> dict[str, Any]:
    """The last `tool_call_update` of the turn's only tool call, with a status."""
    updates = [u for u in editor.updates[sid] if u["sessionUpdate"] == "tool_call_update" and "status" in u]
    assert len({u["toolCallId"] for u in updates}) == 1
    return updates[-1]


def failure_text(update: dict[str, Any]) -> str:
    assert update["status"] == "failed"
    return " ".join(c["content"]["text"] for c in update["content"] if c["type"] == "content")


async def turn_survives(editor: FakeEditor, sid: str) -> None:
    """The turn went on past the failed operation and ended normally; the server still serves."""
    assert editor.text(sid).endswith(NEXT)
    assert (await editor.prompt(sid, "echo this"))["stopReason"] == "end_turn"


CASES = [
    # (capabilities, the step, the method answered wrong, its answer, the failure the user sees)
    (FS, READ, "fs/read_text_file", {"text": "old"}, malformed("fs/read_text_file", "content is required")),
    (
        FS,
        READ,
        "fs/read_text_file",
        ["old"],
        malformed("fs/read_text_file", "the answer must be an object, not an array"),
    ),
    (FS, READ, "fs/read_text_file", None, malformed("fs/read_text_file", "the answer must be an object, not null")),
    (
        FS,
        READ,
        "fs/read_text_file",
        "old",
        malformed("fs/read_text_file", "the answer must be an object, not a string"),
    ),
    (
        FS,
        READ,
        "fs/read_text_file",
        {"content": 7},
        malformed("fs/read_text_file", "content must be a string, not a number"),
    ),
    (
        FS,
        WRITE,
        "fs/write_text_file",
        [],
        malformed("fs/write_text_file", "the answer must be an object, not an array"),
    ),
    (
        FS,
        WRITE,
        "fs/write_text_file",
        "ok",
        malformed("fs/write_text_file", "the answer must be an object, not a string"),
    ),
    (
        {},
        ASKED,
        "session/request_permission",
        {"outcome": {"optionId": "allow_once"}},
        malformed("session/request_permission", "outcome.outcome is required"),
    ),
    (
        {},
        ASKED,
        "session/request_permission",
        {"outcome": {"outcome": "chosen", "optionId": "allow_once"}},
        malformed("session/request_permission", "outcome.outcome has an unknown value"),
    ),
    (
        {},
        ASKED,
        "session/request_permission",
        {"outcome": {"outcome": "selected"}},
        malformed("session/request_permission", "outcome.optionId is required"),
    ),
    (
        {},
        ASKED,
        "session/request_permission",
        None,
        malformed("session/request_permission", "the answer must be an object, not null"),
    ),
    (
        {},
        ASKED,
        "session/request_permission",
        {"outcome": {"outcome": "selected", "optionId": "allow_forever"}},
        "Denied: the editor chose an unknown option",
    ),
    (
        TERMINAL,
        RUN,
        "terminal/create",
        {"terminalId": 5},
        malformed("terminal/create", "terminalId must be a string, not a number"),
    ),
    (TERMINAL, RUN, "terminal/create", {}, malformed("terminal/create", "terminalId is required")),
    (TERMINAL, RUN, "terminal/create", [], malformed("terminal/create", "the answer must be an object, not an array")),
    (
        TERMINAL,
        RUN,
        "terminal/wait_for_exit",
        {"exitCode": "zero"},
        malformed("terminal/wait_for_exit", "exitCode must be an integer, not a string"),
    ),
    (
        TERMINAL,
        RUN,
        "terminal/wait_for_exit",
        "done",
        malformed("terminal/wait_for_exit", "the answer must be an object, not a string"),
    ),
    (TERMINAL, RUN, "terminal/output", {"text": "hi\n"}, malformed("terminal/output", "output is required")),
    (
        TERMINAL,
        RUN,
        "terminal/output",
        {"output": "hi\n", "exitStatus": 0},
        malformed("terminal/output", "exitStatus must be an object, not a number"),
    ),
]


@pytest.mark.parametrize(("capabilities", "step", "method", "answer", "failure"), CASES)
async def test_a_malformed_answer_fails_only_its_tool_call(tmp_path, capabilities, step, method, answer, failure):
    (tmp_path / "notes.txt").write_text("old")
    async with running(scripted(step)) as editor:
        if capabilities is TERMINAL:
            editor.enable_terminal()
        editor.handlers[method] = answering(answer)
        await editor.initialize(capabilities)
        sid = await editor.new_session(tmp_path)
        assert (await editor.prompt(sid, "go"))["stopReason"] == "end_turn"
        assert method in [r["method"] for r in editor.server_requests]
        assert failure_text(final_update(editor, sid)) == failure
        await turn_survives(editor, sid)


async def test_a_null_answer_to_a_write_counts_as_done_as_the_reference_sdk_takes_it(tmp_path):
    (tmp_path / "notes.txt").write_text("old")
    async with running(scripted(WRITE)) as editor:

        async def write_then_null(params: dict[str, Any]) -> None:
            await editor.write_file(params)

        editor.handlers["fs/write_text_file"] = write_then_null
        await editor.initialize(FS)
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "go")
        assert final_update(editor, sid)["status"] == "completed"
        assert (tmp_path / "notes.txt").read_text() == "new"


async def test_a_malformed_answer_to_terminal_release_is_logged_and_the_command_result_stands(tmp_path, caplog):
    async with running(scripted(RUN)) as editor:
        editor.enable_terminal()
        editor.handlers["terminal/release"] = answering([])
        await editor.initialize(TERMINAL)
        sid = await editor.new_session(tmp_path)
        with caplog.at_level(logging.WARNING, logger="acp_server.turns.terminal"):
            await editor.prompt(sid, "go")
        done = final_update(editor, sid)
        assert done["status"] == "completed"
        assert {"type": "content", "content": {"type": "text", "text": "hi\n"}} in done["content"]
        assert malformed("terminal/release", "the answer must be an object, not an array") in caplog.text
        await turn_survives(editor, sid)


class TimedCommand(SimpleAdapter):
    """Runs `sleep 30` with a short deadline, so the server has to `terminal/kill` it."""

    def run_turn(self, turn: TurnInput, sink: Sink) -> StopReason:
        if turn.text != "go":
            sink.text("echo")
            return "end_turn"
        call = sink.tool_call("Run", kind="execute")
        try:
            sink.run_command("sleep 30", tool_call_id=call, timeout=0.01)
            sink.tool_update(call, status="completed")
        except ToolRefused as exc:
            sink.tool_update(call, status="failed", content=[TextContent(str(exc))])
        sink.text(NEXT)
        return "end_turn"


async def test_a_malformed_answer_to_terminal_kill_fails_the_command(tmp_path):
    async with running(AcpAgent(TimedCommand())) as editor:
        editor.enable_terminal()
        editor.never_answer("terminal/wait_for_exit")  # the deadline passes, so the server kills
        editor.handlers["terminal/kill"] = answering("killed")
        await editor.initialize(TERMINAL)
        sid = await editor.new_session(tmp_path)
        assert (await editor.prompt(sid, "go"))["stopReason"] == "end_turn"
        failure = malformed("terminal/kill", "the answer must be an object, not a string")
        assert failure_text(final_update(editor, sid)) == failure
        await turn_survives(editor, sid)


# --- questions -----------------------------------------------------------------------------

QUESTION = {"ask_user": "Which colour?", "choices": ["red", "blue"]}
OPEN_QUESTION = {"ask_user": "Which colour?"}


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ({"content": {"answer": "red"}}, "action is required"),
        ({"action": 1}, "action must be a string, not a number"),
        ({"action": "accept", "content": "red"}, "content must be an object, not a string"),
        ([], "the answer must be an object, not an array"),
    ],
)
async def test_a_malformed_form_answer_is_a_declined_question(tmp_path, answer, problem):
    async with running(scripted(OPEN_QUESTION)) as editor:
        editor.handlers["elicitation/create"] = answering(answer)
        await editor.initialize(FORMS)
        sid = await editor.new_session(tmp_path)
        assert (await editor.prompt(sid, "go"))["stopReason"] == "end_turn"
        said = f"Which colour? → (no answer: {malformed('elicitation/create', problem)})\n"
        assert editor.text(sid) == said + NEXT
        await turn_survives(editor, sid)


async def test_a_malformed_answer_to_a_question_with_choices_fails_its_own_tool_call(tmp_path):
    async with running(scripted(QUESTION)) as editor:
        editor.handlers["session/request_permission"] = answering({"outcome": "selected"})
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert (await editor.prompt(sid, "go"))["stopReason"] == "end_turn"
        failure = malformed("session/request_permission", "outcome must be an object, not a string")
        assert failure_text(final_update(editor, sid)) == failure
        assert editor.text(sid) == f"Which colour? → (no answer: {failure})\n{NEXT}"
        await turn_survives(editor, sid)


# --- error answers -------------------------------------------------------------------------


def refusing(data: Any):
    async def handler(params: dict[str, Any]) -> Any:
        raise RpcError(INTERNAL_ERROR, "Internal error", data)

    return handler


@pytest.mark.parametrize(
    ("data", "shown"),
    [
        (
            {"details": "Permission denied for terminal/create"},
            "Internal error (Permission denied for terminal/create)",
        ),
        ("Permission denied for terminal/create", "Internal error (Permission denied for terminal/create)"),
        ({"uri": "/nowhere"}, 'Internal error ({"uri":"/nowhere"})'),
        (None, "Internal error"),
    ],
)
async def test_an_error_answer_shows_the_details_its_data_carries(tmp_path, data, shown):
    async with running(scripted(RUN)) as editor:
        editor.enable_terminal()
        editor.handlers["terminal/create"] = refusing(data)
        await editor.initialize(TERMINAL)
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "go")
        assert failure_text(final_update(editor, sid)) == f"The editor refused terminal/create: {shown}"
        await turn_survives(editor, sid)


async def test_huge_error_details_are_cut_short_and_kept_on_one_line(tmp_path):
    trace = "Error: disk on fire\n" + "    at somewhere (file.js:1:1)\n" * 50_000
    async with running(scripted(READ)) as editor:
        editor.handlers["fs/read_text_file"] = refusing({"details": trace})
        await editor.initialize(FS)
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "go")
        text = failure_text(final_update(editor, sid))
        assert text.startswith("The editor refused fs/read_text_file: Internal error (Error: disk on fire at somewhere")
        assert text.endswith("…)")
        assert "\n" not in text
        assert len(text) < 300
        await turn_survives(editor, sid)


async def test_an_error_answer_to_a_form_shows_its_details(tmp_path):
    async with running(scripted(OPEN_QUESTION)) as editor:
        editor.handlers["elicitation/create"] = refusing({"details": "forms are switched off"})
        await editor.initialize(FORMS)
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "go")
        refused = "The editor refused elicitation/create: Internal error (forms are switched off)"
        assert editor.text(sid) == f"Which colour? → (no answer: {refused})\n{NEXT}"


async def test_an_error_answer_to_a_permission_question_shows_its_details(tmp_path):
    (tmp_path / "notes.txt").write_text("old")
    async with running(scripted(ASKED)) as editor:
        editor.handlers["session/request_permission"] = refusing({"details": "no UI attached"})
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "go")
        assert (
            failure_text(final_update(editor, sid))
            == "Denied: the editor refused to ask (Internal error (no UI attached))"
        )
        assert (tmp_path / "notes.txt").read_text() == "old"
        await turn_survives(editor, sid)


async def test_many_malformed_answers_in_a_row_leave_the_server_serving(tmp_path):
    (tmp_path / "notes.txt").write_text("old")
    async with running(scripted(READ)) as editor:
        editor.handlers["fs/read_text_file"] = answering({"text": "old"})
        await editor.initialize(FS)
        sid = await editor.new_session(tmp_path)
        with anyio.fail_after(30):
            for _ in range(20):
                assert (await editor.prompt(sid, "go"))["stopReason"] == "end_turn"
        await turn_survives(editor, sid)


async def test_a_huge_error_message_is_cut_short_too(tmp_path):
    async def shouting(params: dict[str, Any]) -> Any:
        raise RpcError(INTERNAL_ERROR, "Internal error: " + "x" * 100_000, [1] * 100_000)

    async with running(scripted(READ)) as editor:
        editor.handlers["fs/read_text_file"] = shouting
        await editor.initialize(FS)
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "go")
        message = ("Internal error: " + "x" * 200)[:199] + "…"
        data = ",".join(["[1"] + ["1"] * 100)[:199] + "…"
        assert failure_text(final_update(editor, sid)) == f"The editor refused fs/read_text_file: {message} ({data})"
        await turn_survives(editor, sid)
