"""acpx (npm, a headless ACP client nobody on this team wrote) drives a real server as a user would.

`acpx --agent "<python> -m acp_server --agent scripted ..."` runs from tests/clients/node_modules
(acpx 0.19, pinned in package.json, installed by `npm ci`), with its home (where it keeps `~/.acpx`)
in the test's directory. `--format json` prints every ACP message of the run as one line; the
server's are checked against the schema. What 0.19 does is covered as it does it: every command on
a named session starts a fresh server that resumes the session (`session/resume`), `set-mode` and
`set` change it through the server, `--model` picks the openai agent's model through its config
option, Ctrl-C on `exec` sends `session/cancel`, and `sessions list/close` keep their own records.
Skips (or, under CI, fails) as tests/installs.py says.
"""

from __future__ import annotations

import json
import os
import select
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from fake_openai import FakeOpenAI, reply
from installs import CLIENTS, locked_version, node_packages
from schema_check import check_agent_frame

from acp_server.protocol import methods
from journal.store import Journal

ACPX_TIMEOUT = 90  # seconds for one acpx run; one normally takes one or two
SCRIPT = {
    "scenarios": [
        {
            "match": "update the notes",
            "steps": [
                {"say": "Updating the notes. "},
                {
                    "tool": "Write notes.txt",
                    "kind": "edit",
                    "ask": True,
                    "write_file": {"path": "notes.txt", "content": "new notes\n"},
                },
                {"say": "Done."},
            ],
        },
        {"match": "take your time", "steps": [{"say": "Starting. "}, {"sleep": 60}, {"say": "Finished."}]},
        {"match": "", "steps": [{"say": "Noted."}]},
    ]
}
# The methods acpx sends; everything else in its transcript is from the server, or answers it.
CLIENT_REQUESTS = methods.AGENT_METHODS


@pytest.fixture(scope="session")
def acpx() -> list[str]:
    node = node_packages("acpx")
    manifest = json.loads((CLIENTS / "node_modules" / "acpx" / "package.json").read_text())
    assert manifest["version"] == locked_version("acpx")
    return [node, str(CLIENTS / "node_modules" / "acpx" / manifest["bin"]["acpx"])]


class Acpx:
    """acpx with its own home, pointed at one server command line and one workspace."""

    def __init__(self, command: list[str], tmp_path: Path, *, server: list[str] | None = None) -> None:
        self.command = command
        self.workspace = tmp_path / "workspace"
        self.workspace.mkdir()
        self.db = tmp_path / "journal.db"
        script = tmp_path / "script.json"
        script.write_text(json.dumps(SCRIPT))
        server = server or ["--agent", "scripted", "--script", str(script)]
        self.agent = shlex.join([sys.executable, "-m", "acp_server", *server, "--db", str(self.db)])
        self.env = {**os.environ, "HOME": str(tmp_path / "home")}

    def argv(self, *args: str) -> list[str]:
        # A short queue-owner TTL: the owner acpx leaves behind after `prompt` exits soon after.
        return [*self.command, "--agent", self.agent, "--cwd", str(self.workspace), "--ttl", "1", *args]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = self.argv(*args)
        done = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=ACPX_TIMEOUT)
        assert done.returncode == 0, (
            f"acpx {args} exited {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}"
        )
        return done

    def wait_until_idle(self, name: str) -> None:
        """Until the process acpx keeps for a named session after a prompt (for `--ttl`) is gone,
        so the next command starts a fresh server."""
        status = json.loads(self.run("--format", "json", "status", "-s", name).stdout.splitlines()[-1])
        if "pid" not in status:
            return
        try:
            pidfd = os.pidfd_open(status["pid"])
        except ProcessLookupError:
            return
        try:
            readable, _, _ = select.select([pidfd], [], [], ACPX_TIMEOUT)
            assert readable, f"acpx's process {status['pid']} for {name} outlived its --ttl by {ACPX_TIMEOUT} s"
        finally:
            os.close(pidfd)

    def transcript(self, *args: str) -> list[dict[str, Any]]:
        """The ACP messages of one run (`--format json`), the server's checked against the schema."""
        messages = [json.loads(line) for line in self.run("--format", "json", *args).stdout.splitlines()]
        check_server_messages(messages)
        return messages


def from_server(messages: list[dict[str, Any]]) -> list[bool]:
    """Which messages the server wrote. Both sides number their requests from 0, so a response
    answers the server while a server request with its id is open, else it is the server's."""
    open_server_ids: set[Any] = set()
    sides = []
    for message in messages:
        method = message.get("method")
        if method is None and message.get("id") in open_server_ids:
            open_server_ids.discard(message["id"])
            sides.append(False)
        else:
            if method is not None and method not in CLIENT_REQUESTS and "id" in message:
                open_server_ids.add(message["id"])
            sides.append(method not in CLIENT_REQUESTS)
    return sides


def check_server_messages(messages: list[dict[str, Any]]) -> None:
    asked: dict[Any, str] = {}
    for message, server in zip(messages, from_server(messages), strict=True):
        if message.get("method") in CLIENT_REQUESTS:
            if "id" in message:  # session/cancel is a notification
                asked[message["id"]] = message["method"]
        elif server:
            check_agent_frame(message, None if "method" in message else asked.get(message.get("id")))


def requests(messages: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    return [m for m in messages if m.get("method") == method and "id" in m]


def answer_to(messages: list[dict[str, Any]], request: dict[str, Any]) -> dict[str, Any]:
    """The response to `request`, from whichever side it was sent to."""
    to_server = request["method"] in CLIENT_REQUESTS
    sides = from_server(messages)
    start = messages.index(request) + 1
    return next(
        m
        for m, server in zip(messages[start:], sides[start:], strict=True)
        if m.get("id") == request["id"] and "method" not in m and server == to_server
    )


def agent_text(messages: list[dict[str, Any]]) -> str:
    updates = [m["params"]["update"] for m in messages if m.get("method") == methods.SESSION_UPDATE]
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")


async def journal_history(db: Path, session_id: str) -> tuple[list[str], list[tuple[str, str]]]:
    journal = await Journal.open(db)
    try:
        sessions = [s.id for s in (await journal.list_sessions())[0]]
        return sessions, [(m.role, m.text) for m in (await journal.history(session_id)).messages]
    finally:
        await journal.close()


def test_acpx_exec_with_approve_all_writes_the_file_after_a_question_that_shows_the_diff(acpx, tmp_path):
    client = Acpx(acpx, tmp_path)
    notes = client.workspace / "notes.txt"
    notes.write_text("old notes\n")
    messages = client.transcript("--approve-all", "exec", "please update the notes")
    (prompt,) = requests(messages, methods.SESSION_PROMPT)
    assert answer_to(messages, prompt)["result"]["stopReason"] == "end_turn"
    assert agent_text(messages) == "Updating the notes. Done."
    (question,) = requests(messages, methods.REQUEST_PERMISSION)
    assert question["params"]["toolCall"]["content"] == [
        {"type": "diff", "path": str(notes), "oldText": "old notes\n", "newText": "new notes\n"}
    ]
    assert answer_to(messages, question)["result"]["outcome"]["optionId"].startswith("allow")
    assert requests(messages, methods.FS_WRITE_TEXT_FILE)  # acpx wrote it, as the editor it is
    assert notes.read_text() == "new notes\n"


def updates_of(messages: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    updates = [m["params"]["update"] for m in messages if m.get("method") == methods.SESSION_UPDATE]
    return [u for u in updates if u["sessionUpdate"] == kind]


def test_a_named_acpx_session_prompted_twice_is_resumed_by_each_fresh_server_with_its_commands(acpx, tmp_path):
    client = Acpx(acpx, tmp_path)
    session_id = client.run("sessions", "new", "--name", "notes").stdout.strip().splitlines()[-1]
    assert session_id.startswith("sess_")
    for text in ("first: the word is kiwi", "second: what was the word?"):
        client.wait_until_idle("notes")
        messages = client.transcript("--approve-all", "prompt", "-s", "notes", text)
        # A fresh server each time (it is initialized), which resumes the session rather than making one.
        assert requests(messages, methods.INITIALIZE)
        assert not requests(messages, methods.SESSION_NEW)
        (resume,) = requests(messages, methods.SESSION_RESUME)
        assert resume["params"]["sessionId"] == session_id and "result" in answer_to(messages, resume)
        # What a resume gets besides the history: the slash commands, as after session/new and load.
        (commands,) = updates_of(messages, "available_commands_update")
        assert {"help", "mode"} <= {command["name"] for command in commands["availableCommands"]}
        (prompt,) = requests(messages, methods.SESSION_PROMPT)
        assert prompt["params"]["sessionId"] == session_id
        assert answer_to(messages, prompt)["result"]["stopReason"] == "end_turn"
    sessions, history = anyio.run(journal_history, client.db, session_id)
    assert sessions == [session_id]
    assert history == [
        ("user", "first: the word is kiwi"),
        ("agent", "Noted."),
        ("user", "second: what was the word?"),
        ("agent", "Noted."),
    ]


async def journal_session(db: Path, session_id: str) -> tuple[str | None, dict[str, Any]]:
    journal = await Journal.open(db)
    try:
        record = await journal.get_session(session_id)
        assert record is not None
        return record.mode, dict(record.config)
    finally:
        await journal.close()


def test_acpx_set_mode_and_set_change_the_session_in_the_journal_and_the_next_prompt_obeys(acpx, tmp_path):
    client = Acpx(acpx, tmp_path)
    notes = client.workspace / "notes.txt"
    notes.write_text("old notes\n")
    session_id = client.run("sessions", "new", "--name", "notes").stdout.strip().splitlines()[-1]
    client.run("set-mode", "-s", "notes", "read-only")
    client.run("set", "-s", "notes", "haui", "off")
    assert anyio.run(journal_session, client.db, session_id) == ("read-only", {"haui": "off"})
    client.wait_until_idle("notes")
    messages = client.transcript("--approve-all", "prompt", "-s", "notes", "please update the notes")
    (resume,) = requests(messages, methods.SESSION_RESUME)
    result = answer_to(messages, resume)["result"]
    assert result["modes"]["currentModeId"] == "read-only"
    assert {o["id"]: o["currentValue"] for o in result["configOptions"]} == {"mode": "read-only", "haui": "off"}
    # Read-only refuses the write without asking, whatever --approve-all would have answered.
    assert not requests(messages, methods.REQUEST_PERMISSION)
    (failed,) = [u for u in updates_of(messages, "tool_call_update") if u.get("status") == "failed"]
    assert "read-only" in json.dumps(failed["content"])
    assert notes.read_text() == "old notes\n"


def test_acpx_set_of_an_option_the_agent_lacks_is_refused_with_the_servers_message(acpx, tmp_path):
    client = Acpx(acpx, tmp_path)
    client.run("sessions", "new", "--name", "notes")
    argv = client.argv("set", "-s", "notes", "colour", "blue")
    done = subprocess.run(argv, capture_output=True, text=True, env=client.env, timeout=ACPX_TIMEOUT)
    assert done.returncode != 0
    assert "configId is not an option of this agent" in done.stdout + done.stderr


def test_acpx_model_flag_picks_the_openai_agents_model_through_its_config_option(acpx, tmp_path):
    with FakeOpenAI(models=["gpt-4o", "llama3.2"]) as fake:
        fake.script(reply("Hello from the small model."))
        server = ["--agent", "openai", "--model", "gpt-4o"]
        client = Acpx(acpx, tmp_path, server=server)
        client.env |= {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-test-not-a-real-key-000000"}
        client.env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
        messages = client.transcript("--approve-all", "--model", "llama3.2", "exec", "hello")
        (choice,) = requests(messages, methods.SESSION_SET_CONFIG_OPTION)
        assert choice["params"]["configId"] == "model" and choice["params"]["value"] == "llama3.2"
        (prompt,) = requests(messages, methods.SESSION_PROMPT)
        assert answer_to(messages, prompt)["result"]["stopReason"] == "end_turn"
        assert agent_text(messages) == "Hello from the small model."
        assert [chat["model"] for chat in fake.chats] == ["llama3.2"]


async def run_states(db: Path) -> list[str]:
    journal = await Journal.open(db)
    try:
        (session,) = (await journal.list_sessions())[0]
        return [str(run.status) for run in await journal.runs(session.id)]
    finally:
        await journal.close()


def test_ctrl_c_on_acpx_exec_cancels_the_turn_and_the_journal_records_it_cancelled(acpx, tmp_path):
    client = Acpx(acpx, tmp_path)
    argv = client.argv("--approve-all", "--format", "json", "exec", "take your time")
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=client.env)
    try:
        assert process.stdout is not None
        lines = []
        for line in process.stdout:  # until the turn has visibly started
            lines.append(json.loads(line))
            if agent_text(lines) == "Starting. ":
                break
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=ACPX_TIMEOUT)
    finally:
        process.kill()
    messages = lines + [json.loads(line) for line in out.splitlines()]
    check_server_messages(messages)
    assert [m for m in messages if m.get("method") == methods.SESSION_CANCEL]
    (prompt,) = requests(messages, methods.SESSION_PROMPT)
    assert answer_to(messages, prompt)["result"]["stopReason"] == "cancelled"
    assert agent_text(messages) == "Starting. "
    assert anyio.run(run_states, client.db) == ["cancelled"]


def test_acpx_sessions_list_shows_the_session_and_close_frees_its_name_for_a_new_one(acpx, tmp_path):
    client = Acpx(acpx, tmp_path)
    first = client.run("sessions", "new", "--name", "notes").stdout.strip().splitlines()[-1]
    client.run("--approve-all", "prompt", "-s", "notes", "hello there")
    listed = client.run("sessions", "list").stdout
    assert first in listed and "hello there" in listed  # the title the server gave the session
    client.run("sessions", "close", "notes")
    second = client.run("sessions", "new", "--name", "notes").stdout.strip().splitlines()[-1]
    assert second.startswith("sess_") and second != first
    client.wait_until_idle("notes")
    messages = client.transcript("--approve-all", "prompt", "-s", "notes", "again")
    (resume,) = requests(messages, methods.SESSION_RESUME)
    assert resume["params"]["sessionId"] == second
    sessions, _ = anyio.run(journal_history, client.db, second)
    assert sorted(sessions) == sorted([first, second])  # closing in acpx forgets nothing in the journal
