"""`acp-server prompt`: the real client against the real server, both as subprocesses.

Each test runs `python -m acp_server prompt ...` in a temporary directory against the echo or
the scripted agent and checks what a user sees: stdout, stderr, files on disk, exit status.
The client's file-system handlers are also called directly for the cases no script reaches.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from acp_server.cli.local import read_text_file, write_text_file
from acp_server.rpc.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND, RpcError

PROMPT = [sys.executable, "-m", "acp_server", "prompt"]
TIMEOUT = 60


def scenario(tmp_path: Path, *steps: dict[str, Any]) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"scenarios": [{"match": "go", "steps": list(steps)}]}), encoding="utf-8")
    return path


def prompt(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    # No stdin and a session of its own: no terminal to ask on, unless a test provides one.
    return subprocess.run(
        [*PROMPT, *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def scripted(tmp_path: Path, *steps: dict[str, Any], flags: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return prompt(tmp_path, "--agent", "scripted", "--script", str(scenario(tmp_path, *steps)), *flags, "go")


def start_scripted(tmp_path: Path, *steps: dict[str, Any], stdin: Any = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    argv = [*PROMPT, "--agent", "scripted", "--script", str(scenario(tmp_path, *steps)), "go"]
    return subprocess.Popen(
        argv, cwd=tmp_path, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )


def read_until(stream: Any, marker: bytes, timeout: float = 30) -> bytes:
    """Bytes from a pipe up to and including `marker`; fails after `timeout` seconds."""
    data = b""
    deadline = time.monotonic() + timeout
    while marker not in data:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no {marker!r} within {timeout} s; got {data!r}"
        ready, _, _ = select.select([stream], [], [], remaining)
        if ready:
            chunk = os.read(stream.fileno(), 4096)
            assert chunk, f"the stream ended before {marker!r}; got {data!r}"
            data += chunk
    return data


EDIT_A = {"tool": "Edit a.txt", "kind": "edit", "ask": True, "write_file": {"path": "a.txt", "content": "new\n"}}


# --- turns that end normally -------------------------------------------------------------


def test_the_echo_agent_prints_the_prompt_and_exits_zero(tmp_path: Path) -> None:
    result = prompt(tmp_path, "--agent", "echo", "hello there")

    assert (result.returncode, result.stdout) == (0, "hello there\n")


def test_thoughts_text_and_a_file_read_through_the_client_are_shown_in_order(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "notes.txt").write_text("first line\nsecond line\n", encoding="utf-8")
    steps = [
        {"think": "pondering"},
        {"say": "Here goes"},
        {"tool": "Read notes", "kind": "read", "read_file": "notes.txt"},
        {"say": "done"},
    ]
    result = prompt(tmp_path, "--agent", "scripted", "--script", str(scenario(tmp_path, *steps)), "--cwd", "work", "go")

    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "(thinking) pondering\n"
        "Here goes\n"
        "[tool] Read notes (read) pending\n"
        "[tool] Read notes -> in_progress\n"
        "[tool] Read notes -> completed\n"
        "    first line\n"
        "    second line\n"
        "done\n"
    )


def test_a_plan_usage_and_title_are_shown_one_line_each(tmp_path: Path) -> None:
    result = scripted(
        tmp_path,
        {
            "plan": [
                {"content": "look", "status": "completed"},
                {"content": "fix", "status": "in_progress"},
                {"content": "test"},
            ]
        },
        {"usage": {"inputTokens": 1500, "outputTokens": 500, "costUsd": 0.25}},
        {"title": "Fixing things"},
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "[plan]\n  [x] look\n  [~] fix\n  [ ] test\n"
        "[usage] 2000/200000 tokens (1.0%), cost 0.25 USD\n"
        "[title] Fixing things\n"
    )


def test_long_tool_output_is_cut_after_twenty_lines(tmp_path: Path) -> None:
    output = "\n".join(f"line {n}" for n in range(1, 31))
    result = scripted(tmp_path, {"tool": "List", "kind": "search", "result": output})

    assert result.returncode == 0, result.stderr
    assert "    line 20\n    ... (10 more lines)\n" in result.stdout
    assert "line 21" not in result.stdout


def test_json_mode_prints_every_update_as_one_json_object_per_line(tmp_path: Path) -> None:
    result = scripted(tmp_path, {"think": "hmm"}, {"say": "hi"}, {"tool": "Look", "kind": "read"}, flags=("--json",))

    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert all(isinstance(line, dict) and set(line) >= {"sessionId", "update"} for line in lines)
    assert len({line["sessionId"] for line in lines}) == 1
    kinds = [line["update"]["sessionUpdate"] for line in lines]
    assert kinds[:4] == ["available_commands_update", "agent_thought_chunk", "agent_message_chunk", "tool_call"]
    assert set(kinds[4:]) == {"tool_call_update"}


def test_stray_output_of_the_agent_lands_on_stderr_and_never_breaks_the_client(tmp_path: Path) -> None:
    result = scripted(tmp_path, {"say": "before "}, {"stdout": "STRAY"}, {"say": "after"})

    assert result.returncode == 0, result.stderr
    assert result.stdout == "before after\n"
    assert "STRAY" in result.stderr


# --- permission ----------------------------------------------------------------------------


def test_allow_lets_the_agent_write_the_file_and_shows_the_diff(tmp_path: Path) -> None:
    target = tmp_path.resolve() / "a.txt"
    target.write_text("old\n", encoding="utf-8")
    result = scripted(tmp_path, EDIT_A, flags=("--allow",))

    assert result.returncode == 0, result.stderr
    assert target.read_text(encoding="utf-8") == "new\n"
    assert "Permission requested: Edit a.txt (edit): allowed by --allow\n" in result.stderr
    assert "[tool] Edit a.txt -> completed\n" in result.stdout
    assert f"    --- {target}\n    +++ {target}\n    @@ -1 +1 @@\n    -old\n    +new\n" in result.stdout


def test_deny_leaves_the_file_untouched_and_the_tool_fails(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("old\n", encoding="utf-8")
    result = scripted(tmp_path, EDIT_A, flags=("--deny",))

    assert result.returncode == 0, result.stderr
    assert target.read_text(encoding="utf-8") == "old\n"
    assert "Permission requested: Edit a.txt (edit): rejected by --deny\n" in result.stderr
    assert "[tool] Edit a.txt -> failed\n    Permission denied by the user\n" in result.stdout


def test_without_a_terminal_or_a_flag_the_tool_fails_as_nobody_could_be_asked_not_as_the_users_no(
    tmp_path: Path,
) -> None:
    target = tmp_path / "a.txt"
    target.write_text("old\n", encoding="utf-8")
    result = scripted(tmp_path, EDIT_A)

    nobody = "nobody could be asked: acp-server prompt has no terminal; run it with --allow or --deny"
    assert result.returncode == 0, result.stderr
    assert target.read_text(encoding="utf-8") == "old\n"
    assert f"Permission requested: Edit a.txt (edit): {nobody}\n" in result.stderr
    assert f"[tool] Edit a.txt -> failed\n    Denied: the editor refused to ask ({nobody})\n" in result.stdout
    assert "by the user" not in result.stdout


def test_without_allow_or_deny_the_question_is_asked_on_the_terminal(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("old\n", encoding="utf-8")
    terminal, stdin = os.openpty()
    try:
        with start_scripted(tmp_path, EDIT_A, stdin=stdin) as proc:
            os.close(stdin)
            question = read_until(proc.stderr, b"Choose 1-4: ").decode()
            os.write(terminal, b"1\n")
            out, _ = proc.communicate(timeout=TIMEOUT)
    finally:
        os.close(terminal)

    assert proc.returncode == 0
    assert "Permission requested: Edit a.txt (edit)\n  1) Allow once\n" in question
    assert "  3) Reject\n" in question
    assert target.read_text(encoding="utf-8") == "new\n"
    assert b"[tool] Edit a.txt -> completed\n" in out


def test_ctrl_c_while_the_question_is_open_answers_it_cancelled_and_exits_130(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("old\n", encoding="utf-8")
    terminal, stdin = os.openpty()
    try:
        with start_scripted(tmp_path, EDIT_A, {"say": "never"}, stdin=stdin) as proc:
            os.close(stdin)
            read_until(proc.stderr, b"Choose 1-4: ")
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=TIMEOUT)
    finally:
        os.close(terminal)

    assert proc.returncode == 130
    assert target.read_text(encoding="utf-8") == "old\n"
    assert b"never" not in out


# --- how the turn ends ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "status"),
    [
        ("end_turn", 0),
        ("refusal", 3),
        ("max_tokens", 4),
        ("max_turn_requests", 4),
    ],
)
def test_the_stop_reason_becomes_the_exit_status(tmp_path: Path, reason: str, status: int) -> None:
    result = scripted(tmp_path, {"say": "partial"}, {"stop": reason})

    assert result.returncode == status, result.stderr
    assert result.stdout == "partial\n"


def test_an_agent_error_exits_one_with_the_message_on_stderr(tmp_path: Path) -> None:
    result = scripted(tmp_path, {"say": "trying"}, {"error": "the model is down"})

    assert result.returncode == 1
    assert result.stdout == "trying\n"
    assert "error: the model is down" in result.stderr


def test_a_server_that_cannot_start_exits_two_with_a_clear_message(tmp_path: Path) -> None:
    result = prompt(tmp_path, "--agent", "nosuch", "hello")

    assert result.returncode == 2
    assert result.stderr.startswith("acp-server: error: unknown agent 'nosuch'")
    assert result.stderr.endswith(" (see acp-server --help)\n") and result.stderr.count("\n") == 1


def test_ctrl_c_during_a_turn_cancels_it_and_exits_130(tmp_path: Path) -> None:
    with start_scripted(tmp_path, {"say": "started\n"}, {"sleep": 30}, {"say": "never"}) as proc:
        try:
            assert read_until(proc.stdout, b"started\n") == b"started\n"
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=20)  # well before the 30 s sleep would end
        finally:
            if proc.poll() is None:
                proc.kill()

    assert proc.returncode == 130
    assert b"never" not in out
    assert b"cancelling the turn" in err


# --- the client's file system, called directly ----------------------------------------------


async def test_reading_a_file_honours_the_one_based_line_and_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("1\n2\n3\n4\n", encoding="utf-8")

    assert await read_text_file({"path": str(path)}) == {"content": "1\n2\n3\n4\n"}
    assert await read_text_file({"path": str(path), "line": 2, "limit": 2}) == {"content": "2\n3\n"}
    assert await read_text_file({"path": str(path), "line": 3}) == {"content": "3\n4\n"}
    assert await read_text_file({"path": str(path), "limit": 1}) == {"content": "1\n"}


async def test_reading_a_missing_file_is_resource_not_found(tmp_path: Path) -> None:
    with pytest.raises(RpcError) as caught:
        await read_text_file({"path": str(tmp_path / "missing.txt")})

    assert caught.value.code == RESOURCE_NOT_FOUND


async def test_a_relative_path_is_invalid_params(tmp_path: Path) -> None:
    with pytest.raises(RpcError) as caught:
        await write_text_file({"path": "relative.txt", "content": "x"})

    assert caught.value.code == INVALID_PARAMS


async def test_writing_creates_the_file_and_its_missing_directories(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "f.txt"

    assert await write_text_file({"path": str(path), "content": "hello\n"}) == {}
    assert path.read_text(encoding="utf-8") == "hello\n"
