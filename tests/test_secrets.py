"""No secret reaches the journal file: real turns of real servers plant secrets in prompts, tool
inputs and outputs, file paths, directories, titles, permission answers, errors and config
values; then every table, every column and the raw bytes of the database and its WAL are
searched for them, as are `session/list`, a reload and the servers' logs. A key streamed a
character at a time is redacted once, ahead of the editor and the journal alike, and log lines
are redacted too."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

from stdio_server import StdioServer

from journal import Journal

# The random part of each secret: what must never be stored, whole or in pieces.
BODIES = {
    "openai": "Q7w8E9r0T1y2U3i4O5p6",
    "anthropic": "Zx9Cv8Bn7Mm6Ll5Kk4Jj",
    "cut": "Tr4nc4t3dK3yV4lu3AbCdEf",
    "legacy": "LegacyKey0123456789abcdEF",
    "github": "Aa1Bb2Cc3Dd4Ee5Ff6Gg7Hh8Ii9Jj0Kk1Ll2",
    "github_pat": "11AAAAAAA0xYzxYzxYz1234567",
    "aws": "QWERTYUIOP123456",
    "aws_session": "ZXCVBNMLKJ098765",
    "slack": "112233445566-ABCDEFabcdef",
    "slack_user": "998877665544-zyxwvutsrq",
    "jwt": "eyJzdWIiOiJ6ZWJyYTQyIn0.Qm9ndXNTaWduYXR1cmVWYWx1ZQ",
    "bearer": "b3arerT0kenValueZqWxEcRvTbYn",
    "bearer_text": "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA",
    "env": "envValue9f8e7d6c5b4a",
    "env_output": "runValue5a4b3c2d1e",
    "url_password": "Pa55w0rdInUrl",
    "pem": "MIIBVwIBADANBgkqhkiG9w0BAQEFAASCAUEwggE9",
    "password": "hunter2hunter2",
    "query_token": "qT0k3nInTheQuery99",
    "config": "cfgSecretValue77",
    "config_url": "C0nfigUrlPa55",
}
OPENAI = f"sk-proj-{BODIES['openai']}"
ANTHROPIC = f"sk-ant-api03-{BODIES['anthropic']}"
CUT = f"sk-{BODIES['cut']}"  # placed so that the 80-character title cuts it in half
LEGACY = f"sk-{BODIES['legacy']}"
GITHUB = f"ghp_{BODIES['github']}"
GITHUB_PAT = f"github_pat_{BODIES['github_pat']}"
AWS = f"AKIA{BODIES['aws']}"
AWS_SESSION = f"ASIA{BODIES['aws_session']}"
SLACK = f"xoxb-{BODIES['slack']}"
SLACK_USER = f"xoxp-{BODIES['slack_user']}"
JWT = f"eyJhbGciOiJIUzI1NiJ9.{BODIES['jwt']}"
PEM = f"-----BEGIN PRIVATE KEY-----\n{BODIES['pem']}\n-----END PRIVATE KEY-----"

SCRIPT = {
    "scenarios": [
        {
            "match": "deploy",
            "steps": [
                {
                    "tool": f"Call the API as {SLACK}",  # the remembered permission is keyed by it
                    "kind": "fetch",
                    "ask": True,
                    "input": {
                        "url": f"https://api.example.com/v1?token={BODIES['query_token']}",
                        "headers": {"Authorization": f"Bearer {BODIES['bearer']}"},
                        "env": f"OPENAI_API_KEY={BODIES['env']}",
                        "command": f"git clone https://deploy:{BODIES['url_password']}@git.example.com/r.git",
                        "model_key": ANTHROPIC,
                    },
                    "result": f"the API answered with {GITHUB_PAT}",
                },
                {
                    "tool": "Write the keys file",
                    "kind": "edit",
                    "write_file": {"path": f"keys-{AWS}.txt", "content": f"password={BODIES['password']}\n"},
                },
                {"tool": "Print the token", "kind": "execute", "run": f"echo GITHUB_TOKEN={BODIES['env_output']}"},
                {"say": f"Done. Next time send Bearer {BODIES['bearer_text']} instead."},
                {"title": f"Deploy as {AWS_SESSION}"},
            ],
        },
        {"match": "break", "steps": [{"error": f"the upstream refused {LEGACY}"}]},
        {"match": "", "steps": [{"say": "ok"}]},
    ]
}


def leaks(text: str) -> list[str]:
    """Which secrets occur in `text`, whole or as any 8 characters of their random part."""
    return sorted(name for name, body in BODIES.items() if any(body[i : i + 8] in text for i in range(len(body) - 7)))


def prompt(server: StdioServer, session_id: str, text: str) -> dict[str, object]:
    request = server.request("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]})
    return server.response(request)


def test_no_secret_from_a_turn_reaches_any_table_column_or_byte_of_the_journal(tmp_path: Path) -> None:
    cwd = tmp_path / f"proj-{GITHUB}"
    extra = tmp_path / f"extra-{SLACK_USER}"
    cwd.mkdir()
    extra.mkdir()
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    db = tmp_path / "journal.db"
    args = ("--agent", "scripted", "--script", str(script), "--db", str(db))
    seen: list[str] = []

    first = StdioServer(*args, cwd=str(cwd))
    first.permission_option = "allow_always"
    try:
        first.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        new = {"cwd": str(cwd), "mcpServers": [], "additionalDirectories": [str(extra)]}
        deployed = first.call("session/new", new)["sessionId"]
        done = prompt(first, deployed, f"deploy with {OPENAI} please\nsigned {JWT}\n{PEM}")
        assert done["result"] == {"stopReason": "end_turn"}
        assert "error" in prompt(first, deployed, "break it")
        plain = first.call("session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"]
        assert prompt(first, plain, f"check that {OPENAI} still works")["result"] == {"stopReason": "end_turn"}
        titled = first.call("session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"]
        assert prompt(first, titled, f"{'y' * 59} {CUT} and more")["result"] == {"stopReason": "end_turn"}
        listed = first.call("session/list", {})
        seen.append(json.dumps(listed))
        live_files = file_leaks(tmp_path)  # while the server runs, its commits sit in the WAL
        first.close_stdin()
        assert first.wait() == 0
    finally:
        first.kill()
    seen.append(first.stderr.decode())
    assert (cwd / f"keys-{AWS}.txt").read_text() == f"password={BODIES['password']}\n"  # the turn did run
    assert {s["title"] for s in listed["sessions"]} == {
        "Deploy as [REDACTED]",
        "check that [REDACTED] still works",
        f"{'y' * 59} [REDACTED] and more",
    }

    async def configure() -> None:
        async with await Journal.open(db) as journal:
            config = {"endpoint": f"https://u:{BODIES['config_url']}@models.example.com", "api_key": BODIES["config"]}
            assert await journal.update_session(deployed, config=config) is not None

    asyncio.run(configure())

    second = StdioServer(*args, cwd=str(cwd))
    try:
        second.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert {s["sessionId"] for s in second.call("session/list", {"cwd": str(cwd)})["sessions"]} == {
            deployed,
            plain,
            titled,
        }
        second.call("session/load", {"sessionId": deployed, "cwd": str(cwd), "mcpServers": []})
        second.close_stdin()
        assert second.wait() == 0
    finally:
        second.kill()
    replayed = [frame["params"]["update"] for frame in second.frames if frame.get("method") == "session/update"]
    assert any(u["sessionUpdate"] == "user_message_chunk" for u in replayed)
    seen += [json.dumps(frame) for frame in second.frames] + [second.stderr.decode()]

    assert set(live_files) >= {"journal.db", "journal.db-wal"}
    assert live_files == {name: [] for name in live_files}
    assert [leaks(text) for text in seen] == [[] for _ in seen]
    assert rows_with_secrets(db) == []
    assert file_leaks(tmp_path) == {"journal.db": []}  # checkpointed: every page is in the file


def file_leaks(directory: Path) -> dict[str, list[str]]:
    """The secrets in the raw bytes of the database and its -wal / -shm files."""
    files = [path for path in directory.iterdir() if path.name.startswith("journal.db")]
    return {path.name: leaks(path.read_bytes().decode("utf-8", errors="replace")) for path in files}


def rows_with_secrets(db: Path) -> list[tuple[str, str, str]]:
    """(table, column, leaked secrets) for every stored value that holds a secret."""
    found: list[tuple[str, str, str]] = []
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert set(tables) >= {"sessions", "runs", "events"}
        for table in tables:
            cursor = conn.execute(f'SELECT * FROM "{table}"')
            columns = [column[0] for column in cursor.description]
            for row in cursor:
                for column, value in zip(columns, row, strict=True):
                    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
                    if names := leaks(text):
                        found.append((table, column, ",".join(names)))
    return found


# --- one redaction ahead of the editor and the journal ------------------------------------------

SPLIT_KEY = f"sk-proj-{BODIES['openai']}"
LINK_PASSWORD = "L1nkPa55w0rdZq"
CI_LINK = {"type": "open_url", "label": "CI run", "url": f"https://deploy:{LINK_PASSWORD}@ci.example.com/r/7"}
HAUI_ENVELOPE = {"schema": "hermes.adaptive-ui", "version": 1, "blocks": [{"type": "actions", "actions": [CI_LINK]}]}
HAUI_REPLY = "\nCI is green.\n```hermes-ui\n" + json.dumps(HAUI_ENVELOPE) + "\n```\nDone."
SPLIT_REPLY = f"Your key is {SPLIT_KEY} as asked." + HAUI_REPLY
# One character per delta, a thought between each two, so the bridge cannot merge them.
SPLIT_SCRIPT = {
    "scenarios": [{"match": "", "steps": [step for char in SPLIT_REPLY for step in ({"say": char}, {"think": "."})]}]
}


def shown_text(frames: list[dict[str, Any]]) -> str:
    """The reply as the editor is shown it: its agent_message_chunk texts in order."""
    return "".join(
        frame["params"]["update"]["content"]["text"]
        for frame in frames
        if frame.get("method") == "session/update"
        and frame["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


def split_secrets(text: str) -> list[str]:
    return [secret for secret in (SPLIT_KEY, BODIES["openai"][4:], LINK_PASSWORD) if secret in text]


def test_a_key_streamed_a_character_at_a_time_is_never_whole_on_the_wire_in_the_journal_or_the_trace(
    tmp_path: Path,
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SPLIT_SCRIPT))
    db, trace = tmp_path / "journal.db", tmp_path / "trace.jsonl"
    args = ("--agent", "scripted", "--script", str(script), "--db", str(db), "--trace", str(trace))
    live = StdioServer(*args, cwd=str(tmp_path))
    try:
        sid = live.start_session(str(tmp_path))
        assert prompt(live, sid, "stream it")["result"] == {"stopReason": "end_turn"}
        live_files = file_leaks(tmp_path)  # the WAL, while the server runs
        stored_while_live = {name: split_secrets(read_bytes(tmp_path / name)) for name in live_files}
        live.close_stdin()
        assert live.wait() == 0
    finally:
        live.kill()
    thoughts = [f for f in live.frames if f.get("method") == "session/update" and "thought" in json.dumps(f)]
    assert len(thoughts) >= len(SPLIT_REPLY)  # every character of the reply was a delta of its own

    reload = StdioServer(*args, cwd=str(tmp_path))
    try:
        reload.start_session(str(tmp_path))
        reload.call("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        reload.close_stdin()
        assert reload.wait() == 0
    finally:
        reload.kill()

    shown = shown_text(live.frames)
    assert "Your key is [REDACTED] as asked." in shown
    # The HAUI link carried a password: the link rule refuses a URL with user info, so its label
    # stays and the URL is dropped, live and on reload alike.
    assert "_(shown as text)_ CI run" in shown and "ci.example.com" not in shown
    assert shown_text(reload.frames) == shown  # a reload shows what the editor was shown
    traced = [json.loads(line)["frame"] for line in trace.read_text().splitlines()]
    assert stored_while_live == {name: [] for name in live_files}
    assert split_secrets(shown_text(traced)) == []
    assert split_secrets(stored_reply(db)) == [] and "[REDACTED]" in stored_reply(db)
    assert split_secrets(read_bytes(db)) == []


def read_bytes(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def stored_reply(db: Path) -> str:
    """The reply as the journal stores it (the database holds one run)."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT payload FROM events WHERE type = 'text' ORDER BY seq").fetchall()
    return "".join(json.loads(payload)["text"] for (payload,) in rows)


LEAKY_AGENT = f'''
import logging

log = logging.getLogger("leaky_agent")


def run(prompt, session):
    log.warning("calling the API with %s", "{SPLIT_KEY}")
    log.info("password: {BODIES["password"]}")
    raise RuntimeError("the API refused {GITHUB}")
'''


def test_secrets_in_log_lines_and_tracebacks_are_redacted_on_stderr_and_in_the_log_file(tmp_path: Path) -> None:
    (tmp_path / "leaky_agent.py").write_text(LEAKY_AGENT)
    log_file = tmp_path / "server.log"
    args = ("--agent", "leaky_agent:run", "--db", str(tmp_path / "j.db"), "--log-level", "INFO")
    server = StdioServer(*args, "--log-file", str(log_file), cwd=str(tmp_path))
    try:
        sid = server.start_session(str(tmp_path))
        assert prompt(server, sid, "go")["error"]["message"].startswith("The agent failed (RuntimeError)")
        # A response to no request is logged with its id: the editor's input, untrusted.
        server.send({"jsonrpc": "2.0", "id": AWS_SESSION, "result": None})
        server.close_stdin()
        assert server.wait() == 0
    finally:
        server.kill()
    for log in (server.stderr.decode(), log_file.read_text()):
        assert "calling the API with [REDACTED]" in log
        assert "password: [REDACTED]" in log
        assert "RuntimeError: the API refused [REDACTED]" in log  # the traceback
        assert "request id '[REDACTED]'" in log
        assert leaks(log) == []


ECHO_AGENT = """
from pathlib import Path


def run(prompt, session):
    Path("received.txt").write_text(prompt)
    return "noted"
"""
AWS_SECRET = "wJalrXUtnFEMIK7MDENGbPxRfiCYzz91"


def test_a_secret_inside_a_prompts_sentence_is_kept_from_the_journal_and_trace_but_reaches_the_agent(
    tmp_path: Path,
) -> None:
    (tmp_path / "echo_agent.py").write_text(ECHO_AGENT)
    db, trace = tmp_path / "journal.db", tmp_path / "trace.jsonl"
    text = f"my credentials file says aws_secret_access_key = {AWS_SECRET} please keep it"
    server = StdioServer("--agent", "echo_agent:run", "--db", str(db), "--trace", str(trace), cwd=str(tmp_path))
    try:
        sid = server.start_session(str(tmp_path))
        assert prompt(server, sid, text)["result"] == {"stopReason": "end_turn"}
        stored_while_live = [read_bytes(path) for path in tmp_path.iterdir() if path.name.startswith("journal.db")]
        server.close_stdin()
        assert server.wait() == 0
    finally:
        server.kill()
    assert (tmp_path / "received.txt").read_text() == text  # the agent gets what the user typed
    for stored in [*stored_while_live, read_bytes(db), trace.read_text()]:
        assert AWS_SECRET[:12] not in stored and AWS_SECRET[-12:] not in stored
    assert "aws_secret_access_key = [REDACTED] please keep it" in read_bytes(db)
