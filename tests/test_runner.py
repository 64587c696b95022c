"""Runner mode over real processes and real sockets: a turn outlives the front it started on, a
new front's load gets the replay and then the live rest (each event once), cancel and questions
follow the session to the front that attaches next, and runners start, race and stop cleanly
(fronts sharing one session: test_runner_sharing.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import stat
from functools import partial
from pathlib import Path

import pytest
from flooding import FLOOD_REQUESTS, GROWTH_LIMIT_KB, Flood
from runner_fronts import Front, cli, ended, gone, runners, scripted_runner, wait_until

from acp_server.runner.paths import peer_uid, runtime_dir, same_user

WORDS = [f"w{i} " for i in range(2000)]
GATE = {"tool": "Edit notes", "kind": "edit", "ask": True, "input": {"path": "notes"}, "result": "edited"}
SCRIPT = {
    "scenarios": [
        {
            "match": "stream",
            "steps": [
                *(
                    step
                    for n, word in enumerate(WORDS)
                    for step in ([{"say": word}, {"sleep": 0.01}] if n % 10 == 9 else [{"say": word}])
                ),
                GATE,  # the turn is still live when the new front has loaded, however fast it ran
                {"say": "THE END"},
            ],
        },
        {"match": "gate", "steps": [{"say": "before "}, GATE, {"say": "after"}]},
        {"match": "", "steps": [{"say": "short reply"}]},
    ]
}


@pytest.fixture
def runner_env(tmp_path, monkeypatch):
    with scripted_runner(tmp_path, monkeypatch, SCRIPT) as options:
        yield options


def updates(frames):
    return [f["params"]["update"] for f in frames if f.get("method") == "session/update"]


def text(frames) -> str:
    return "".join(u["content"]["text"] for u in updates(frames) if u["sessionUpdate"] == "agent_message_chunk")


def is_turn_text(frame: dict) -> bool:
    """A text chunk of the turn (not the commands update that may follow session/new's answer,
    which could come before the runner has even read the prompt)."""
    return (
        frame.get("method") == "session/update" and frame["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


def read_until(front: Front, predicate) -> list[dict]:
    frames = []
    while True:
        frame = front.next_frame()
        assert frame is not None, f"the front closed its stdout{front.exit_report()}"
        frames.append(frame)
        if predicate(frame):
            return frames


def is_permission(frame) -> bool:
    return frame.get("method") == "session/request_permission"


def allow(front: Front, request: dict) -> None:
    front.send(
        {
            "jsonrpc": "2.0",
            "id": request["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
        }
    )


def load(front: Front, sid: str, cwd: str) -> tuple[list[dict], dict]:
    """The frames before the load's answer, and the answer."""
    load_id = front.request("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
    frames = read_until(front, lambda f: f.get("id") == load_id and "method" not in f)
    return frames[:-1], frames[-1]


def start_turn(front: Front, cwd: str, prompt: str) -> str:
    sid = front.start_session(cwd)
    front.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": prompt}]})
    return sid


def run_states(db) -> list[str]:
    return [row[0] for row in sqlite3.connect(db).execute("SELECT status FROM runs ORDER BY seq_no")]


def test_a_front_killed_mid_turn_leaves_the_turn_running_and_a_new_front_gets_replay_then_the_live_rest(
    tmp_path, runner_env
):
    first = Front(*runner_env, cwd=str(tmp_path))
    sid = start_turn(first, str(tmp_path), "stream")
    shown = read_until(first, lambda f: "w50 " in text([f]))  # frames need not start where the agent paused
    first.kill_group()
    assert text(shown) and "".join(WORDS).startswith(text(shown))

    second = Front(*runner_env, cwd=str(tmp_path))
    second.initialize()
    replayed, answer = load(second, sid, str(tmp_path))
    assert "result" in answer
    live = read_until(second, is_permission)  # the gate, asked again of the front now attached
    allow(second, live[-1])
    waiting = second.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "next"}]})
    rest = read_until(second, lambda f: f.get("id") == waiting and "method" not in f)
    assert rest[-1]["result"] == {"stopReason": "end_turn"}
    everything = text(replayed) + text(live) + text(rest)
    assert everything == "".join(WORDS) + "THE END" + "short reply"  # nothing lost, nothing twice
    assert text(rest).index("THE END") < text(rest).index("short reply")  # the prompt waited behind
    assert run_states(tmp_path / "journal.db") == ["completed", "completed"]


def test_cancel_from_a_reattached_front_stops_the_detached_turn(tmp_path, runner_env):
    first = Front(*runner_env, cwd=str(tmp_path))
    sid = start_turn(first, str(tmp_path), "stream")
    read_until(first, is_turn_text)
    first.kill_group()

    second = Front(*runner_env, cwd=str(tmp_path))
    second.initialize()
    load(second, sid, str(tmp_path))
    second.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    db = tmp_path / "journal.db"
    wait_until(lambda: run_states(db) == ["cancelled"], what="the run to end as cancelled")
    assert second.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}) == {
        "stopReason": "end_turn"
    }
    assert [r["liveTurns"] for r in runners()] == [0]


def test_a_permission_question_asked_while_detached_is_asked_again_and_answered(tmp_path, runner_env):
    first = Front(*runner_env, cwd=str(tmp_path))
    sid = start_turn(first, str(tmp_path), "gate")
    asked = read_until(first, is_permission)[-1]
    first.kill_group()

    second = Front(*runner_env, cwd=str(tmp_path))
    second.initialize()
    replayed, _ = load(second, sid, str(tmp_path))
    again = read_until(second, is_permission)[-1]
    assert again["params"]["toolCall"]["toolCallId"] == asked["params"]["toolCall"]["toolCallId"]
    allow(second, again)
    rest = read_until(second, lambda f: text([f]) == "after")
    assert text(replayed) == "before " and text(rest) == "after"
    wait_until(lambda: run_states(tmp_path / "journal.db") == ["completed"], what="the run to complete")


def test_a_question_no_editor_answers_fails_closed_after_the_detached_wait(tmp_path, runner_env):
    first = Front(*runner_env, "--detached-wait", "0.5", cwd=str(tmp_path))
    sid = start_turn(first, str(tmp_path), "gate")
    read_until(first, is_permission)
    first.kill_group()
    db = tmp_path / "journal.db"
    wait_until(lambda: run_states(db) == ["completed"], what="the turn to go on without an answer")

    second = Front(*runner_env, "--detached-wait", "0.5", cwd=str(tmp_path))
    second.initialize()
    replayed, _ = load(second, sid, str(tmp_path))
    failed = [u for u in updates(replayed) if u.get("status") == "failed"]
    assert failed and "no editor answered" in json.dumps(failed[-1]["content"])
    assert text(replayed) == "before after"


def test_a_killed_runner_leaves_the_run_interrupted_and_the_next_front_starts_a_fresh_runner(tmp_path, runner_env):
    first = Front(*runner_env, cwd=str(tmp_path))
    sid = start_turn(first, str(tmp_path), "stream")
    read_until(first, is_turn_text)
    [old] = runners()
    os.kill(old["pid"], signal.SIGKILL)
    assert first.remaining_frames() is not None and first.wait() == 0  # the front ends with its runner
    wait_until(lambda: gone(old["pid"]), what="the killed runner to be reaped")

    second = Front(*runner_env, cwd=str(tmp_path))
    second.initialize()
    replayed, _ = load(second, sid, str(tmp_path))
    assert "interrupted" in text(replayed)
    [new] = runners()
    assert new["pid"] != old["pid"]
    assert run_states(tmp_path / "journal.db") == ["interrupted"]


def test_a_reload_right_after_a_runner_is_killed_mid_turn_always_says_the_turn_was_interrupted(tmp_path, runner_env):
    db = tmp_path / "journal.db"
    for attempt in range(5):
        starter = Front(*runner_env, cwd=str(tmp_path))
        sid = start_turn(starter, str(tmp_path), "stream")
        read_until(starter, lambda f: text([f]) != "")
        starter.kill_group()  # the runner's parent goes: when the runner dies, nobody reaps it at once
        [old] = [runner["pid"] for runner in runners()]
        os.kill(old, signal.SIGKILL)
        wait_until(partial(ended, old), what="the killed runner to die")

        front = Front(*runner_env, cwd=str(tmp_path))  # starts the next runner
        front.initialize()
        replayed, _ = load(front, sid, str(tmp_path))
        assert "This turn was interrupted" in text(replayed), f"attempt {attempt}"
        assert run_states(db)[-1] == "interrupted"  # settled before the replay, not after
        front.close_stdin()
        assert front.wait() == 0


def test_a_resume_mid_turn_shows_the_turn_from_its_start_then_the_live_rest_and_the_next_prompt_waits(
    tmp_path, runner_env
):
    first = Front(*runner_env, cwd=str(tmp_path))
    sid = start_turn(first, str(tmp_path), "stream")
    read_until(first, lambda f: "w50 " in text([f]))
    first.kill_group()

    second = Front(*runner_env, cwd=str(tmp_path))
    second.initialize()
    resume_id = second.request("session/resume", {"sessionId": sid, "cwd": str(tmp_path)})
    replayed = read_until(second, lambda f: f.get("id") == resume_id and "method" not in f)[:-1]
    waiting = second.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "next"}]})
    live = read_until(second, is_permission)  # the gate, asked again of the front now attached
    allow(second, live[-1])
    rest = read_until(second, lambda f: f.get("id") == waiting and "method" not in f)
    assert rest[-1]["result"] == {"stopReason": "end_turn"}
    assert text(replayed).startswith("w0 w1 ")  # the turn from its start, before the answer
    everything = text(replayed) + text(live) + text(rest)
    assert everything == "".join(WORDS) + "THE END" + "short reply"  # nothing lost, nothing twice
    assert texts_by_run(tmp_path / "journal.db") == ["".join(WORDS) + "THE END", "short reply"]  # each its own


def texts_by_run(db) -> list[str]:
    """Each run's agent text, as the journal keeps it."""
    texts: dict[int, str] = {}
    rows = sqlite3.connect(db).execute(
        "SELECT r.seq_no, e.payload FROM events e JOIN runs r ON r.id = e.run_id WHERE e.type = 'text' "
        "ORDER BY r.seq_no, e.seq"
    )
    for run_no, payload in rows:
        texts[run_no] = texts.get(run_no, "") + json.loads(payload)["text"]
    return list(texts.values())


def test_two_fronts_starting_at_once_start_one_runner(tmp_path, runner_env):
    fronts = [Front(*runner_env, cwd=str(tmp_path)) for _ in range(3)]
    for front in fronts:
        front.initialize()
    [runner] = runners()
    assert runner["connections"] == 3


def test_fronts_with_different_options_get_different_runners(tmp_path, runner_env):
    Front(*runner_env, cwd=str(tmp_path)).initialize()
    Front(*runner_env, "--max-workers", "3", cwd=str(tmp_path)).initialize()
    assert len({r["socket"] for r in runners()}) == 2


def test_a_runner_with_no_connection_and_no_live_turn_exits_after_its_idle_time(tmp_path, runner_env):
    front = Front(*runner_env, "--runner-idle", "0.3", cwd=str(tmp_path))
    front.initialize()
    [runner] = runners()
    front.close_stdin()
    assert front.wait() == 0
    wait_until(lambda: gone(runner["pid"]), what="the idle runner to exit")
    assert not os.path.exists(runner["socket"])


def test_runner_stop_cancels_live_turns_cleanly(tmp_path, runner_env):
    front = Front(*runner_env, cwd=str(tmp_path))
    start_turn(front, str(tmp_path), "stream")
    read_until(front, is_turn_text)
    done = cli("runner", "stop")
    assert "cancelled 1 live turn" in done.stdout
    assert run_states(tmp_path / "journal.db") == ["cancelled"]
    assert runners() == []


def test_the_runtime_directory_is_private_and_only_the_same_user_may_connect(runner_env):
    mode = stat.S_IMODE(runtime_dir().stat().st_mode)
    assert mode == 0o700
    first, second = socket.socketpair(socket.AF_UNIX)
    with first, second:
        assert peer_uid(first) == os.getuid()
        assert same_user(peer_uid(first))
    assert not same_user(os.getuid() + 1)
    assert not same_user(None)
    assert not same_user(1000, own=0)


def test_acp_server_runner_in_the_environment_turns_runner_mode_on(tmp_path, runner_env, monkeypatch):
    from stdio_server import StdioServer

    monkeypatch.setenv("ACP_SERVER_RUNNER", "1")
    server = StdioServer(*runner_env, cwd=str(tmp_path))
    try:
        server.start_session(str(tmp_path))
        [runner] = runners()
        assert runner["connections"] == 1 and runner["pid"] != server.process.pid
    finally:
        server.kill()


def test_cancel_request_on_a_prompt_from_a_connected_front_still_stops_its_turn(tmp_path, runner_env):
    front = Front(*runner_env, cwd=str(tmp_path))
    sid = front.start_session(str(tmp_path))
    prompt = front.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "stream"}]})
    read_until(front, is_turn_text)
    front.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": prompt}})
    answer = read_until(front, lambda f: f.get("id") == prompt and "method" not in f)[-1]
    assert answer["error"]["code"] == -32800
    wait_until(lambda: run_states(tmp_path / "journal.db") == ["cancelled"], what="the run to end as cancelled")


def test_a_runner_that_cannot_start_is_reported_by_the_front_with_its_log(tmp_path, runner_env):
    front = Front("--agent", "no-such-agent", "--db", str(tmp_path / "journal.db"), cwd=str(tmp_path))
    assert front.wait(timeout=60) == 1
    assert b"the runner did not start" in front.stderr and b"no-such-agent" in front.stderr


def test_the_trace_of_a_runner_holds_the_frames_of_its_connections(tmp_path, runner_env):
    trace = tmp_path / "trace.jsonl"
    front = Front(*runner_env, "--trace", str(trace), cwd=str(tmp_path))
    front.start_session(str(tmp_path))
    front.close_stdin()
    assert front.wait() == 0
    cli("runner", "stop")
    methods = [json.loads(line).get("frame", {}).get("method") for line in trace.read_text().splitlines()]
    assert "initialize" in methods and "session/new" in methods


def test_the_front_relays_bytes_unchanged_so_the_runner_answers_even_a_broken_line(tmp_path, runner_env):
    front = Front(*runner_env, cwd=str(tmp_path))
    front.send_raw(b"this is not json\n")
    assert front.next_frame()["error"]["code"] == -32700
    front.methods["a"] = "initialize"  # for the schema check of the answer
    front.send_raw(b'{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":1,')
    front.send_raw(b'"clientCapabilities":{}}}\n')  # one frame in two writes
    assert front.next_frame()["result"]["protocolVersion"] == 1


def test_a_file_read_the_editor_should_answer_waits_for_the_next_front(tmp_path, runner_env):
    script = tmp_path / "read.json"
    read = {"tool": "Read notes", "kind": "read", "read_file": str(tmp_path / "notes.txt")}
    script.write_text(json.dumps({"scenarios": [{"match": "", "steps": [read, {"say": "read it"}]}]}))
    options = ("--agent", "scripted", "--script", str(script), "--db", str(tmp_path / "journal.db"))
    caps = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}}}
    first = Front(*options, cwd=str(tmp_path))
    first.call("initialize", caps)
    sid = first.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
    first.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    read_until(first, lambda f: f.get("method") == "fs/read_text_file")
    first.kill_group()

    second = Front(*options, cwd=str(tmp_path))
    second.call("initialize", caps)
    load(second, sid, str(tmp_path))
    asked = read_until(second, lambda f: f.get("method") == "fs/read_text_file")[-1]
    second.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"content": "from the editor's buffer"}})
    rest = read_until(second, lambda f: text([f]) == "read it")
    assert "from the editor's buffer" in json.dumps(updates(rest))


def test_a_runner_that_closes_before_answering_is_replaced_and_gets_what_the_editor_sent(tmp_path, runner_env):
    from acp_server.cli.main import build_parser
    from acp_server.cli.runner import runner_config
    from acp_server.runner.paths import place_for

    place = place_for(runner_config(build_parser().parse_args(list(runner_env))))
    dying = socket.socket(socket.AF_UNIX)  # a runner caught exiting idle: accepts, then closes
    dying.bind(str(place.socket))
    dying.listen()
    front = Front(*runner_env, cwd=str(tmp_path))
    front.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    received = b""
    while not received.endswith(b"\n"):  # the editor's request reached it, unanswered
        connection, _ = dying.accept()  # the front's probe first, which sends nothing
        received = b""
        while (chunk := connection.recv(65536)) and not (received := received + chunk).endswith(b"\n"):
            pass
        if not received.endswith(b"\n"):
            connection.close()
    # As a runner exiting idle does: it stops listening, then the connection it had taken ends.
    # (The other way round, the front's restart could find this socket still listening.)
    dying.close()
    connection.close()
    answer = front.next_frame()
    assert answer["result"]["protocolVersion"] == 1
    [runner] = runners()
    assert runner["connections"] == 1


def test_a_runner_flooded_by_a_front_whose_editor_stops_reading_keeps_its_memory_flat(tmp_path, runner_env):
    flood = Flood("--runner", *runner_env, cwd=str(tmp_path))
    try:
        flood.prepare()
        [runner] = runners()
        growth, all_written = flood.hold(runner["pid"], FLOOD_REQUESTS)
        assert growth < GROWTH_LIMIT_KB, f"the runner's RSS grew {growth} kB while the editor did not read"
        assert not all_written, "the runner read every request while none of its answers were read"
        flood.read_all(FLOOD_REQUESTS)
        assert flood.prompt() == {"stopReason": "end_turn"}
    finally:
        flood.kill()


def test_max_workers_counts_the_agent_threads_of_the_whole_runner(tmp_path, runner_env):
    options = (*runner_env, "--max-workers", "1", "--log-level", "INFO")
    first, second = Front(*options, cwd=str(tmp_path)), Front(*options, cwd=str(tmp_path))
    start_turn(first, str(tmp_path), "gate")  # its thread waits for the permission answer
    question = read_until(first, is_permission)[-1]
    sid = second.start_session(str(tmp_path))
    prompt = second.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "short"}]})
    [runner] = runners()
    log = Path(runner["log"])
    wait_until(lambda: "a turn waits for one" in log.read_text(), what="the second front's turn to wait for a thread")
    allow(first, question)
    assert second.response(prompt)["result"] == {"stopReason": "end_turn"}
