"""Hermes names a session the way `hermes acp` does: after the first exchange, its own title
generator makes one model request in the background, and the title reaches the editor as a
`session_info_update` after the turn has been answered; `session/list` keeps it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("run_agent", reason="the hermes extra is not installed")

from fake_openai import Stream, reply
from hermes_home import hermes_model
from stdio_server import StdioServer

from adapters.base import Transcript
from adapters.events import TranscriptSaved
from adapters.hermes import HermesAdapter
from adapters.testing import RecordingNotes, run_turn

TITLE = "Fixing the Parser"


class Titler:
    """Answers chat turns with text, and Hermes' title request (the one request that does not
    stream) with TITLE once `release` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.asked: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> Stream:
        if body.get("stream"):
            return reply("Done: the parser is fixed.")
        self.asked.append(body)
        self.release.wait(30)
        return reply(TITLE)


@pytest.fixture
def titler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Titler]:
    with hermes_model(tmp_path, monkeypatch, titles=True) as fake:
        fake.responder = titler = Titler()
        yield titler


def test_the_first_exchange_is_named_by_hermes_after_the_turn_has_ended(titler, tmp_path):
    adapter, notes = HermesAdapter(warm=False), RecordingNotes()
    # The title's answer is held back until the turn is over: a turn that waited for it would hang.
    record = run_turn(adapter, "fix the parser please", cwd=str(tmp_path), session_id="s1", timeout=60, notes=notes)
    assert record.reason == "end_turn" and not notes.titles
    titler.release.set()
    assert notes.wait_title(30) == TITLE
    (asked,) = titler.asked
    exchange = asked["messages"][-1]["content"]
    assert "fix the parser please" in exchange and "Done: the parser is fixed." in exchange
    (save,) = record.of_kind(TranscriptSaved)
    kept = Transcript(save.format, save.messages)  # what the server hands the next turn
    run_turn(adapter, "and the lexer?", cwd=str(tmp_path), session_id="s1", timeout=60, notes=notes, transcript=kept)
    _join_titlers()
    assert len(titler.asked) == 1, "only the first exchange is named"


def test_a_title_hermes_config_turns_off_is_never_asked_for(tmp_path, monkeypatch):
    with hermes_model(tmp_path, monkeypatch) as fake:
        fake.responder = titler = Titler()
        titler.release.set()
        notes = RecordingNotes()
        run_turn(HermesAdapter(warm=False), "hi", cwd=str(tmp_path), session_id="s1", timeout=60, notes=notes)
        _join_titlers()
    assert titler.asked == [] and notes.titles == []


def test_the_editor_sees_the_title_after_the_answer_and_the_journal_keeps_it(titler, tmp_path):
    db = str(tmp_path / "journal.db")
    server = StdioServer("--agent", "hermes", "--db", db)
    try:
        sid = server.start_session(str(tmp_path))
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "fix the parser please"}]}
        assert server.response(server.request("session/prompt", prompt), timeout=90)["result"]["stopReason"] == (
            "end_turn"
        )
        listed = server.call("session/list", {})["sessions"]
        assert [s["title"] for s in listed] == ["fix the parser please"]  # the first prompt's, until named
        titler.release.set()
        update = _next_update(server)
        assert update == {"sessionId": sid, "update": {"sessionUpdate": "session_info_update", "title": TITLE}}
    finally:
        server.kill()
    server = StdioServer("--agent", "hermes", "--db", db)
    try:
        server.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert [s["title"] for s in server.call("session/list", {})["sessions"]] == [TITLE]
    finally:
        server.kill()


def _next_update(server: StdioServer) -> dict[str, Any]:
    while True:
        frame = server.next_frame(timeout=30)
        assert frame is not None, f"no title came{server.exit_report()}"
        if frame.get("method") == "session/update" and frame["params"]["update"]["sessionUpdate"] == (
            "session_info_update"
        ):
            return frame["params"]


def _join_titlers() -> None:
    for thread in threading.enumerate():
        if thread.name == "hermes-title":
            thread.join(30)
