"""Runner mode without writing a client: `acp-server prompt --session` continues a stored session,
`acp-server attach` shows a running turn live until it ends (through its runner, which then asks
this terminal its questions, or by following the journal of another server), and `runner stop
--pid` stops one runner. Real processes throughout: fronts, runners, servers and the CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from runner_fronts import Front, cli, gone, runners, short_runtime_dir, wait_until
from stdio_server import StdioServer
from test_prompt_cli import read_until as read_pipe_until

GATE = {"tool": "Edit notes", "kind": "edit", "ask": True, "input": {"path": "notes"}, "result": "edited"}
SCRIPT = {
    "scenarios": [
        {"match": "gate", "steps": [{"say": "before "}, GATE, {"say": "after"}]},
        {"match": "slow", "steps": [{"say": "tick "}, {"sleep": 60}, {"say": "never shown"}]},
        {"match": "", "steps": [{"say": "short reply"}]},
    ]
}


@pytest.fixture
def env(tmp_path, monkeypatch):
    """The scripted agent's options, a journal, and runtime and data directories of the test's own."""
    run_dir = short_runtime_dir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", run_dir)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    yield ("--agent", "scripted", "--script", str(script), "--db", str(tmp_path / "journal.db"))
    started = [r["pid"] for r in runners()]
    cli("runner", "stop")
    for pid in started:
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(run_dir, ignore_errors=True)


def acp(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_server", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        timeout=60,
    )


def start(tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "acp_server", *args],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def frames_until(server: StdioServer, predicate: Any) -> list[dict[str, Any]]:
    frames = []
    while True:
        frame = server.next_frame()
        assert frame is not None, f"the server closed its stdout{server.exit_report()}"
        frames.append(frame)
        if predicate(frame):
            return frames


def is_permission(frame: dict[str, Any]) -> bool:
    return frame.get("method") == "session/request_permission"


def says(words: str) -> Any:
    def check(frame: dict[str, Any]) -> bool:
        update = frame.get("params", {}).get("update", {}) if frame.get("method") == "session/update" else {}
        return update.get("sessionUpdate") == "agent_message_chunk" and update["content"]["text"] == words

    return check


def start_turn(server: StdioServer, cwd: Path, text: str) -> tuple[str, int]:
    sid = server.start_session(str(cwd))
    return sid, server.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})


def run_states(tmp_path: Path) -> list[str]:
    return [
        row[0] for row in sqlite3.connect(tmp_path / "journal.db").execute("SELECT status FROM runs ORDER BY rowid")
    ]


# --- prompt --session ------------------------------------------------------------------------


def test_prompt_session_continues_a_stored_session_by_a_prefix_without_showing_its_history(tmp_path, env):
    first = acp(tmp_path, "prompt", *env, "hello")
    sid = json.loads(acp(tmp_path, "sessions", *env, "--json").stdout)["sessionId"]
    again = acp(tmp_path, "prompt", *env, "--session", sid.removeprefix("sess_")[:8], "once more")
    assert (first.returncode, first.stdout) == (0, "short reply\n")
    assert (again.returncode, again.stdout) == (0, "short reply\n"), again.stderr
    shown = acp(tmp_path, "show", *env, sid).stdout
    assert shown == "> hello\nshort reply\n> once more\nshort reply\n"  # one session, two turns
    assert acp(tmp_path, "sessions", *env).stdout.count("sess_") == 1


def test_prompt_session_continues_with_the_agent_and_script_the_session_was_made_with(tmp_path, env):
    acp(tmp_path, "prompt", *env, "hello")
    sid = json.loads(acp(tmp_path, "sessions", *env, "--json").stdout)["sessionId"]
    db = env[env.index("--db") + 1]
    elsewhere = tmp_path / "elsewhere"  # the script's path was relative to nothing here
    elsewhere.mkdir()
    again = acp(elsewhere, "prompt", "--db", db, "--session", sid, "once more")
    assert (again.returncode, again.stdout) == (0, "short reply\n"), again.stderr
    assert acp(tmp_path, "show", *env, sid).stdout == "> hello\nshort reply\n> once more\nshort reply\n"


def test_prompt_session_refuses_another_agent_named_outright_with_one_line_naming_the_sessions(tmp_path, env):
    acp(tmp_path, "prompt", *env, "hello")
    sid = json.loads(acp(tmp_path, "sessions", *env, "--json").stdout)["sessionId"]
    db = env[env.index("--db") + 1]
    other = acp(tmp_path, "prompt", "--db", db, "--agent", "echo", "--session", sid, "hi")
    assert other.returncode == 2
    assert other.stderr == (
        f"error: session {sid} is continued by its own agent, 'scripted', not 'echo': "
        "leave --agent out (or start a new session)\n"
    )
    assert acp(tmp_path, "show", *env, sid).stdout == "> hello\nshort reply\n"  # nothing sent


def test_prompt_session_names_what_is_wrong_before_starting_anything(tmp_path, env):
    acp(tmp_path, "prompt", *env, "hello")
    unknown = acp(tmp_path, "prompt", *env, "--session", "nosuch", "hi")
    with_cwd = acp(tmp_path, "prompt", *env, "--session", "sess_", "--cwd", str(tmp_path), "hi")
    assert unknown.returncode == 2 and "error: no session 'nosuch' in the journal" in unknown.stderr
    assert with_cwd.returncode == 2 and "--cwd does not go with --session" in with_cwd.stderr


def test_prompt_session_refuses_a_session_whose_turn_runs_in_another_server(tmp_path, env):
    server = StdioServer(*env, cwd=str(tmp_path))
    try:
        sid, _ = start_turn(server, tmp_path, "gate")
        frames_until(server, is_permission)  # the turn is running, held by the question
        done = acp(tmp_path, "prompt", *env, "--session", sid, "hi")
    finally:
        server.kill()
    assert done.returncode == 2
    assert f"session {sid} has a turn running in process {server.process.pid} (another acp-server)" in done.stderr
    assert f"acp-server attach {sid}" in done.stderr


def test_prompt_session_through_the_runner_answers_the_running_turn_then_runs_behind_it(tmp_path, env):
    editor = Front(*env, cwd=str(tmp_path))
    sid, _ = start_turn(editor, tmp_path, "gate")
    frames_until(editor, is_permission)
    editor.kill_group()  # the editor is gone; the turn waits in the runner for someone to answer

    done = acp(tmp_path, "prompt", "--runner", *env, "--allow", "--session", sid, "next")
    assert done.returncode == 0, done.stderr
    # The load's replay ("before ") is not shown; the rest of the running turn is, then the new one.
    assert (
        done.stdout
        == "[tool] Edit notes -> in_progress\n[tool] Edit notes -> completed\n    edited\nafter\nshort reply\n"
    )
    assert "Permission requested: Edit notes (edit): allowed by --allow" in done.stderr
    assert run_states(tmp_path) == ["completed", "completed"]


# --- attach ----------------------------------------------------------------------------------


def test_attach_through_the_runner_shows_the_turn_from_its_start_answers_its_question_and_ends_with_it(tmp_path, env):
    editor = Front(*env, cwd=str(tmp_path))
    sid, _ = start_turn(editor, tmp_path, "gate")
    asked = frames_until(editor, is_permission)[-1]

    done = acp(tmp_path, "attach", *env, "--allow", sid.removeprefix("sess_")[:8])
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "> gate\nbefore \n[tool] Edit notes (edit) pending\n[tool] Edit notes -> in_progress\n"
        "[tool] Edit notes -> completed\n    edited\nafter\n"
    )
    assert "Permission requested: Edit notes (edit): allowed by --allow" in done.stderr
    # The question went from the editor to the terminal that attached, as to a second editor.
    withdrawn = frames_until(editor, lambda f: f.get("method") == "$/cancel_request")[-1]
    assert withdrawn["params"] == {"requestId": asked["id"]}
    assert run_states(tmp_path) == ["completed"]


def test_attach_without_a_terminal_names_itself_when_nobody_can_answer_a_question(tmp_path, env):
    editor = Front(*env, cwd=str(tmp_path))
    sid, _ = start_turn(editor, tmp_path, "gate")
    frames_until(editor, is_permission)

    done = acp(tmp_path, "attach", *env, sid)
    assert "nobody could be asked: acp-server attach has no terminal; run it with --allow or --deny" in done.stderr
    assert "acp-server prompt" not in done.stderr


def test_ctrl_c_stops_watching_through_the_runner_and_the_turn_goes_on(tmp_path, env):
    editor = Front(*env, cwd=str(tmp_path))
    sid, _ = start_turn(editor, tmp_path, "slow")
    frames_until(editor, says("tick "))

    watching = start(tmp_path, "attach", *env, sid)
    assert watching.stdout is not None and watching.stderr is not None
    read_pipe_until(watching.stdout, b"tick ")
    watching.send_signal(signal.SIGINT)
    assert watching.wait(timeout=30) == 130
    assert f"stopped watching; the turn goes on (acp-server attach {sid}" in watching.stderr.read().decode()
    assert [r["liveTurns"] for r in runners()] == [1] and run_states(tmp_path) == ["running"]


def test_attach_follows_the_journal_of_a_turn_in_another_server_until_it_ends(tmp_path, env):
    server = StdioServer(*env, cwd=str(tmp_path))
    try:
        sid, prompted = start_turn(server, tmp_path, "gate")
        asked = frames_until(server, is_permission)[-1]
        watching = start(tmp_path, "attach", *env, sid)
        assert watching.stdout is not None and watching.stderr is not None
        shown = read_pipe_until(watching.stdout, b"[tool] Edit notes (edit) pending\n")
        server.send(
            {
                "jsonrpc": "2.0",
                "id": asked["id"],
                "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
            }
        )
        assert server.response(prompted)["result"]["stopReason"] == "end_turn"
        assert watching.wait(timeout=30) == 0
        shown += watching.stdout.read()
    finally:
        server.kill()
    assert shown.decode() == (
        "> gate\nbefore \n[tool] Edit notes (edit) pending\n[tool] Edit notes -> in_progress\n"
        "[tool] Edit notes -> completed\n    edited\nafter\n"
    )
    assert f"following the turn of session {sid} in process {server.process.pid}" in watching.stderr.read().decode()


def test_attach_says_when_no_turn_is_running_or_no_session_matches(tmp_path, env):
    acp(tmp_path, "prompt", *env, "hello")
    sid = json.loads(acp(tmp_path, "sessions", *env, "--json").stdout)["sessionId"]
    idle = acp(tmp_path, "attach", *env, sid)
    unknown = acp(tmp_path, "attach", *env, "nosuch")
    assert (idle.returncode, idle.stdout) == (1, "")
    assert f"no turn is running in session {sid}; acp-server show {sid} prints the conversation" in idle.stderr
    assert unknown.returncode == 1 and "error: no session 'nosuch' in the journal" in unknown.stderr


# --- runner stop --pid -----------------------------------------------------------------------


def test_runner_stop_pid_stops_that_runner_only(tmp_path, env):
    for workers in ("2", "3"):  # different options: two runners
        front = Front(*env, "--max-workers", workers, cwd=str(tmp_path))
        front.start_session(str(tmp_path))
        front.close_stdin()
        assert front.wait() == 0
    first, second = sorted(r["pid"] for r in runners())

    done = cli("runner", "stop", "--pid", str(first))
    missing = cli("runner", "stop", "--pid", str(first))
    assert (done.returncode, done.stdout) == (0, f"stopped runner pid {first} (cancelled 0 live turn(s))\n")
    wait_until(lambda: gone(first), what="the stopped runner to exit")
    assert [r["pid"] for r in runners()] == [second]
    assert missing.returncode == 1 and f"no runner has pid {first}" in missing.stderr
