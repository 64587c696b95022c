"""Hermes' standing goals (`/goal`) behind acp-server: Hermes' real AIAgent and its own goal
manager against the fake model, which also answers the judge's requests. Each turn of the loop
is a run of its own (journaled, streamed, replayed), a user prompt goes before the next
continuation, a cancel pauses, the goal survives a SIGKILL, and in runner mode the loop goes on
with the editor gone and a reattaching editor sees the rest live.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("run_agent", reason="the hermes extra is not installed")

from fake_endpoint import Failure, Stream
from fake_openai import FakeOpenAI, reply
from harness import FakeEditor, running
from hermes_home import hermes_model

from acp_server.acp.handlers import AcpAgent
from adapters.hermes import HermesAdapter
from journal.store import Journal

JUDGE = "You are a strict judge"  # how Hermes' judge prompt starts (hermes_cli.goals)
CONTINUATION = "[Continuing toward your standing goal]"


class GoalModel:
    """The fake model of these tests. A turn (a streamed request) answers "step N", N counting
    the turns; `hold` holds turn N open after its text (until the client goes away). A judge
    request (not streamed) finds the goal done once the answer it is shown says "step
    `done_at`"; with `judge_fails`, every judge request fails with HTTP 500."""

    def __init__(self, *, done_at: int | None = None, hold: int | None = None, judge_fails: bool = False) -> None:
        self.done_at, self.hold, self.judge_fails = done_at, hold, judge_fails
        self.turns = 0
        self.judged: list[str] = []  # the answers the judge was shown
        self.held = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Stream | Failure:
        messages = body["messages"]
        if str(messages[0].get("content", "")).startswith(JUDGE):
            shown = str(messages[-1]["content"]).split("Agent's most recent response:\n", 1)[1]
            self.judged.append(shown)
            if self.judge_fails:
                return Failure(500, "the judge is down")
            done = self.done_at is not None and f"step {self.done_at}" in shown
            return reply(json.dumps({"done": done, "reason": "all steps taken" if done else "more steps to take"}))
        with self._lock:
            self.turns += 1
            turn = self.turns
        if turn == self.hold:
            self.held.set()
            return reply(f"step {turn}", hold_open=True)
        return reply(f"step {turn}")


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    with hermes_model(tmp_path, monkeypatch) as server:
        yield server


def budget(max_turns: int) -> None:
    """Hermes' `goals.max_turns` in the test's HERMES_HOME."""
    import os

    config = Path(os.environ["HERMES_HOME"]) / "config.yaml"
    config.write_text(config.read_text() + f"goals:\n  max_turns: {max_turns}\n")


@asynccontextmanager
async def serving(tmp_path: Path) -> AsyncIterator[tuple[FakeEditor, str, Journal]]:
    journal = await Journal.open(tmp_path / "journal.db")
    try:
        async with running(AcpAgent(HermesAdapter(warm=False), journal=journal)) as editor:
            await editor.initialize()
            yield editor, await editor.new_session(tmp_path), journal
    finally:
        await journal.close()


def verdicts(editor: FakeEditor, sid: str) -> list[str]:
    return [
        u["title"]
        for u in editor.updates[sid]
        if u["sessionUpdate"] == "tool_call_update" and str(u.get("title", "")).startswith("goal")
    ]


async def test_a_goal_done_after_three_turns_runs_three_turns_and_stops(fake, tmp_path):
    model = GoalModel(done_at=3)
    fake.responder = model
    async with serving(tmp_path) as (editor, sid, journal):
        answer = await editor.prompt(sid, "/goal count to three")
        assert answer["stopReason"] == "end_turn"
        assert model.turns == 3
        assert verdicts(editor, sid) == [
            "goal: not done yet — 1/20, continuing",
            "goal: not done yet — 2/20, continuing",
            "goal done: all steps taken",
        ]
        runs = await journal.runs(sid)
        assert [r.status.value for r in runs] == ["completed"] * 4
        print(editor.updates[sid])
