"""The real process over real pipes: a clean wire, errors, and a clean exit on EOF or SIGTERM."""

from __future__ import annotations

import json
import os

import pytest
from stdio_server import StdioServer

from acp_server.rpc.errors import PARSE_ERROR

SCRIPT = {
    "scenarios": [
        {"match": "stray", "steps": [{"say": "before "}, {"stdout": "STRAY PRINT\n"}, {"say": "after"}]},
        {"match": "slow", "steps": [{"say": "working"}, {"sleep": 60}]},
    ]
}


@pytest.fixture
def server(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    servers = []

    def start(*extra: str) -> StdioServer:
        server = StdioServer("--agent", "scripted", "--script", str(script), *extra, cwd=str(tmp_path))
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.kill()


def test_a_print_from_the_agent_never_reaches_the_wire(server, tmp_path):
    srv = server()
    sid = srv.start_session(str(tmp_path))
    result = srv.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "stray"}]})
    assert result == {"stopReason": "end_turn"}
    srv.close_stdin()
    assert srv.wait() == 0
    srv.remaining_frames()
    updates = [f["params"]["update"] for f in srv.frames if f.get("method") == "session/update"]
    chunks = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert "".join(chunks) == "before after"
    assert b"STRAY PRINT" in srv.stderr


def test_a_garbage_line_gets_a_parse_error_and_the_process_keeps_serving(server, tmp_path):
    srv = server()
    srv.send_raw(b"this is not json\n")
    frame = srv.next_frame()
    assert frame["id"] is None and frame["error"]["code"] == PARSE_ERROR
    sid = srv.start_session(str(tmp_path))
    assert sid.startswith("sess_")


@pytest.mark.parametrize("stop", ["eof", "sigterm"])
def test_eof_or_sigterm_cancels_the_running_turn_and_exits_zero(server, tmp_path, stop):
    srv = server()
    sid = srv.start_session(str(tmp_path))
    prompt_id = srv.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "slow"}]})
    assert srv.next_frame()["params"]["update"]["sessionUpdate"] == "available_commands_update"
    assert srv.next_frame()["params"]["update"]["content"]["text"] == "working"
    srv.close_stdin() if stop == "eof" else srv.terminate()
    assert srv.wait(timeout=10) == 0
    answers = [f for f in srv.remaining_frames() if f.get("id") == prompt_id]
    assert answers == [{"jsonrpc": "2.0", "id": prompt_id, "result": {"stopReason": "cancelled"}}]


def test_a_server_whose_stdin_is_dev_null_ends_cleanly_at_once(tmp_path):
    import subprocess
    import sys

    # The timeout is a deadline (the server used to wait for ever), not a measured duration.
    with open(os.devnull, "rb") as devnull:
        done = subprocess.run(
            [sys.executable, "-m", "acp_server", "--agent", "echo"],
            stdin=devnull,
            capture_output=True,
            text=True,
            timeout=30,
            cwd=tmp_path,
        )
    assert (done.returncode, done.stdout) == (0, "")
    assert "Traceback" not in done.stderr


def test_help_explains_every_option_and_its_environment_variable():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "acp_server", "--help"], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    for option in [
        "--agent",
        "--script",
        "--log-level",
        "--log-file",
        "--max-workers",
        "--permission-timeout",
        "--max-frame-bytes",
    ]:
        assert option in out
        assert "ACP_SERVER_" + option[2:].replace("-", "_").upper() in out


def test_settings_come_from_the_environment_when_no_flag_is_given(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "ACP_SERVER_AGENT": "nonexistent-agent"}
    done = subprocess.run(
        [sys.executable, "-m", "acp_server"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "unknown agent 'nonexistent-agent'" in done.stderr
    assert done.stdout == ""
