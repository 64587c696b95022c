"""An ACP agent below that is missing or will not start, as an editor, `doctor`, `prompt` and a
runner see it: `initialize` is always answered, `session/new` says in one line why the agent did
not start (npm's cause, not its pointer to a log) and how to install it, `doctor` starts each
agent to know, a runner whose agent will not start does not wait out its idle time, and a usage
error is one line that says where the help is. The agents here are real programs on a PATH of
the test's own: a fake `npx` that fails as npm does offline, or nothing at all."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from runner_fronts import Front, ended, short_runtime_dir, stop_runners, wait_until
from stdio_server import StdioServer

from acp_server.downstream.presets import PRESETS
from acp_server.downstream.process import cause
from acp_server.rpc.errors import INTERNAL_ERROR

CAUSE = (
    "FetchError: request to https://registry.npmjs.org/@zed-industries%2fclaude-agent-acp failed, "
    "reason: connect ECONNREFUSED 127.0.0.1:9"
)
# What `npx -y @zed-industries/claude-agent-acp` writes on stderr offline (npm 10, with
# fetch-retries=0, registry unreachable), then it exits 1.
NPM_OFFLINE = f"""npm error code ECONNREFUSED
npm error syscall connect
npm error errno ECONNREFUSED
npm error {CAUSE}
npm error     at ClientRequest.<anonymous> (/usr/lib/node_modules/npm/node_modules/minipass-fetch/lib/index.js:130:14)
npm error     at process.processTicksAndRejections (node:internal/process/task_queues:83:21) {{
npm error   code: 'ECONNREFUSED',
npm error   errno: 'ECONNREFUSED',
npm error   syscall: 'connect',
npm error   address: '127.0.0.1',
npm error   port: 9,
npm error   type: 'system'
npm error }}
npm error
npm error If you are behind a proxy, please make sure that the 'proxy' config is set properly.  See: 'npm help config'
npm error A complete log of this run can be found in: /home/me/.npm/_logs/2026-12-04T01_04_38_086Z-debug-0.log"""
CLAUDE_OFFLINE = f"claude: the agent did not start (it exited: {CAUSE}); install it: {PRESETS['claude'].install}"


@pytest.fixture
def bare_path(tmp_path, monkeypatch):
    """A PATH with nothing on it but what a test puts in `bin` (the server is started by its
    absolute path)."""
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return tmp_path / "bin"


@pytest.fixture
def offline_npx(bare_path):
    """`npx` that fails as npm does with no network (printf is the shell's own: no PATH needed)."""
    lines = " ".join(f"'{line}'" for line in NPM_OFFLINE.replace("'", "'\\''").splitlines())
    npx = bare_path / "npx"
    npx.write_text(f"#!/bin/sh\nprintf '%s\\n' {lines} >&2\nexit 1\n")
    npx.chmod(0o755)
    return npx


def new_session_error(server: StdioServer, cwd: Path) -> dict:
    server.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    frame = server.response(server.request("session/new", {"cwd": str(cwd), "mcpServers": []}))
    assert "error" in frame, frame
    return frame["error"]


def test_npms_cause_is_the_line_that_names_the_error_not_its_pointer_to_a_log():
    assert cause(NPM_OFFLINE.splitlines()) == CAUSE
    assert cause(["Traceback (most recent call last):", '  File "x"', "ModuleNotFoundError: No module named 'y'"]) == (
        "ModuleNotFoundError: No module named 'y'"
    )
    assert cause(["npm error", "just a line"]) == "just a line"
    assert cause([]) is None


def test_with_npx_offline_the_editor_gets_initialize_then_the_cause_and_the_install_line(offline_npx, tmp_path):
    server = StdioServer("--agent", "claude", "--db", str(tmp_path / "j.db"), cwd=str(tmp_path))
    try:
        error = new_session_error(server, tmp_path)
        assert error["code"] == INTERNAL_ERROR
        assert error["message"] == CLAUDE_OFFLINE
    finally:
        server.kill()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_an_agent_that_is_not_installed_is_named_with_its_install_line_at_session_new(name, bare_path, tmp_path):
    server = StdioServer("--agent", name, "--db", str(tmp_path / "j.db"), cwd=str(tmp_path))
    try:
        error = new_session_error(server, tmp_path)
        program = PRESETS[name].candidates[0][0]
        assert error["code"] == INTERNAL_ERROR
        assert error["message"] == (
            f"{name}: the agent did not start ({program!r} was not found on PATH); install it: {PRESETS[name].install}"
        )
    finally:
        server.kill()


def test_a_missing_command_after_the_separator_is_named_at_session_new(bare_path, tmp_path):
    args = ("--agent", "acp", "--db", str(tmp_path / "j.db"), "--", "no-such-agent-xyz", "--acp")
    server = StdioServer(*args, cwd=str(tmp_path))
    try:
        error = new_session_error(server, tmp_path)
        assert error["message"] == "acp: the agent did not start ('no-such-agent-xyz' was not found on PATH)"
    finally:
        server.kill()


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_server", *args], input="", capture_output=True, text=True, timeout=120, cwd=cwd
    )


def test_doctor_starts_the_selected_agent_and_says_why_it_did_not_start_and_how_to_install_it(offline_npx, tmp_path):
    done = run("doctor", "--agent", "claude", "--db", str(tmp_path / "j.db"), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    rows = {line[2:].split()[0]: line[2:] for line in done.stdout.splitlines() if line[:2] in ("  ", "> ")}
    assert rows["claude"].split(None, 2)[1:] == ["unhealthy", CLAUDE_OFFLINE]
    assert f"The selected agent 'claude' is unhealthy: {CLAUDE_OFFLINE}" in done.stdout
    gemini = PRESETS["gemini"].install
    assert rows["gemini"].split(None, 2)[1:] == [
        "unhealthy",
        f"gemini: the agent did not start ('gemini' was not found on PATH); install it: {gemini}",
    ]
    assert "complete log" not in done.stdout + done.stderr
    # Not selected: looked for, not started (starting it could fetch packages or make its home).
    assert rows["codex"].split(None, 2)[1:] == [
        "found",
        "runs npx -y @zed-industries/codex-acp; not started here (doctor --agent codex starts it)",
    ]


def test_doctor_says_an_agent_that_answers_initialize_is_ok(bare_path, tmp_path):
    fake = Path(__file__).with_name("fake_acp_agent.py")
    agent = bare_path / "gemini"
    agent.write_text(f"#!/bin/sh\nexec {sys.executable} {fake} --store {tmp_path / 'store.json'}\n")
    agent.chmod(0o755)
    done = run("doctor", "--agent", "gemini", "--db", str(tmp_path / "j.db"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "The selected agent 'gemini' is healthy." in done.stdout
    assert "answered initialize" in done.stdout


@pytest.fixture
def runner_dirs(tmp_path, monkeypatch):
    run_dir = short_runtime_dir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", run_dir)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    yield
    stop_runners()
    shutil.rmtree(run_dir, ignore_errors=True)


def test_a_runner_whose_agent_will_not_start_does_not_wait_out_its_idle_time(offline_npx, runner_dirs, tmp_path):
    front = Front("--agent", "claude", "--db", str(tmp_path / "j.db"), "--runner-idle", "600", cwd=str(tmp_path))
    try:
        assert new_session_error(front, tmp_path)["message"] == CLAUDE_OFFLINE
        status = subprocess.run(
            [sys.executable, "-m", "acp_server", "runner", "status", "--json"], capture_output=True, text=True
        )
        [runner] = json.loads(status.stdout)
        front.close_stdin()
        assert front.wait(timeout=30) == 0
        # The runner's own deadline is 600 s; it goes once no front is left, long before.
        wait_until(lambda: ended(runner["pid"]), timeout=60, what="the runner with a broken agent to exit")
    finally:
        front.kill()


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


UNKNOWN = (
    "acp-server: error: unknown agent 'opnai' (did you mean 'openai'?); known agents: echo, scripted, python, "
    "openai, hermes, acp, claude, codex, gemini, fast-agent, hermes-acp (or give module:factory) "
    "(see acp-server --help)"
)


def test_an_unknown_agent_is_one_line_that_says_where_the_help_is_for_the_server_and_prompt(tmp_path):
    assert one_line(run("--agent", "opnai", cwd=tmp_path)) == UNKNOWN
    assert one_line(run("prompt", "--agent", "opnai", "hello", cwd=tmp_path)) == UNKNOWN


def test_a_bad_option_is_one_line_naming_the_commands_help(tmp_path):
    assert one_line(run("--no-such-flag", cwd=tmp_path)) == (
        "acp-server: error: unrecognized arguments: --no-such-flag (see acp-server --help)"
    )
    assert one_line(run("prompt", cwd=tmp_path)) == (
        "acp-server prompt: error: the following arguments are required: text (see acp-server prompt --help)"
    )


def test_prompt_with_an_agent_that_is_not_installed_prints_the_cause_and_the_install_line(bare_path, tmp_path):
    env = {**os.environ, "ACP_SERVER_DB": str(tmp_path / "j.db")}
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", "prompt", "--agent", "gemini", "hello"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 2
    install = PRESETS["gemini"].install
    assert done.stderr.splitlines()[-1] == (
        "error: the ACP server did not start: gemini: the agent did not start ('gemini' was not found on PATH); "
        f"install it: {install}"
    )
