"""Real processes on one real database: a SIGKILL mid-turn loses nothing the editor was shown,
replays honestly as interrupted, and two servers share a journal without locking errors."""

from __future__ import annotations

import json
import os
import sqlite3

from stdio_server import StdioServer

WORDS = [f"w{i} " for i in range(4000)]
SCRIPT = {
    "scenarios": [
        {
            "match": "long",
            "steps": [
                {"tool": "Read config", "kind": "read", "input": {"path": "cfg"}, "result": "cfg ok"},
                *(
                    step
                    for n, word in enumerate(WORDS)
                    for step in ([{"say": word}, {"sleep": 0.005}] if n % 10 == 9 else [{"say": word}])
                ),
            ],
        },
        {"match": "", "steps": [{"say": "short reply"}]},
    ]
}


def start(tmp_path, db) -> StdioServer:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    return StdioServer("--agent", "scripted", "--script", str(script), "--db", str(db), cwd=str(tmp_path))


def test_sigkill_mid_turn_then_restart_replays_a_clean_prefix_and_an_interrupted_notice(tmp_path):
    db = tmp_path / "journal.db"
    first = start(tmp_path, db)
    try:
        sid = first.start_session(str(tmp_path))
        first.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "long"}]})
        seen = 0
        while seen < 40:
            frame = first.next_frame()
            update = frame.get("params", {}).get("update", {})
            seen += update.get("sessionUpdate") == "agent_message_chunk"
    finally:
        first.kill()  # SIGKILL, and reaped, as an editor would
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)

    second = start(tmp_path, db)
    try:
        second.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        load_id = second.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        updates = []
        while (frame := second.next_frame()).get("id") != load_id:
            updates.append(frame["params"]["update"])
        assert frame["result"]["modes"]["currentModeId"] == "ask"
        kinds = [u["sessionUpdate"] for u in updates]
        assert kinds[0] == "user_message_chunk" and updates[0]["content"]["text"] == "long"
        assert kinds[1:4] == ["tool_call", "tool_call_update", "tool_call_update"]
        assert updates[3]["status"] == "completed"
        texts = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
        *reply, notice = texts
        replayed = "".join(reply)
        assert replayed and "".join(WORDS).startswith(replayed)
        assert "interrupted" in notice
        assert kinds[-1] == "session_info_update"
        assert second.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "again"}]}) == {
            "stopReason": "end_turn"
        }
    finally:
        second.kill()
    runs = sqlite3.connect(db).execute("SELECT status FROM runs ORDER BY seq_no").fetchall()
    assert runs == [("interrupted",), ("completed",)]


def test_two_servers_share_one_journal_at_the_same_time(tmp_path):
    db = tmp_path / "journal.db"
    servers = [start(tmp_path, db), start(tmp_path, db)]
    try:
        sessions = [server.start_session(str(tmp_path)) for server in servers]
        prompts = [
            server.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "long"}]})
            for server, sid in zip(servers, sessions, strict=True)
        ]
        for server, prompt_id in zip(servers, prompts, strict=True):
            assert server.response(prompt_id)["result"] == {"stopReason": "end_turn"}
        listed = servers[0].call("session/list", {})["sessions"]
        assert {s["sessionId"] for s in listed} == set(sessions)
        for server in servers:
            server.close_stdin()
            assert server.wait() == 0
            assert b"locked" not in server.stderr, server.stderr.decode()[-2000:]
    finally:
        for server in servers:
            server.kill()
    count = sqlite3.connect(db).execute("SELECT count(*) FROM events WHERE type = 'text'").fetchone()[0]
    assert count >= 2  # deltas merge while the reader lags, so fewer rows than words
    assert os.path.getsize(db) > 0


EFFECT_SCRIPT = {
    "scenarios": [
        {
            "match": "effects",
            "steps": [
                step
                for n in range(60)
                for step in (
                    {"tool": f"Append {n}", "kind": "execute", "run": f"echo {n} >> effects.log"},
                    {"say": f"after effect {n}. "},
                    {"sleep": 0.01},
                )
            ],
        },
        {"match": "", "steps": [{"say": "ok"}]},
    ]
}
KILLS = int(os.environ.get("ACP_CRASH_KILLS", "3"))


def test_repeated_sigkills_never_lose_integrity_and_never_rerun_a_dispatched_tool(tmp_path):
    import random

    rng = random.Random(11)
    script = tmp_path / "effects.json"
    script.write_text(json.dumps(EFFECT_SCRIPT))
    db = tmp_path / "journal.db"
    effects = tmp_path / "effects.log"

    def server() -> StdioServer:
        return StdioServer("--agent", "scripted", "--script", str(script), "--db", str(db), cwd=str(tmp_path))

    for _ in range(KILLS):
        srv = server()
        try:
            sid = srv.start_session(str(tmp_path))
            srv.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "effects"}]})
            for _ in range(rng.randint(5, 80)):
                srv.next_frame()
        finally:
            srv.kill()
        assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)
        ran_before_restart = effects.read_text().splitlines() if effects.exists() else []
        srv = server()
        try:
            srv.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            loaded = srv.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
            updates = []
            while (frame := srv.next_frame()).get("id") != loaded:
                updates.append(frame["params"]["update"])
            ids = [u["toolCallId"] for u in updates if u["sessionUpdate"] == "tool_call"]
            assert len(ids) == len(set(ids)), "a tool call was replayed twice"
            dispatched = [u for u in updates if u.get("status") == "in_progress"]
            assert len(ran_before_restart) <= len(dispatched) <= len(ran_before_restart) + 1
            assert (
                "interrupted"
                in [u for u in updates if u["sessionUpdate"] == "agent_message_chunk"][-1]["content"]["text"]
            )
            srv.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}]})
        finally:
            srv.close_stdin()
            srv.wait()
            srv.kill()
        after = effects.read_text().splitlines() if effects.exists() else []
        assert after == ran_before_restart, "a tool ran again after the restart"
        effects.unlink(missing_ok=True)


# A fast stream, 10 words at a time with pauses short enough that a group-commit window (the old
# policy) always held text the editor had already shown; then a question the test never answers,
# so that the kill lands mid-turn however far the server runs ahead of the test's reading.
STREAM_WORDS = [f"s{i} " for i in range(3000)]
STREAM_SCRIPT = {
    "scenarios": [
        {
            "match": "stream",
            "steps": [
                *(
                    step
                    for n, word in enumerate(STREAM_WORDS)
                    for step in ([{"say": word}, {"sleep": 0.005}] if n % 10 == 9 else [{"say": word}])
                ),
                {"ask_user": "Go on?", "choices": ["yes", "no"]},
            ],
        },
        {"match": "", "steps": [{"say": "ok"}]},
    ]
}


def shown_text(frames: list[dict]) -> str:
    return "".join(
        f["params"]["update"]["content"]["text"]
        for f in frames
        if f.get("method") == "session/update" and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


def read_to_the_end(srv: StdioServer) -> list[dict]:
    """What a killed server had written: every frame still in the pipe (a line the kill cut
    short is no frame, and an editor shows nothing of it)."""
    frames = []
    while True:
        try:
            frame = srv.next_frame()
        except (AssertionError, json.JSONDecodeError):
            assert srv.next_frame() is None, "only the last line can be cut short"
            return frames
        if frame is None:
            return frames
        frames.append(frame)


def test_after_a_sigkill_mid_stream_a_reload_shows_all_the_editor_was_shown(tmp_path):
    import random

    rng = random.Random(int(os.environ.get("ACP_CRASH_SEED", "7")))
    script = tmp_path / "stream.json"
    script.write_text(json.dumps(STREAM_SCRIPT))
    db = tmp_path / "journal.db"
    full = "".join(STREAM_WORDS)

    def server() -> StdioServer:
        return StdioServer("--agent", "scripted", "--script", str(script), "--db", str(db), cwd=str(tmp_path))

    for _ in range(KILLS):
        srv = server()
        try:
            sid = srv.start_session(str(tmp_path))
            prompt = srv.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "stream"}]})
            kill_at = rng.randint(1, len(full))  # chars shown before the kill
            frames: list[dict] = []
            while len(shown_text(frames)) < kill_at:
                frame = srv.next_frame()
                assert frame is not None and frame.get("id") != prompt, "the turn ended before the kill"
                frames.append(frame)
        finally:
            srv.kill()
        shown = shown_text(frames + read_to_the_end(srv))
        assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)

        srv = server()
        try:
            srv.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            loaded = srv.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
            replay = []
            while (frame := srv.next_frame()).get("id") != loaded:
                replay.append(frame)
        finally:
            srv.close_stdin()
            srv.wait()
            srv.kill()
        *reply, notice = [
            f["params"]["update"]["content"]["text"]
            for f in replay
            if f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        ]
        replayed = "".join(reply)
        assert "interrupted" in notice
        assert replayed.startswith(shown), (
            f"the editor was shown {len(shown)} chars, a reload shows {len(replayed)} (killed at {kill_at})"
        )
        assert full.startswith(replayed)
