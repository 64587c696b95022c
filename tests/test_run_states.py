"""How a turn ended, as `acp-server runs` tells it, over real server processes: a turn that said
nothing is `no_response`, one whose client went away is `connection_lost`, one whose server was
killed is `interrupted`, and the runtime's own words map to these in one place."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from stdio_server import StdioServer

from journal import RunState, final_state, normalize_state

SCRIPT = {
    "scenarios": [
        {"match": "silence", "steps": [{"usage": {"inputTokens": 3}}]},
        {"match": "refuse", "steps": [{"stop": "refusal"}]},
        {"match": "long", "steps": [step for n in range(400) for step in ({"say": f"w{n} "}, {"sleep": 0.02})]},
        {"match": "", "steps": [{"say": "ok"}]},
    ]
}


def server(tmp_path: Path) -> StdioServer:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    db = tmp_path / "journal.db"
    return StdioServer("--agent", "scripted", "--script", str(script), "--db", str(db), cwd=str(tmp_path))


def runs(tmp_path: Path, session_id: str) -> list[list[str]]:
    """`acp-server runs SESSION --db F`, each line split into status and detail."""
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", "runs", session_id, "--db", str(tmp_path / "journal.db")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    return [line.split(maxsplit=3)[2:] for line in done.stdout.splitlines()]


def prompt(srv: StdioServer, session_id: str, text: str) -> int:
    return srv.request("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]})


def test_a_turn_that_ends_without_any_output_is_recorded_as_no_response(tmp_path: Path) -> None:
    srv = server(tmp_path)
    try:
        sid = srv.start_session(str(tmp_path))
        for text in ("silence please", "refuse this", "hello"):
            assert "result" in srv.response(prompt(srv, sid, text))
        srv.close_stdin()
        assert srv.wait() == 0
    finally:
        srv.kill()
    statuses = [line[0] for line in runs(tmp_path, sid)]
    assert statuses == ["no_response", "refused", "completed"]


def test_a_turn_whose_client_went_away_is_connection_lost_not_cancelled(tmp_path: Path) -> None:
    srv = server(tmp_path)
    try:
        sid = srv.start_session(str(tmp_path))
        prompt(srv, sid, "long")
        while (frame := srv.next_frame()) is not None:
            if frame.get("params", {}).get("update", {}).get("sessionUpdate") == "agent_message_chunk":
                break
        srv.close_stdin()  # the editor quits mid-turn
        assert srv.wait() == 0, srv.exit_report()
    finally:
        srv.kill()
    ((status, detail),) = runs(tmp_path, sid)
    assert status == "connection_lost"
    assert detail.endswith("the client closed the connection during the turn")


def test_a_turn_whose_server_was_killed_stays_interrupted(tmp_path: Path) -> None:
    first = server(tmp_path)
    try:
        sid = first.start_session(str(tmp_path))
        prompt(first, sid, "long")
        while (frame := first.next_frame()) is not None:
            if frame.get("params", {}).get("update", {}).get("sessionUpdate") == "agent_message_chunk":
                break
    finally:
        first.kill()
    second = server(tmp_path)  # opening the journal finds the dead server's run
    try:
        second.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        second.close_stdin()
        assert second.wait() == 0
    finally:
        second.kill()
    assert [line[0] for line in runs(tmp_path, sid)] == ["interrupted"]


@pytest.mark.parametrize(
    ("name", "state"),
    [
        ("no_response", RunState.NO_RESPONSE),
        ("no-output", RunState.NO_RESPONSE),
        ("empty", RunState.NO_RESPONSE),
        ("connection_lost", RunState.CONNECTION_LOST),
        ("Disconnected", RunState.CONNECTION_LOST),
        ("client_disconnected", RunState.CONNECTION_LOST),
        ("connection_closed", RunState.CONNECTION_LOST),
    ],
)
def test_the_new_states_and_their_aliases_normalize_in_the_one_table(name: str, state: RunState) -> None:
    assert normalize_state(name) is state


def test_the_final_state_says_what_the_stop_reason_cannot() -> None:
    assert final_state("end_turn", responded=True, client_left=False) is RunState.COMPLETED
    assert final_state("end_turn", responded=False, client_left=False) is RunState.NO_RESPONSE
    assert final_state("refusal", responded=False, client_left=False) is RunState.REFUSED
    assert final_state("cancelled", responded=False, client_left=False) is RunState.CANCELLED
    assert final_state("cancelled", responded=True, client_left=True) is RunState.CONNECTION_LOST
    assert final_state("end_turn", responded=True, client_left=True) is RunState.CONNECTION_LOST
