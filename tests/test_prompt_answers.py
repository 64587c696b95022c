"""The `prompt` client against a server that answers or asks wrongly: each malformed answer gets
a precise error naming what was wrong and no traceback, and a malformed request from the server
gets -32602 naming its failing fields while the turn goes on.

The client runs in this process (`PromptClient`, as `acp-server prompt` runs it) against
tests/answering_server.py, a real subprocess over real pipes that says what the test planned.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_server.cli.prompt import EXIT_ERROR, EXIT_STARTUP, PromptClient
from acp_server.rpc.errors import INVALID_PARAMS

SERVER = Path(__file__).with_name("answering_server.py")


async def converse(tmp_path: Path, *, answers: dict[str, Any], requests: tuple[dict[str, Any], ...] = ()) -> int:
    plan = tmp_path / "plan.json"
    record = tmp_path / "record.jsonl"
    plan.write_text(json.dumps({"answers": answers, "requests": list(requests), "record": str(record)}))
    args = argparse.Namespace(json=False, cwd=str(tmp_path), text="go", allow=True, deny=False, max_frame_bytes=1 << 20)
    # The client takes a started process, as `run_prompt_command` gives it one.
    process = subprocess.Popen(  # noqa: ASYNC220
        [sys.executable, str(SERVER), str(plan)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        return await PromptClient(args, process).run()
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def responses(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "record.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(
    ("method", "answer", "problem"),
    [
        ("initialize", [], "the answer must be an object, not an array"),
        ("initialize", None, "the answer must be an object, not null"),
        ("initialize", {"protocolVersion": "one"}, "protocolVersion must be an integer, not a string"),
        ("initialize", {"agentCapabilities": {}}, "protocolVersion is required"),
        ("session/new", {"session": "s1"}, "sessionId is required"),
        ("session/new", {"sessionId": 7}, "sessionId must be a string, not a number"),
        ("session/new", "s1", "the answer must be an object, not a string"),
    ],
)
async def test_a_malformed_answer_while_starting_names_what_was_wrong(tmp_path, capfd, method, answer, problem):
    status = await converse(tmp_path, answers={method: answer})

    err = capfd.readouterr().err
    assert status == EXIT_STARTUP
    assert f"error: the ACP server did not start: its answer to {method} was malformed: {problem}\n" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ({"stop": "end_turn"}, "stopReason is required"),
        ({"stopReason": 0}, "stopReason must be a string, not a number"),
        (None, "the answer must be an object, not null"),
    ],
)
async def test_a_malformed_answer_to_the_prompt_names_what_was_wrong(tmp_path, capfd, answer, problem):
    status = await converse(tmp_path, answers={"session/prompt": answer})

    err = capfd.readouterr().err
    assert status == EXIT_ERROR
    assert f"error: the ACP server failed the turn: its answer to session/prompt was malformed: {problem}\n" in err
    assert "Traceback" not in err


GOOD_OPTIONS = [{"optionId": "yes", "name": "Allow once", "kind": "allow_once"}]


@pytest.mark.parametrize(
    ("method", "params", "problems"),
    [
        ("session/request_permission", {"toolCall": "Edit", "options": GOOD_OPTIONS}, ["toolCall must be an object"]),
        (
            "session/request_permission",
            {"toolCall": {"toolCallId": "c1"}, "options": [{"optionId": 1, "name": "Allow", "kind": "allow_once"}]},
            ["options.0.optionId must be a string"],
        ),
        ("session/request_permission", {"toolCall": {"toolCallId": "c1"}}, ["options is required"]),
        ("fs/read_text_file", {"path": 5}, ["path must be a string"]),
        (
            "fs/read_text_file",
            {"path": "/tmp/x", "line": True, "limit": -1},
            [
                "line must be an integer",
                "limit must be a non-negative integer",
            ],
        ),
        ("fs/write_text_file", {"path": "notes.txt", "content": "x"}, ["path must be an absolute path"]),
        ("fs/write_text_file", {"path": "/tmp/never-written.txt"}, ["content is required"]),
    ],
)
async def test_a_malformed_request_from_the_server_is_invalid_params_and_the_turn_goes_on(
    tmp_path, capfd, method, params, problems
):
    status = await converse(
        tmp_path, answers={}, requests=({"method": method, "params": {"sessionId": "s1", **params}},)
    )

    err = capfd.readouterr().err
    assert status == 0
    [response] = responses(tmp_path)
    assert response["error"]["code"] == INVALID_PARAMS
    assert [f"{e['field']} {e['problem']}" for e in response["error"]["data"]["errors"]] == problems
    assert "Traceback" not in err


async def test_a_well_formed_permission_request_is_still_answered(tmp_path):
    request = {"toolCall": {"toolCallId": "c1", "title": "Edit"}, "options": GOOD_OPTIONS}
    status = await converse(
        tmp_path,
        answers={},
        requests=({"method": "session/request_permission", "params": {"sessionId": "s1", **request}},),
    )

    assert status == 0
    assert responses(tmp_path)[0]["result"] == {"outcome": {"outcome": "selected", "optionId": "yes"}}
