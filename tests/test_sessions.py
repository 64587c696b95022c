"""Durable sessions over ACP: load replays what was seen, resume does not, list, close,
delete, and sessions that survive a restart of the server."""

from __future__ import annotations

import threading
from contextlib import asynccontextmanager

import anyio
import pytest
from harness import RemoteError, running

from acp_server.acp.handlers import AcpAgent
from acp_server.rpc.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND
from adapters.scripted import ScriptedAdapter
from journal.store import Journal

SCRIPT = {
    "scenarios": [
        {
            "match": "work",
            "steps": [
                {"think": "let me see"},
                {"plan": [{"content": "read", "status": "in_progress"}]},
                {"say": "Reading ", "repeat": 3},
                {"tool": "Read notes", "kind": "read", "read_file": "notes.txt", "ask": True},
                {"say": "done."},
                {"title": "Notes review"},
            ],
        },
        {"match": "always", "steps": [{"tool": "Format", "kind": "edit", "ask": True, "result": "ok"}]},
    ]
}


@asynccontextmanager
async def server(db_path):
    journal = await Journal.open(db_path)
    try:
        async with running(AcpAgent(ScriptedAdapter.from_data(SCRIPT), journal=journal)) as editor:
            await editor.initialize()
            yield editor
    finally:
        await journal.close()


def merged(updates):
    """Live updates with consecutive text chunks of one kind merged, as replay sends them."""
    out = []
    for update in updates:
        kind = update["sessionUpdate"]
        if out and kind in ("agent_message_chunk", "agent_thought_chunk") and out[-1]["sessionUpdate"] == kind:
            text = out[-1]["content"]["text"] + update["content"]["text"]
            out[-1] = {**out[-1], "content": {"type": "text", "text": text}}
        else:
            out.append(update)
    return out


async def test_initialize_advertises_load_and_the_session_capabilities_really_implemented(tmp_path):
    journal = await Journal.open(tmp_path / "j.db")
    async with running(AcpAgent(ScriptedAdapter.from_data(SCRIPT), journal=journal)) as editor:
        caps = (await editor.initialize())["agentCapabilities"]
        assert caps["loadSession"] is True
        assert caps["sessionCapabilities"] == {
            "list": {},
            "resume": {},
            "close": {},
            "delete": {},
            "additionalDirectories": {},
        }
    await journal.close()


async def test_load_after_a_restart_replays_the_conversation_as_it_was_seen_live_then_answers(tmp_path):
    (tmp_path / "notes.txt").write_text("remember the milk")
    db = tmp_path / "journal.db"
    async with server(db) as editor:
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "work please")
        await editor.prompt(sid, "and echo this")
        live = list(editor.updates[sid])
    async with server(db) as editor:
        load_id = editor.last_id + 1
        loaded = await editor.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        assert loaded["modes"]["currentModeId"] == "ask"
        await editor.wait_for(lambda: "available_commands_update" in editor.kinds(sid))
        replayed = editor.updates[sid][:-1]
        response_at = next(i for i, f in enumerate(editor.frames) if f.get("id") == load_id)
        after = [f["params"]["update"]["sessionUpdate"] for f in editor.frames[response_at:] if "params" in f]
        assert after == ["available_commands_update"]
    user = [u for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
    assert [u["content"]["text"] for u in user] == ["work please", "and echo this"]
    live = [u for u in live if u["sessionUpdate"] != "available_commands_update"]
    assert [u for u in replayed if u["sessionUpdate"] != "user_message_chunk"] == merged(live)


async def test_resume_reattaches_without_replaying_and_the_next_prompt_has_the_history(tmp_path):
    db = tmp_path / "journal.db"
    async with server(db) as editor:
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "first words")
    async with server(db) as editor:
        resumed = await editor.request("session/resume", {"sessionId": sid, "cwd": str(tmp_path)})
        assert set(resumed) == {"modes", "configOptions"}
        assert await editor.prompt(sid, "second words") == {"stopReason": "end_turn"}
        assert editor.kinds(sid) == ["available_commands_update", "agent_message_chunk"]
        assert editor.text(sid) == "second words"


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
async def test_load_and_resume_announce_the_slash_commands_right_after_their_answer(tmp_path, method):
    db = tmp_path / "journal.db"
    async with server(db) as editor:
        sid = await editor.new_session(tmp_path)
        [announced] = await editor.wait_for(
            lambda: [u for u in editor.updates[sid] if u["sessionUpdate"] == "available_commands_update"]
        )
        await editor.request("session/set_mode", {"sessionId": sid, "modeId": "read-only"})
        await editor.prompt(sid, "first words")
    async with server(db) as editor:
        answer = await editor.request(method, {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        await editor.wait_for(lambda: "available_commands_update" in editor.kinds(sid))
        answered_at = next(i for i, f in enumerate(editor.frames) if f.get("id") == editor.last_id)
        after = [f["params"]["update"] for f in editor.frames[answered_at:] if f.get("method") == "session/update"]
    assert after == [announced]  # the same list as after session/new, and nothing else
    assert answer["modes"]["currentModeId"] == "read-only"  # the mode and options as they are now
    [mode] = [option for option in answer["configOptions"] if option["id"] == "mode"]
    assert mode["currentValue"] == "read-only"


async def test_a_prompt_to_a_known_session_after_a_restart_works_without_load(tmp_path):
    db = tmp_path / "journal.db"
    async with server(db) as editor:
        sid = await editor.new_session(tmp_path)
    async with server(db) as editor:
        assert await editor.prompt(sid, "hello again") == {"stopReason": "end_turn"}


@pytest.mark.parametrize("method", ["session/load", "session/resume", "session/prompt", "session/close"])
async def test_an_unknown_session_is_an_error_never_a_new_session(tmp_path, method):
    async with server(tmp_path / "journal.db") as editor:
        params = {
            "sessionId": "sess_nope",
            "cwd": str(tmp_path),
            "mcpServers": [],
            "prompt": [{"type": "text", "text": "hi"}],
        }
        with pytest.raises(RemoteError) as caught:
            await editor.request(method, params)
        assert caught.value.code == RESOURCE_NOT_FOUND
        assert (await editor.request("session/list", {}))["sessions"] == []


async def test_list_is_newest_first_filtered_by_cwd_and_pages_with_next_cursor(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    async with server(tmp_path / "journal.db") as editor:
        in_a = [await editor.new_session(a) for _ in range(60)]
        in_b = await editor.new_session(b)
        await editor.prompt(in_a[0], "retitled and touched")
        seen, cursor = [], None
        while True:
            page = await editor.request("session/list", {"cwd": str(a), **({"cursor": cursor} if cursor else {})})
            seen += page["sessions"]
            cursor = page.get("nextCursor")
            if cursor is None:
                break
        assert len(seen) == 60 and {s["sessionId"] for s in seen} == set(in_a)
        assert seen[0]["sessionId"] == in_a[0] and seen[0]["title"] == "retitled and touched"
        assert all(s["cwd"] == str(a) for s in seen)
        updated = [s["updatedAt"] for s in seen]
        assert updated == sorted(updated, reverse=True)
        everything = await editor.request("session/list", {})
        assert everything["sessions"][0]["sessionId"] == in_a[0]
        assert in_b in {s["sessionId"] for s in everything["sessions"]}
        with pytest.raises(RemoteError) as caught:
            await editor.request("session/list", {"cursor": "garbage!"})
        assert caught.value.code == INVALID_PARAMS


async def test_delete_removes_the_session_and_its_journal(tmp_path):
    async with server(tmp_path / "journal.db") as editor:
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "something")
        assert await editor.request("session/delete", {"sessionId": sid}) == {}
        assert await editor.request("session/delete", {"sessionId": sid}) == {}
        assert (await editor.request("session/list", {}))["sessions"] == []
        with pytest.raises(RemoteError) as caught:
            await editor.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        assert caught.value.code == RESOURCE_NOT_FOUND


async def test_close_cancels_a_running_turn_and_the_session_can_be_resumed(tmp_path):
    journal = await Journal.open(tmp_path / "journal.db")
    agent = AcpAgent(
        ScriptedAdapter.from_data({"scenarios": [{"match": "slow", "steps": [{"say": "working"}, {"sleep": 30}]}]}),
        journal=journal,
    )
    async with running(agent) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        task = await editor.start_prompt(sid, "slow")
        await editor.wait_for(lambda: editor.text(sid) == "working")
        assert await editor.request("session/close", {"sessionId": sid}) == {}
        assert (await task)["result"] == {"stopReason": "cancelled"}
        assert "modes" in await editor.request("session/resume", {"sessionId": sid, "cwd": str(tmp_path)})
        assert await editor.prompt(sid, "back") == {"stopReason": "end_turn"}
    await journal.close()


async def test_an_always_answer_survives_a_restart(tmp_path):
    db = tmp_path / "journal.db"
    async with server(db) as editor:

        async def always(params):
            return {"outcome": {"outcome": "selected", "optionId": "allow_always"}}

        editor.handlers["session/request_permission"] = always
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "always")
        assert len(editor.server_requests) == 1
    async with server(db) as editor:
        await editor.prompt(sid, "always")
        assert editor.server_requests == []
        assert editor.updates[sid][-1]["status"] == "completed"


class RecordingAdapter:
    """Remembers the history each turn was given."""

    name = "recording"

    def __init__(self) -> None:
        self.histories = []

    def capabilities(self):
        from adapters.base import AdapterCapabilities

        return AdapterCapabilities()

    def run_turn(self, turn, sink):
        self.histories.append(list(turn.history))
        sink.text(f"reply to {turn.text}")
        return "end_turn"

    def cancel(self, session_id):
        pass


async def test_the_agent_gets_the_conversation_so_far_live_and_after_a_restart(tmp_path):
    from adapters.base import Message

    db = tmp_path / "journal.db"
    adapter = RecordingAdapter()
    for _ in range(2):
        journal = await Journal.open(db)
        async with running(AcpAgent(adapter, journal=journal)) as editor:
            await editor.initialize()
            if not adapter.histories:
                sid = await editor.new_session(tmp_path)
                await editor.prompt(sid, "one")
            await editor.prompt(sid, "two")
        await journal.close()
    expected = [Message("user", "one"), Message("agent", "reply to one")]
    assert adapter.histories == [[], expected, [*expected, Message("user", "two"), Message("agent", "reply to two")]]


async def test_load_and_resume_need_the_sessions_own_working_directory(tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    (tmp_path / "link").symlink_to(tmp_path)
    async with server(tmp_path / "journal.db") as editor:
        sid = await editor.new_session(tmp_path)
        for method in ("session/load", "session/resume"):
            with pytest.raises(RemoteError) as caught:
                await editor.request(method, {"sessionId": sid, "cwd": str(other), "mcpServers": []})
            assert caught.value.code == INVALID_PARAMS
            problem = "is not the session's working directory"
            assert caught.value.data == {"errors": [{"field": "cwd", "problem": problem}]}
        assert "modes" in await editor.request("session/resume", {"sessionId": sid, "cwd": str(tmp_path / "link")})


async def test_text_that_is_not_valid_unicode_is_stored_and_replayed_instead_of_failing_the_turn(tmp_path):
    db = tmp_path / "journal.db"
    async with server(db) as editor:
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "lone \ud800 surrogate") == {"stopReason": "end_turn"}
    async with server(db) as editor:
        await editor.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        (user,) = [u for u in editor.updates[sid] if u["sessionUpdate"] == "user_message_chunk"]
        assert user["content"]["text"] == "lone \ufffd surrogate"
        sessions = (await editor.request("session/list", {}))["sessions"]
        assert sessions[0]["title"] == "lone \ufffd surrogate"


async def test_additional_directories_widen_local_file_access_and_are_replaced_on_resume(tmp_path):
    work, shared, other = tmp_path / "work", tmp_path / "shared", tmp_path / "other"
    for directory in (work, shared, other):
        directory.mkdir()
    (shared / "lib.txt").write_text("shared text")
    (other / "lib.txt").write_text("other text")
    script = {
        "scenarios": [
            {
                "match": "",
                "steps": [
                    {"tool": "Read", "kind": "read", "read_file": str(shared / "lib.txt")},
                    {"tool": "Read", "kind": "read", "read_file": str(other / "lib.txt")},
                ],
            }
        ]
    }
    journal = await Journal.open(tmp_path / "journal.db")
    async with running(AcpAgent(ScriptedAdapter.from_data(script), journal=journal)) as editor:
        await editor.initialize()
        created = await editor.request(
            "session/new", {"cwd": str(work), "mcpServers": [], "additionalDirectories": [str(shared)]}
        )
        sid = created["sessionId"]
        await editor.prompt(sid, "go")
        done = [u for u in editor.updates[sid] if u.get("status") in ("completed", "failed")]
        assert [u["status"] for u in done] == ["completed", "failed"]
        listed = (await editor.request("session/list", {}))["sessions"][0]
        assert listed["additionalDirectories"] == [str(shared)]
        await editor.request(
            "session/resume", {"sessionId": sid, "cwd": str(work), "additionalDirectories": [str(other)]}
        )
        await editor.prompt(sid, "again")
        done = [u for u in editor.updates[sid] if u.get("status") in ("completed", "failed")]
        assert [u["status"] for u in done[2:]] == ["failed", "completed"]
        with pytest.raises(RemoteError) as caught:
            await editor.request("session/new", {"cwd": str(work), "mcpServers": [], "additionalDirectories": ["rel"]})
        assert caught.value.code == INVALID_PARAMS
    await journal.close()


class ClosingAdapter(RecordingAdapter):
    def __init__(self) -> None:
        super().__init__()
        self.closed = []
        self._changed = threading.Condition()

    def close_session(self, session_id):
        with self._changed:
            self.closed.append(session_id)
            self._changed.notify_all()

    async def wait_closed(self, count: int) -> None:
        """Until `count` hooks ran: they run in worker threads, after the turns wind down."""

        def wait() -> bool:
            with self._changed:
                return self._changed.wait_for(lambda: len(self.closed) >= count, timeout=5)

        assert await anyio.to_thread.run_sync(wait), f"closed only {self.closed}"


async def test_the_adapter_hears_when_a_session_is_closed_deleted_or_the_client_leaves(tmp_path):
    adapter = ClosingAdapter()
    journal = await Journal.open(tmp_path / "journal.db")
    async with running(AcpAgent(adapter, journal=journal)) as editor:
        await editor.initialize()
        first, second, third = [await editor.new_session(tmp_path) for _ in range(3)]
        await editor.prompt(first, "hello")
        await editor.request("session/close", {"sessionId": first})
        await editor.request("session/delete", {"sessionId": second})
        await adapter.wait_closed(2)
        assert sorted(adapter.closed) == sorted([first, second])
    await journal.close()
    assert sorted(adapter.closed) == sorted([first, second, third])
