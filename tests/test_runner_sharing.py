"""Sharing a session between connections, over real fronts, real pipes and the runner's socket:
every connection gets every update once and live; one that loads mid-turn (or reconnects) sees
the turn from its start; prompts from any connection queue in order, each answered at its own
turn's end; a question goes to all, the first answer wins and the other copies are withdrawn; a
cancel from any connection ends the turn for all; a killed runner leaves both seeing it cut off."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
from pathlib import Path

import pytest
from runner_fronts import Front, ended, runners, scripted_runner, wait_until
from test_runner import allow, is_permission, load, read_until, run_states, text, texts_by_run, updates

WORDS = [f"w{i} " for i in range(600)]
GATE = {"tool": "Edit notes", "kind": "edit", "ask": True, "input": {"path": "notes"}, "result": "edited"}
STREAM = [
    step
    for n, word in enumerate(WORDS)
    for step in ([{"say": word}, {"sleep": 0.005}] if n % 10 == 9 else [{"say": word}])
]
SCRIPT = {
    "scenarios": [
        {"match": "stream", "steps": [*STREAM, GATE, {"say": "THE END"}]},  # live until someone answers
        {"match": "gate", "steps": [{"say": "before "}, GATE, {"say": "after"}]},
        {"match": "one", "steps": [{"say": "reply one"}]},
        {"match": "two", "steps": [{"say": "reply two"}]},
    ]
}
ALL = "".join(WORDS) + "THE END"


@pytest.fixture
def runner_env(tmp_path, monkeypatch):
    with scripted_runner(tmp_path, monkeypatch, SCRIPT) as options:
        yield options


def user_text(frames) -> list[str]:
    return [u["content"]["text"] for u in updates(frames) if u["sessionUpdate"] == "user_message_chunk"]


def ends(frames) -> list[str]:
    """The stop reasons of the turns whose end this connection was told of (not by an answer)."""
    metas = [u.get("_meta", {}).get("acp-server", {}) for u in updates(frames)]
    return [meta["turnEnded"]["stopReason"] for meta in metas if "turnEnded" in meta]


def is_answer(request_id):
    return lambda f: f.get("id") == request_id and "method" not in f


def is_withdrawal(request: dict):
    return lambda f: f.get("method") == "$/cancel_request" and f["params"] == {"requestId": request["id"]}


def is_turn_end(f: dict) -> bool:
    return bool(ends([f]))


def prompt(front: Front, sid: str, words: str) -> int:
    return front.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": words}]})


def shared(tmp_path, runner_env) -> tuple[Front, Front, str]:
    """Two fronts with one session open: the first made it, the second loaded it."""
    first = Front(*runner_env, cwd=str(tmp_path))
    sid = first.start_session(str(tmp_path))
    second = Front(*runner_env, cwd=str(tmp_path))
    second.initialize()
    load(second, sid, str(tmp_path))
    return first, second, sid


def live_turns() -> int:
    """The runner's turns running or queued, asked on its control socket (a queued prompt counts
    from the moment its place in the queue is taken: no await lies between the two)."""
    [status] = runners()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(Path(status["socket"]).with_suffix(".ctl")))
        sock.sendall(b"status\n")
        return json.loads(sock.makefile().readline())["liveTurns"]


def decisions(db) -> int:
    return sqlite3.connect(db).execute("SELECT count(*) FROM events WHERE type = 'permission'").fetchone()[0]


def test_two_connections_see_the_same_live_turn_once_each_and_the_watchers_answer_wins(tmp_path, runner_env):
    first, second, sid = shared(tmp_path, runner_env)
    asking = prompt(first, sid, "stream")
    at_first = read_until(first, is_permission)
    at_second = read_until(second, is_permission)
    assert at_first[-1]["params"]["toolCall"] == at_second[-1]["params"]["toolCall"]
    allow(second, at_second[-1])  # answered on the other connection: it wins
    at_first += read_until(first, is_withdrawal(at_first[-1]))
    at_first += read_until(first, is_answer(asking))
    at_second += read_until(second, is_turn_end)

    assert text(at_first) == ALL and text(at_second) == ALL  # every update, once each
    assert user_text(at_second) == ["stream"] and user_text(at_first) == []  # the prompter shows its own
    assert at_first[-1]["result"] == {"stopReason": "end_turn"} and ends(at_second) == ["end_turn"]
    for frames in (at_first, at_second):  # each then sees the tool call's new state
        question = next(f for f in frames if is_permission(f))
        call = question["params"]["toolCall"]["toolCallId"]
        after = updates(frames[frames.index(question) :])
        assert any(u.get("toolCallId") == call and u.get("status") == "completed" for u in after)
    assert decisions(tmp_path / "journal.db") == 1
    assert run_states(tmp_path / "journal.db") == ["completed"]


def test_a_connection_loading_mid_turn_sees_it_from_its_start_and_one_reconnecting_loses_nothing(tmp_path, runner_env):
    first = Front(*runner_env, cwd=str(tmp_path))
    sid = first.start_session(str(tmp_path))
    prompt(first, sid, "stream")
    seen = read_until(first, lambda f: "w50 " in text([f]))

    second = Front(*runner_env, cwd=str(tmp_path))
    second.initialize()
    replayed, _ = load(second, sid, str(tmp_path))
    live = read_until(second, is_permission)
    assert text(replayed).startswith("w0 w1 ") and text(replayed) + text(live) == "".join(WORDS)
    assert user_text(replayed) == ["stream"]
    second.kill_group()  # its link drops while the turn waits for an answer

    third = Front(*runner_env, cwd=str(tmp_path))
    third.initialize()
    again, _ = load(third, sid, str(tmp_path))
    again += read_until(third, is_permission)
    seen += read_until(first, is_permission)
    allow(first, seen[-1])
    again += read_until(third, is_withdrawal(again[-1]))
    again += read_until(third, is_turn_end)
    seen += read_until(first, lambda f: "result" in f and "method" not in f and f["result"].get("stopReason"))
    assert text(again) == ALL and text(seen) == ALL  # nothing lost, nothing twice


def test_prompts_from_two_connections_queue_in_order_and_each_is_answered_when_its_own_turn_ends(tmp_path, runner_env):
    first, second, sid = shared(tmp_path, runner_env)
    gate = prompt(first, sid, "gate")
    at_first = read_until(first, is_permission)
    at_second = read_until(second, is_permission)
    one = prompt(second, sid, "one")
    wait_until(lambda: live_turns() == 2, what="the second connection's prompt to wait in the queue")
    two = prompt(first, sid, "two")
    wait_until(lambda: live_turns() == 3, what="the first connection's second prompt to wait in the queue")
    allow(first, at_first[-1])
    at_first += read_until(first, is_answer(two))
    at_second += read_until(second, lambda f: "reply two" in text([f]))

    order = [f.get("id") if "method" not in f else text([f]) or user_text([f]) for f in at_first]
    assert (
        order.index(gate)
        < order.index(["one"])
        < order.index("reply one")
        < order.index("reply two")
        < order.index(two)
    )
    second_order = [f.get("id") if "method" not in f else text([f]) or user_text([f]) for f in at_second]
    assert second_order.index("reply one") < second_order.index(one) < second_order.index(["two"])
    assert user_text(at_first) == ["one"] and user_text(at_second) == ["gate", "two"]  # each shown the other's
    assert texts_by_run(tmp_path / "journal.db") == ["before after", "reply one", "reply two"]


def test_a_cancel_from_the_connection_that_did_not_prompt_ends_the_turn_for_all_and_a_queued_prompt(
    tmp_path, runner_env
):
    first, second, sid = shared(tmp_path, runner_env)
    gate = prompt(first, sid, "gate")
    at_first = read_until(first, is_permission)
    at_second = read_until(second, is_permission)
    queued = prompt(second, sid, "one")
    wait_until(lambda: live_turns() == 2, what="the prompt to wait in the queue")
    second.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    at_first += read_until(first, is_withdrawal(at_first[-1]))  # nobody needs to answer it now
    at_second += read_until(second, is_withdrawal(at_second[-1]))
    at_first += read_until(first, is_answer(gate))
    at_second += read_until(second, is_answer(queued))
    at_second += read_until(second, is_turn_end)
    assert at_first[-1]["result"] == {"stopReason": "cancelled"}
    assert next(f for f in at_second if f.get("id") == queued)["result"] == {"stopReason": "cancelled"}
    assert ends(at_second) == ["cancelled"]  # the turn it did not prompt, ended for it too
    assert run_states(tmp_path / "journal.db") == ["cancelled"]  # the queued prompt never ran


def test_a_runner_killed_mid_turn_shows_both_connections_the_turn_interrupted_after_reload(tmp_path, runner_env):
    first, second, sid = shared(tmp_path, runner_env)
    prompt(first, sid, "stream")
    read_until(first, lambda f: text([f]) != "")
    read_until(second, lambda f: text([f]) != "")
    [runner] = runners()
    os.kill(runner["pid"], signal.SIGKILL)
    for front in (first, second):
        assert front.remaining_frames() is not None and front.wait() == 0  # each ends with the runner
    wait_until(lambda: ended(runner["pid"]), what="the killed runner to die")

    for _ in range(2):
        front = Front(*runner_env, cwd=str(tmp_path))
        front.initialize()
        replayed, _ = load(front, sid, str(tmp_path))
        shown = text(replayed)
        assert "This turn was interrupted" in shown
        assert "".join(WORDS).startswith(shown.split("\n\n_[This turn")[0])
        front.close_stdin()
        assert front.wait() == 0
    assert run_states(tmp_path / "journal.db") == ["interrupted"]


def test_a_waiting_prompt_withdrawn_by_its_connection_leaves_the_running_turn_alone(tmp_path, runner_env):
    first, second, sid = shared(tmp_path, runner_env)
    gate = prompt(first, sid, "gate")
    at_first = read_until(first, is_permission)
    read_until(second, is_permission)
    queued = prompt(second, sid, "one")
    wait_until(lambda: live_turns() == 2, what="the prompt to wait in the queue")
    second.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": queued}})
    withdrawn = read_until(second, is_answer(queued))[-1]
    assert withdrawn["error"]["code"] == -32800  # answered as a cancelled request
    wait_until(lambda: live_turns() == 1, what="the withdrawn prompt to leave the queue")
    allow(first, at_first[-1])
    assert read_until(first, is_answer(gate))[-1]["result"] == {"stopReason": "end_turn"}
    assert texts_by_run(tmp_path / "journal.db") == ["before after"]  # the withdrawn prompt never ran
