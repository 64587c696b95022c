"""Reading journals from a terminal: sessions, show, runs, events and export."""

from __future__ import annotations

import json
import subprocess
import sys

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
    assert all(e["event_id"] == f"{run_id}:{e['seq']}" for e in events)
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


def test_an_unknown_session_or_run_is_a_clear_error(tmp_path):
    db = str(tmp_path / "journal.db")
    for command in ("show", "runs", "export"):
        done = acp(command, "sess_missing", "--db", db, cwd=tmp_path)
        assert done.returncode == 1
        assert "no session 'sess_missing'" in done.stderr
    done = acp("events", "run_missing", "--db", db, cwd=tmp_path)
    assert done.returncode == 1 and "no run 'run_missing'" in done.stderr
