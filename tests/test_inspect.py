"""Reading journals from a terminal: sessions, show, runs, events and export."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import datetime

import pytest

SCRIPT = {
    "scenarios": [
        {
            "match": "",
            "steps": [
                {"think": "considering"},
                {
                    "tool": "Call API",
                    "kind": "fetch",
                    "input": {"url": "https://example.invalid", "api_key": "sk-abcdefghijklmnopqrstuvwx"},
                    "result": "Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123",
                },
                {"say": "All done."},
            ],
        }
    ]
}


def acp(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_server", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "TZ": "UTC"},
    )


@pytest.fixture
def journal_with_a_session(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    db = str(tmp_path / "journal.db")
    done = acp("prompt", "--agent", "scripted", "--script", str(script), "--db", db, "check the api", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    listed = acp("sessions", "--db", db, "--json", cwd=tmp_path)
    (session,) = [json.loads(line) for line in listed.stdout.splitlines()]
    return db, session


def test_sessions_lists_the_session_with_its_title_and_cwd(journal_with_a_session, tmp_path):
    db, session = journal_with_a_session
    assert session["title"] == "check the api"
    assert session["cwd"] == str(tmp_path)
    table = acp("sessions", "--db", db, cwd=tmp_path).stdout
    assert session["sessionId"] in table and "check the api" in table


def test_show_prints_the_transcript_as_an_editor_would_see_it(journal_with_a_session, tmp_path):
    db, session = journal_with_a_session
    shown = acp("show", session["sessionId"], "--db", db, cwd=tmp_path).stdout
    lines = shown.splitlines()
    assert lines[0] == "> check the api"
    assert "(thinking) considering" in lines
    assert "[tool] Call API (fetch) pending" in lines
    assert "[tool] Call API -> completed" in lines
    assert lines[-1] == "All done."


def test_runs_events_and_export_show_the_raw_journal_without_secrets(journal_with_a_session, tmp_path):
    db, session = journal_with_a_session
    (run_line,) = acp("runs", session["sessionId"], "--db", db, cwd=tmp_path).stdout.splitlines()
    run_id = run_line.split()[0]
    assert " completed " in run_line
    listed = acp("events", run_id, "--db", db, "--json", cwd=tmp_path).stdout
    events = [json.loads(line) for line in listed.splitlines()]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert all(e["eventId"] == f"{run_id}:{e['seq']}" for e in events)
    assert events[0]["type"] == "prompt" and events[-1]["type"] == "done" and events[-1]["terminal"]
    later = [
        json.loads(line)
        for line in acp("events", run_id, "--db", db, "--json", "--after", "3", cwd=tmp_path).stdout.splitlines()
    ]
    assert later == events[3:]
    exported = json.loads(acp("export", session["sessionId"], "--db", db, "--json", cwd=tmp_path).stdout)
    assert exported["session"]["id"] == session["sessionId"]
    assert exported["events"] == events
    raw = (tmp_path / "journal.db").read_bytes() + json.dumps(exported).encode()
    assert b"sk-abcdefghijklmnopqrstuvwx" not in raw
    assert b"abcdefghijklmnopqrstuvwxyz0123" not in raw
    assert b"REDACTED" in raw


def test_an_unknown_session_or_run_is_a_clear_error(journal_with_a_session, tmp_path):
    db, _session = journal_with_a_session
    for command in ("show", "runs", "export"):
        done = acp(command, "sess_missing", "--db", db, cwd=tmp_path)
        assert done.returncode == 1
        assert "no session 'sess_missing'" in done.stderr
    done = acp("events", "run_missing", "--db", db, cwd=tmp_path)
    assert done.returncode == 1 and "no run 'run_missing'" in done.stderr


# --- a newcomer's journal commands ---------------------------------------------------------

# The envelope the durability policy (docs/sessions.md) promises for every event, in `events` and `export`.
ENVELOPE = ["eventId", "seq", "runId", "sessionId", "type", "createdAt", "terminal", "payload"]
# How every journal command prints a time: ISO-8601 in UTC, as ACP's `updatedAt`.
ISO_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")


@pytest.fixture(scope="module")
def two_sessions(tmp_path_factory):
    """A journal of a scripted session, then a later echo one: (db, their cwd, older id, newer id).
    Shared by the tests below, which only read it."""
    here = tmp_path_factory.mktemp("two-sessions")
    script = here / "script.json"
    script.write_text(json.dumps(SCRIPT))
    db = str(here / "journal.db")
    for agent in (["--agent", "scripted", "--script", str(script), "check the api"], ["--agent", "echo", "second one"]):
        done = acp("prompt", *agent, "--db", db, cwd=here)
        assert done.returncode == 0, done.stderr
    newer, older = (
        json.loads(line)["sessionId"] for line in acp("sessions", "--db", db, "--json", cwd=here).stdout.splitlines()
    )
    return db, here, older, newer


def test_sessions_prints_a_header_then_the_agent_the_last_runs_outcome_and_the_time(two_sessions):
    db, here, older, newer = two_sessions
    lines = acp("sessions", "--db", db, cwd=here).stdout.splitlines()
    listed = {
        json.loads(line)["sessionId"]: json.loads(line)
        for line in acp("sessions", "--db", db, "--json", cwd=here).stdout.splitlines()
    }

    def local_time(session_id: str) -> str:  # TZ=UTC for the commands
        stamp = datetime.fromisoformat(listed[session_id]["updatedAt"].replace("Z", "+00:00")).timestamp()
        return time.strftime("%Y-%m-%d %H:%M", time.gmtime(stamp))

    assert lines[0].split() == ["SESSION", "UPDATED", "AGENT", "LAST", "RUN", "TITLE", "[CWD]"]
    assert lines[1].split() == [
        newer,
        *local_time(newer).split(),
        "echo",
        "completed",
        "second",
        "one",
        f"[{here}]",
    ]
    assert lines[2].split()[:6] == [older, *local_time(older).split(), "scripted", "completed", "check"]
    assert len(lines) == 3
    assert [entry["lastRun"] for entry in listed.values()] == ["completed", "completed"]


def test_sessions_on_a_journal_not_made_yet_prints_nothing_and_says_so_on_stderr(tmp_path):
    db = str(tmp_path / "empty.db")
    done = acp("sessions", "--db", db, cwd=tmp_path)

    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == (
        f"no sessions: no journal at {db} (check --db; a server creates it with its first session)\n"
    )


@pytest.mark.parametrize(
    "command", [("sessions",), ("show", "sess_x"), ("runs",), ("events", "run_x"), ("export", "x")]
)
def test_a_read_command_at_a_mistyped_db_creates_nothing(tmp_path, command):
    db = tmp_path / "mistyped" / "jornal.db"
    done = acp(*command, "--db", str(db), cwd=tmp_path)

    assert not (tmp_path / "mistyped").exists()
    assert done.stderr.count("\n") == 1 and f"no journal at {db} (check --db;" in done.stderr
    assert done.returncode == (0 if command == ("sessions",) else 1)


def test_events_takes_any_unique_prefix_of_a_run_id(two_sessions):
    db, here, older, _newer = two_sessions
    [line] = acp("runs", older, "--db", db, cwd=here).stdout.splitlines()
    run_id = line.split()[0]
    full = acp("events", run_id, "--db", db, cwd=here)
    assert full.returncode == 0 and full.stdout, full.stderr
    for prefix in (run_id[:12], run_id.removeprefix("run_")[:8]):
        done = acp("events", prefix, "--db", db, cwd=here)
        assert (done.returncode, done.stdout) == (0, full.stdout), done.stderr
    several = acp("events", "run_", "--db", db, cwd=here)
    assert several.returncode == 1 and several.stderr.startswith("error: 'run_' is the start of several runs: ")


@pytest.mark.parametrize("command", ["sessions", "show", "runs", "events", "export"])
def test_a_journal_commands_help_shows_its_own_options_and_where_the_servers_are(tmp_path, command):
    done = acp(command, "--help", cwd=tmp_path)
    assert done.returncode == 0
    assert "--db" in done.stdout and "--agent" not in done.stdout and "--max-workers" not in done.stdout
    assert "acp-server --help lists them" in " ".join(done.stdout.split())
    assert len(done.stdout.splitlines()) < 30


@pytest.mark.parametrize("command", ["show", "runs", "export"])
def test_show_runs_and_export_take_any_unique_prefix_of_a_session_id(two_sessions, command):
    db, here, older, _newer = two_sessions
    full = acp(command, older, "--db", db, cwd=here)
    assert full.returncode == 0, full.stderr
    for prefix in (older[:12], older.removeprefix("sess_")[:6]):
        done = acp(command, prefix, "--db", db, cwd=here)
        assert (done.returncode, done.stdout) == (0, full.stdout), f"{command} {prefix}: {done.stderr}"


@pytest.mark.parametrize("command", ["show", "runs", "export"])
def test_a_prefix_of_several_sessions_is_one_line_naming_them(two_sessions, command):
    db, here, older, newer = two_sessions
    done = acp(command, "sess_", "--db", db, cwd=here)

    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"error: 'sess_' is the start of 2 sessions: {newer}, {older}; give more of the id\n"


@pytest.mark.parametrize("command", ["show", "runs", "export"])
def test_a_session_nothing_matches_is_one_line_naming_the_journal_file(two_sessions, command):
    db, here, _older, _newer = two_sessions
    done = acp(command, "sess_nothing", "--db", db, cwd=here)

    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"error: no session 'sess_nothing' in the journal {db} (acp-server sessions lists them)\n"


def test_runs_without_a_session_shows_the_latest_session(two_sessions):
    db, here, _older, newer = two_sessions
    latest = acp("runs", "--db", db, cwd=here)

    assert latest.returncode == 0, latest.stderr
    assert latest.stdout == acp("runs", newer, "--db", db, cwd=here).stdout
    assert latest.stderr == f"runs of the latest session, {newer} (second one)\n"
    assert acp("runs", "--db", str(here / "empty.db"), cwd=here).stderr.startswith("error: no journal at")


def test_export_writes_the_session_its_runs_and_every_event_envelope_as_the_docs_say(two_sessions):
    db, here, older, _newer = two_sessions
    done = acp("export", older, "--db", db, cwd=here)  # JSON without --json too
    document = json.loads(done.stdout)
    events = [
        json.loads(line)
        for line in acp("events", document["runs"][0]["id"], "--db", db, "--json", cwd=here).stdout.splitlines()
    ]

    assert list(document) == ["session", "runs", "events"]
    assert document["session"]["id"] == older and document["session"]["title"] == "check the api"
    assert document["session"]["adapter"] == "scripted"
    (run,) = document["runs"]
    assert (run["index"], run["status"], run["stopReason"]) == (0, "completed", "end_turn")
    assert all(list(event) == ENVELOPE for event in document["events"])
    assert document["events"] == events
    assert json.loads(acp("export", older, "--db", db, "--json", cwd=here).stdout) == document


def test_sessions_events_and_export_print_the_same_camel_case_keys_and_iso_utc_times(two_sessions):
    db, here, older, _newer = two_sessions
    listed = [json.loads(line) for line in acp("sessions", "--db", db, "--json", cwd=here).stdout.splitlines()]
    document = json.loads(acp("export", older, "--db", db, cwd=here).stdout)
    run = document["runs"][0]["id"]
    events = [json.loads(line) for line in acp("events", run, "--db", db, "--json", cwd=here).stdout.splitlines()]

    # Every object the three commands print, the events' payloads aside (kept as the journal stored them).
    printed = [*listed, document["session"], *document["runs"], *document["events"], *events]
    assert [key for record in printed for key in record if "_" in key] == []
    times = [value for record in printed for key, value in record.items() if key.endswith("At") and value]
    assert len(times) > len(printed) and all(ISO_UTC.fullmatch(value) for value in times)
    assert older in {record["sessionId"] for record in listed}
    assert {event["sessionId"] for event in events} == {older}


@pytest.mark.parametrize("command", ["sessions", "show", "runs", "events", "export"])
def test_a_reader_that_goes_away_ends_a_journal_command_quietly(two_sessions, command):
    db, here, older, _newer = two_sessions
    run_id = json.loads(acp("export", older, "--db", db, cwd=here).stdout)["runs"][0]["id"]
    words = {"sessions": [], "show": [older], "runs": [older], "events": [run_id], "export": [older]}[command]
    reader, writer = os.pipe()
    os.close(reader)  # gone before the command writes anything: its first write is a broken pipe
    try:
        done = subprocess.run(
            [sys.executable, "-m", "acp_server", command, *words, "--db", db],
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    finally:
        os.close(writer)

    assert (done.returncode, done.stderr) == (0, "")


def test_sessions_piped_into_head_prints_the_header_and_no_traceback(two_sessions):
    db, _here, _older, _newer = two_sessions
    command = f"{sys.executable} -m acp_server sessions --db {db} | head -1"
    done = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, timeout=60)

    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.split()[:2] == ["SESSION", "UPDATED"]
