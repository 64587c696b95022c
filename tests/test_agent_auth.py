"""Logging in to the agent below through acp-server, as an editor does: the agent's own sign-in
methods are offered as ours (a terminal one to an editor that can run it, arranged so that
running our command with it runs the agent's login), `authenticate` and `logout` reach the
agent, and its auth_required reaches the editor as such at session/new, session/prompt and
session/load. The agent is tests/fake_acp_agent.py, a real subprocess; every frame the server
writes is checked against the schema (harness)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from acp_child import Runtimes
from harness import RemoteError, running

from acp_server.acp.handlers import AcpAgent
from acp_server.downstream.runtime import FORGOT_NOTICE
from acp_server.protocol import methods
from acp_server.rpc.errors import AUTH_REQUIRED
from journal.store import Journal

FAKE_AGENT = str(Path(__file__).with_name("fake_acp_agent.py"))
TERMINAL = {"auth": {"terminal": True}}
REFUSED = "Authentication required: log in first"
LOGIN_WAIT = 60.0  # seconds for `acp-server` to ask the agent and run its login


@pytest.fixture
def runtimes():
    made = Runtimes()
    yield made
    made.close()


def agent_argv(tmp_path: Path, *flags: str) -> tuple[str, ...]:
    return (sys.executable, FAKE_AGENT, "--store", str(tmp_path / "store.json"), *flags)


async def refused(request) -> RemoteError:
    with pytest.raises(RemoteError) as caught:
        await request
    return caught.value


async def test_the_agents_terminal_login_is_offered_to_an_editor_that_can_run_it(tmp_path, runtimes):
    async with running(AcpAgent(runtimes.make(agent_argv(tmp_path, "--terminal-auth")))) as editor:
        init = await editor.initialize(TERMINAL)
    assert init["authMethods"] == [
        {
            "id": "fake-login",
            "name": "Log in in a terminal",
            "description": "Runs the fake agent's own login",
            "type": "terminal",
            "args": [],  # appended to the editor's command they would land after `--`, in the agent's
            "env": {"FAKE_LOGIN_WHO": "terminal", "ACP_SERVER_LOGIN": "fake-login"},
        }
    ]
    assert init["agentCapabilities"]["auth"] == {"logout": {}}


async def test_an_editor_that_cannot_run_a_terminal_is_not_offered_the_terminal_login(tmp_path, runtimes):
    async with running(AcpAgent(runtimes.make(agent_argv(tmp_path, "--terminal-auth")))) as editor:
        init = await editor.initialize()
        failure = await refused(editor.new_session(tmp_path))
    assert init["authMethods"] == []
    assert (failure.code, failure.message) == (AUTH_REQUIRED, REFUSED)


async def test_running_acp_server_as_the_editor_runs_the_login_runs_the_agents_own_and_then_sessions_work(
    tmp_path, runtimes
):
    argv = agent_argv(tmp_path, "--terminal-auth")
    async with running(AcpAgent(runtimes.make(argv))) as editor:
        (method,) = (await editor.initialize(TERMINAL))["authMethods"]
        failure = await refused(editor.new_session(tmp_path))
        assert (failure.code, failure.message) == (AUTH_REQUIRED, REFUSED)
        # What the editor does: its own command for the agent, `args` appended, `env` set, in a terminal.
        command = [sys.executable, "-m", "acp_server", "--agent", "acp", "--", *argv, *method["args"]]
        with anyio.fail_after(LOGIN_WAIT):
            done = await anyio.run_process(
                command, env={**os.environ, **method["env"]}, stdin=subprocess.DEVNULL, check=False
            )
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode() == "Logged in as terminal.\n"  # the agent's own login, on the terminal
        mark = json.loads((tmp_path / "store.json.login").read_text())
        assert mark == {
            "who": "terminal",
            "argv": ["--store", str(tmp_path / "store.json"), "--terminal-auth", "--login"],
        }
        sid = await editor.new_session(tmp_path)  # the editor's retry, once the login exited 0
        assert (await editor.prompt(sid, "hi"))["stopReason"] == "end_turn"


async def test_acp_server_login_says_so_when_the_agent_has_no_terminal_login(tmp_path):
    command = [sys.executable, "-m", "acp_server", "--agent", "acp", "login", "--", *agent_argv(tmp_path, "--auth")]
    with anyio.fail_after(LOGIN_WAIT):
        done = await anyio.run_process(command, stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 1
    assert done.stderr.decode().splitlines()[-1] == (
        "acp-server login: acp: the agent offers no sign-in to run in a terminal: "
        "its methods (login) are run by the editor through authenticate"
    )


async def test_an_agent_that_logged_out_mid_session_fails_the_prompt_as_auth_required(tmp_path, runtimes):
    async with running(AcpAgent(runtimes.make(agent_argv(tmp_path, "--auth")))) as editor:
        await editor.initialize()
        assert await editor.request(methods.AUTHENTICATE, {"methodId": "login"}) == {}
        sid = await editor.new_session(tmp_path)
        assert (await editor.prompt(sid, "hi"))["stopReason"] == "end_turn"
        assert await editor.request(methods.LOGOUT, {}) == {}  # forwarded: the agent forgets the login
        failure = await refused(editor.prompt(sid, "again"))
        assert (failure.code, failure.message) == (AUTH_REQUIRED, REFUSED)  # not -32603
        assert await editor.request(methods.AUTHENTICATE, {"methodId": "login"}) == {}
        await editor.prompt(sid, "third")
        assert editor.text(sid).endswith("You said third; I remember hi.")


async def test_loading_a_session_at_an_agent_that_wants_a_login_fails_as_auth_required(tmp_path):
    argv = agent_argv(tmp_path, "--auth")
    journal = await Journal.open(tmp_path / "journal.db")
    async with journal:
        first = Runtimes()
        try:
            async with running(AcpAgent(first.make(argv), journal=journal)) as editor:
                await editor.initialize()
                await editor.request(methods.AUTHENTICATE, {"methodId": "login"})
                sid = await editor.new_session(tmp_path)
                await editor.prompt(sid, "hi")
        finally:
            first.close()
        again = Runtimes()  # acp-server and the agent started again: the agent wants a login again
        try:
            async with running(AcpAgent(again.make(argv), journal=journal)) as editor:
                await editor.initialize()
                load = {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
                failure = await refused(editor.request(methods.SESSION_LOAD, load))
                assert (failure.code, failure.message) == (AUTH_REQUIRED, REFUSED)
                await editor.request(methods.AUTHENTICATE, {"methodId": "login"})
                await editor.request(methods.SESSION_LOAD, load)
                await editor.prompt(sid, "again")
                assert editor.text(sid).endswith("You said again; I remember hi.")  # brought back
                assert FORGOT_NOTICE not in editor.text(sid)  # and not said to be forgotten
        finally:
            again.close()
