"""acpx (npm, a headless ACP client nobody on this team wrote) drives a real server as a user would.

`acpx --agent "<python> -m acp_server --agent scripted ..."` runs from tests/clients/node_modules
(pinned in package.json, installed by `npm ci`), with its home (where it keeps `~/.acpx`) in the
test's directory. `--format json` prints every ACP message of the run as one line; the server's
are checked against the schema. One `exec` writes a file behind a permission question that
`--approve-all` answers; one named session is prompted twice, each prompt in a fresh server process
that loads the session from the journal. Skips (or, under CI, fails) as tests/installs.py says.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
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
        {"match": "", "steps": [{"say": "Noted."}]},
    ]
}
# The methods acpx sends; everything else in its transcript is from the server, or answers it.
CLIENT_REQUESTS = frozenset({methods.INITIALIZE, methods.SESSION_NEW, methods.SESSION_LOAD, methods.SESSION_PROMPT})


@pytest.fixture(scope="session")
def acpx() -> list[str]:
    node = node_packages("acpx")
    manifest = json.loads((CLIENTS / "node_modules" / "acpx" / "package.json").read_text())
    assert manifest["version"] == locked_version("acpx")
    return [node, str(CLIENTS / "node_modules" / "acpx" / manifest["bin"]["acpx"])]


class Acpx:
    """acpx with its own home, pointed at one server command line and one workspace."""

    def __init__(self, command: list[str], tmp_path: Path) -> None:
        self.command = command
        self.workspace = tmp_path / "workspace"
        self.workspace.mkdir()
        self.db = tmp_path / "journal.db"
        script = tmp_path / "script.json"
        script.write_text(json.dumps(SCRIPT))
        server = [sys.executable, "-m", "acp_server", "--agent", "scripted", "--script", str(script)]
        self.agent = shlex.join([*server, "--db", str(self.db)])
        self.env = {**os.environ, "HOME": str(tmp_path / "home")}

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        # A short queue-owner TTL: the owner acpx leaves behind after `prompt` exits soon after.
        argv = [*self.command, "--agent", self.agent, "--cwd", str(self.workspace), "--ttl", "1", *args]
        done = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=ACPX_TIMEOUT)
        assert done.returncode == 0, (
            f"acpx {args} exited {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}"
        )
        return done

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


def test_a_named_acpx_session_prompted_twice_is_one_session_across_server_restarts(acpx, tmp_path):
    client = Acpx(acpx, tmp_path)
    session_id = client.run("sessions", "new", "--name", "notes").stdout.strip().splitlines()[-1]
    assert session_id.startswith("sess_")
    for text in ("first: the word is kiwi", "second: what was the word?"):
        messages = client.transcript("--approve-all", "prompt", "-s", "notes", text)
        # A fresh server each time (it is initialized), which loads the session rather than making one.
        assert requests(messages, methods.INITIALIZE)
        assert not requests(messages, methods.SESSION_NEW)
        (load,) = requests(messages, methods.SESSION_LOAD)
        assert load["params"]["sessionId"] == session_id and "result" in answer_to(messages, load)
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
