"""Hermes' standing goals (`/goal`) behind acp-server: Hermes' real AIAgent and its own goal
manager against the fake model, which also answers the judge's requests. Each turn of the loop
is a run of its own (journaled, streamed, replayed), a user prompt goes before the next
continuation, a cancel pauses, the goal survives a SIGKILL, and in runner mode the loop goes on
with the editor gone and a reattaching editor sees the rest live.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("run_agent", reason="the hermes extra is not installed")

from fake_endpoint import Failure, Stream
from fake_openai import FakeOpenAI, reply
from harness import FakeEditor, running
from hermes_home import hermes_model
from runner_fronts import Front, cli, gone, runners, short_runtime_dir, wait_until
from stdio_server import StdioServer

from acp_server.acp.handlers import AcpAgent
from acp_server.turns.replay import INTERRUPTED_NOTICE
from adapters.events import PromptReceived
from adapters.hermes import HermesAdapter
from adapters.hermes.goals import STOPPED
from journal.store import Journal

JUDGE = "You are a strict judge"  # how Hermes' judge prompt starts (hermes_cli.goals)
CONTINUATION = "[Continuing toward your standing goal]"


class GoalModel:
    """The fake model of these tests. A turn (a streamed request) answers "step N", N counting
    the turns; `hold` holds turn N open after its text (until the client goes away), `gate`
    has turn N wait for `release` before it answers, `tools` has turn N call a tool first (and
    say "step N" once it has the result). A judge request (not streamed) finds the
    goal done once the answer it is shown says "step `done_at`"; with `judge_fails`, every
    judge request fails with HTTP 500."""

    def __init__(
        self,
        *,
        done_at: int | None = None,
        hold: int | None = None,
        gate: int | None = None,
        tools: dict[int, tuple[str, dict[str, Any]]] | None = None,
        judge_fails: bool = False,
    ) -> None:
        self.done_at, self.hold, self.gate, self.judge_fails = done_at, hold, gate, judge_fails
        self.tools = tools or {}
        self.turns = 0
        self.prompts: list[str] = []  # each turn's last user message
        self.judged: list[str] = []  # the answers the judge was shown
        self.held = threading.Event()  # turn `hold` has sent its text, or turn `gate` waits
        self.release = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Stream | Failure:
        messages = body["messages"]
        if str(messages[0].get("content", "")).startswith(JUDGE):
            shown = str(messages[-1]["content"]).split("Agent's most recent response:\n", 1)[1].split("\n\n")[0]
            self.judged.append(shown)
            if self.judge_fails:
                return Failure(400, "the judge is down")
            done = self.done_at is not None and f"step {self.done_at}" in shown
            return reply(json.dumps({"done": done, "reason": "all steps taken" if done else "more steps to take"}))
        if messages[-1]["role"] == "tool":
            return reply(f"step {self.turns}")  # the same turn, once its tool has run
        with self._lock:
            self.turns += 1
            turn = self.turns
            self.prompts.append(str(next(m["content"] for m in reversed(messages) if m["role"] == "user")))
        if turn == self.gate:
            self.held.set()
            self.release.wait(30)
        if turn in self.tools:
            return reply(tools=[self.tools[turn]])
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


async def runs_of(journal: Journal, sid: str) -> list[tuple[str, str | None, str]]:
    """Each run of the session: how it ended, its prompt's origin, its prompt's text."""
    found = []
    for run in await journal.runs(sid):
        first = await anext(aiter(journal.events(run_id=run.id)))
        prompt = first.event
        assert isinstance(prompt, PromptReceived)
        found.append((run.status.value, prompt.origin, prompt.blocks[0]["text"]))
    return found


async def goal_state(journal: Journal, sid: str) -> dict[str, Any]:
    return (await journal.history(sid)).state()["hermes.goal"]


def said(editor: FakeEditor, sid: str, since: int = 0) -> str:
    return "".join(
        u["content"]["text"] for u in editor.updates[sid][since:] if u["sessionUpdate"] == "agent_message_chunk"
    )


async def held(event: threading.Event) -> None:
    assert await anyio.to_thread.run_sync(event.wait, 30), "the model was never asked for the held turn"


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
        # the first turn works on the goal itself, as Hermes starts one; the /goal exchange is no part of it
        kickoff = [(m["role"], m["content"]) for m in fake.chats[0]["messages"] if m["role"] != "system"]
        assert kickoff == [("user", "count to three")]
        assert all(p.startswith(CONTINUATION) and "Goal: count to three" in p for p in model.prompts[1:])
        runs = await runs_of(journal, sid)
        assert runs == [
            ("completed", None, "/goal count to three"),
            ("completed", "goal", "count to three"),
            ("completed", "goal", model.prompts[1]),
            ("completed", "goal", model.prompts[2]),
        ]
        shown = [u for u in editor.updates[sid] if u["sessionUpdate"] == "user_message_chunk"]
        assert [(u["_meta"]["acp-server"]["origin"], u["content"]["text"]) for u in shown] == [
            ("goal", text) for _, _, text in runs[1:]
        ]
        assert (await goal_state(journal, sid))["status"] == "done"
        assert model.judged == ["step 1", "step 2", "step 3"]


async def test_a_goal_the_judge_never_finds_done_pauses_when_its_budget_is_used(fake, tmp_path):
    budget(3)
    model = GoalModel()
    fake.responder = model
    async with serving(tmp_path) as (editor, sid, journal):
        assert (await editor.prompt(sid, "/goal count forever"))["stopReason"] == "end_turn"
        assert model.turns == 3
        assert verdicts(editor, sid)[-1] == "goal paused: turn budget exhausted (3/3)"
        state = await goal_state(journal, sid)
        assert (state["status"], state["turns_used"]) == ("paused", 3)
        before = len(editor.updates[sid])
        await editor.prompt(sid, "/goal status")
        assert said(editor, sid, before) == "⏸ Goal (paused, 3/3 turns — turn budget exhausted (3/3)): count forever"


async def test_status_pause_resume_and_clear(fake, tmp_path):
    budget(2)
    model = GoalModel(done_at=3)
    fake.responder = model
    async with serving(tmp_path) as (editor, sid, journal):

        async def answer(text: str) -> str:
            before = len(editor.updates[sid])
            assert (await editor.prompt(sid, text))["stopReason"] == "end_turn"
            return said(editor, sid, before)

        assert await answer("/goal status") == "No active goal. Set one with /goal <text>."
        assert await answer("/goal resume") == "No goal to resume."
        assert (await answer("/goal count to three")).startswith("⊙ Goal set (2-turn budget): count to three")
        assert model.turns == 2  # the budget paused it
        assert await answer("/goal pause") == "⏸ Goal paused: count to three"
        assert model.turns == 2
        assert (await answer("/goal resume")).startswith("▶ Goal resumed (2-turn budget): count to three")
        assert model.turns == 3 and verdicts(editor, sid)[-1] == "goal done: all steps taken"
        assert await answer("/goal status") == "✓ Goal done (1/2 turns): count to three"
        assert await answer("/goal clear") == "No active goal."  # Hermes' answer: a goal done is no longer active
        assert await answer("/goal status") == "No active goal. Set one with /goal <text>."
        assert (await goal_state(journal, sid))["status"] == "cleared"
        assert model.turns == 3


async def test_a_goal_paused_mid_loop_stops_before_its_next_turn(fake, tmp_path):
    model = GoalModel(gate=2)
    fake.responder = model
    async with serving(tmp_path) as (editor, sid, journal):
        loop = await editor.start_prompt(sid, "/goal count forever")
        await held(model.held)
        pause = await editor.start_prompt(sid, "/goal pause")
        model.release.set()
        assert (await loop)["result"]["stopReason"] == "end_turn"  # before its next turn: the pause goes first
        assert (await pause)["result"]["stopReason"] == "end_turn"
        assert model.turns == 2
        assert (await goal_state(journal, sid))["status"] == "paused"
        before = len(editor.updates[sid])
        await editor.prompt(sid, "/goal clear")
        assert said(editor, sid, before) == "✓ Goal cleared."
        assert (await goal_state(journal, sid))["status"] == "cleared"


async def test_a_prompt_sent_during_the_loop_goes_before_the_next_continuation_and_the_loop_goes_on(fake, tmp_path):
    model = GoalModel(gate=2, done_at=4)
    fake.responder = model
    async with serving(tmp_path) as (editor, sid, journal):
        loop = await editor.start_prompt(sid, "/goal count to four")
        await held(model.held)
        question = await editor.start_prompt(sid, "how far are you?")
        model.release.set()
        assert (await loop)["result"]["stopReason"] == "end_turn"
        assert (await question)["result"]["stopReason"] == "end_turn"
        runs = await runs_of(journal, sid)
        assert (
            [(origin, text[:16]) for _, origin, text in runs]
            == [
                (None, "/goal count to f"),
                ("goal", "count to four"),
                ("goal", CONTINUATION[:16]),
                (None, "how far are you?"),  # the user's prompt preempted the third continuation
                ("goal", CONTINUATION[:16]),
            ]
        )
        assert model.judged == ["step 1", "step 2", "step 3", "step 4"]  # the user's turn is judged too
        assert verdicts(editor, sid)[-1] == "goal done: all steps taken"


async def test_cancel_stops_the_running_turn_and_pauses_the_goal(fake, tmp_path):
    model = GoalModel(hold=2)
    fake.responder = model
    async with serving(tmp_path) as (editor, sid, journal):
        loop = await editor.start_prompt(sid, "/goal count forever")
        await held(model.held)
        await editor.notify("session/cancel", {"sessionId": sid})
        assert (await loop)["result"]["stopReason"] == "cancelled"
        before = len(editor.updates[sid])
        await editor.prompt(sid, "/goal status")
        assert said(editor, sid, before) == "⏸ Goal (paused, 1/20 turns — cancelled in the editor): count forever"
        assert model.turns == 2
        assert [status for status, _, _ in await runs_of(journal, sid)] == [
            "completed",
            "completed",
            "cancelled",
            "completed",
        ]
        assert (await goal_state(journal, sid))["status"] == "paused"  # journaled with the next turn


async def test_a_judge_that_fails_fails_open_and_the_budget_still_stops_the_goal(fake, tmp_path):
    budget(3)
    model = GoalModel(done_at=1, judge_fails=True)
    fake.responder = model
    async with serving(tmp_path) as (editor, sid, _):
        assert (await editor.prompt(sid, "/goal count to one"))["stopReason"] == "end_turn"
        assert model.turns == 3  # "step 1" would have been done: the failing judge never said so
        assert verdicts(editor, sid) == [
            "goal: not done yet — 1/3, continuing",
            "goal: not done yet — 2/3, continuing",
            "goal paused: turn budget exhausted (3/3)",
        ]
        checks = [u for u in editor.updates[sid] if str(u.get("title", "")).startswith("goal")]
        assert [u["rawOutput"]["reason"] for u in checks] == ["judge error: BadRequestError"] * 3
        assert len(model.judged) >= 3


# --- over real processes -----------------------------------------------------------------------


def prompt_params(sid: str, text: str) -> dict[str, Any]:
    return {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}


def updates_of(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f["params"]["update"] for f in frames if f.get("method") == "session/update"]


def text_of(frames: list[dict[str, Any]]) -> str:
    return "".join(u["content"]["text"] for u in updates_of(frames) if u["sessionUpdate"] == "agent_message_chunk")


def titles_of(frames: list[dict[str, Any]]) -> list[str]:
    return [u["title"] for u in updates_of(frames) if str(u.get("title", "")).startswith("goal")]


def read_until(server: StdioServer, predicate: Any, timeout: float = 60) -> list[dict[str, Any]]:
    frames = []
    while True:
        frame = server.next_frame(timeout)
        assert frame is not None, f"the server closed its stdout{server.exit_report()}"
        frames.append(frame)
        if predicate(frame):
            return frames


def answered(request_id: int) -> Any:
    return lambda frame: frame.get("id") == request_id and "method" not in frame


def run_rows(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute("SELECT status FROM runs ORDER BY seq_no")]


def test_a_server_killed_mid_loop_reloads_its_runs_as_they_ended_and_resume_goes_on(fake, tmp_path):
    model = GoalModel(hold=2, done_at=3)
    fake.responder = model
    db = tmp_path / "journal.db"
    server = StdioServer("--agent", "hermes", "--db", str(db))
    try:
        sid = server.start_session(str(tmp_path))
        server.request("session/prompt", prompt_params(sid, "/goal count to three"))
        live = read_until(server, lambda f: text_of([f]).endswith("2"))  # turn 2 streams, and is held open
    finally:
        server.kill()  # SIGKILL mid-loop
    assert titles_of(live) == ["goal: not done yet — 1/20, continuing"]

    server = StdioServer("--agent", "hermes", "--db", str(db))
    try:
        server.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        load = server.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        replayed = read_until(server, answered(load))
        assert run_rows(db) == ["completed", "completed", "interrupted"]
        shown = updates_of(replayed)
        prompts = [
            (u.get("_meta"), u["content"]["text"][:16]) for u in shown if u["sessionUpdate"] == "user_message_chunk"
        ]
        goal = {"acp-server": {"origin": "goal"}}
        assert prompts == [(None, "/goal count to t"), (goal, "count to three"), (goal, CONTINUATION[:16])]
        assert titles_of(replayed) == ["goal: not done yet — 1/20, continuing"]
        assert text_of(replayed).endswith("step 2" + INTERRUPTED_NOTICE)  # the cut-off run, honestly

        status = server.request("session/prompt", prompt_params(sid, "/goal status"))
        assert (
            text_of(read_until(server, answered(status))) == f"⏸ Goal (paused, 1/20 turns — {STOPPED}): count to three"
        )
        resume = server.request("session/prompt", prompt_params(sid, "/goal resume"))
        resumed = read_until(server, answered(resume))
        assert resumed[-1]["result"]["stopReason"] == "end_turn"
    finally:
        server.kill()
    assert titles_of(resumed) == ["goal done: all steps taken"]
    assert model.turns == 3 and model.prompts[-1].startswith(CONTINUATION)
    sent = [m.get("content") for m in fake.chats[-2]["messages"] if m["role"] == "assistant"]
    assert sent[:2] == ["step 1", "step 2"]  # the turns before the kill, from the journal (the cut one as text)
    assert run_rows(db)[3:] == ["completed", "completed", "completed"]
    listed = cli("runs", sid, "--db", str(db)).stdout.splitlines()
    assert ["follow-up (goal)" in line for line in listed] == [False, True, True, False, False, True]


@pytest.fixture
def runner_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, ...]]:
    run_dir = short_runtime_dir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", run_dir)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    yield ("--agent", "hermes", "--db", str(tmp_path / "journal.db"))
    started = [r["pid"] for r in runners()]
    cli("runner", "stop")
    for pid in started:
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(run_dir, ignore_errors=True)


def test_in_runner_mode_the_loop_goes_on_without_the_editor_and_one_that_reattaches_sees_the_rest_live(
    fake, tmp_path, runner_env
):
    model = GoalModel(gate=2, tools={2: ("write_file", {"path": "notes.txt", "content": "two\n"})}, done_at=3)
    fake.responder = model
    first = Front(*runner_env, cwd=str(tmp_path))
    sid = first.start_session(str(tmp_path))
    first.request("session/prompt", prompt_params(sid, "/goal write the notes"))
    shown = read_until(first, lambda f: bool(titles_of([f])))
    assert titles_of(shown) == ["goal: not done yet — 1/20, continuing"]
    assert model.held.wait(30)
    first.kill_group()  # the editor goes away after the first turn
    model.release.set()  # the second turn asks to write with no editor attached: the question waits

    second = Front(*runner_env, cwd=str(tmp_path))
    second.initialize()
    load = second.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
    replayed = read_until(second, answered(load))
    asked = read_until(second, lambda f: f.get("method") == "session/request_permission")
    assert asked[-1]["params"]["toolCall"]["title"] == "Write notes.txt"
    second.send(
        {
            "jsonrpc": "2.0",
            "id": asked[-1]["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
        }
    )
    live = read_until(second, lambda f: "goal done: all steps taken" in titles_of([f]))

    assert "step 1" in text_of(replayed) and "step 2" not in text_of(replayed)
    assert text_of(live).startswith("step 2") and "step 3" in text_of(live)  # the later turns, live
    assert titles_of(live) == ["goal: not done yet — 2/20, continuing", "goal done: all steps taken"]
    continuations = [u for u in updates_of(replayed + live) if u["sessionUpdate"] == "user_message_chunk"]
    assert [u["content"]["text"][:16] for u in continuations] == [
        "/goal write the ",
        "write the notes",
        CONTINUATION[:16],
        CONTINUATION[:16],
    ]
    assert (tmp_path / "notes.txt").read_text() == "two\n"
    wait_until(lambda: run_rows(tmp_path / "journal.db") == ["completed"] * 4, what="the loop's last run to end")
