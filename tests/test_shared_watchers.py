"""Watching a shared session, in memory: fake editors on one runner hub (the real handlers,
routes and journal). A read-only connection sees the turn but is never asked a question, and
what would change the session is refused; any connection lists every stored session with the
agent it was made with, its state now and whether a question of it is open."""

from __future__ import annotations

import anyio
import pytest
from harness import RemoteError, running
from test_reattach import asked, hub_serving, params

from acp_server.protocol import methods
from acp_server.runner.tokens import READ_ONLY_REFUSED


def turn_ended(updates: list[dict]) -> bool:
    return any("turnEnded" in u.get("_meta", {}).get("acp-server", {}) for u in updates)


async def test_a_read_only_connection_sees_the_turn_but_is_never_asked_and_may_not_steer_it(tmp_path):
    async with (
        hub_serving(tmp_path) as hub,
        running(hub.agent()) as first,
        running(hub.agent(read_only=True)) as watcher,
    ):
        await first.initialize()
        await watcher.initialize()
        sid = await first.new_session(tmp_path)
        await watcher.request("session/load", params(sid, tmp_path))
        first.never_answer(methods.REQUEST_PERMISSION)
        turn = await first.start_prompt(sid, "gate")
        await asked(first)
        for method, extra in [
            ("session/prompt", {"prompt": [{"type": "text", "text": "hi"}]}),
            ("session/cancel", {}),
            ("session/set_config_option", {"configId": "mode", "value": "yolo"}),
        ]:
            with pytest.raises(RemoteError) as refused:
                await watcher.request(method, {"sessionId": sid, **extra})
            assert refused.value.code == READ_ONLY_REFUSED and "read-only" in str(refused.value.message)
        first.handlers[methods.REQUEST_PERMISSION] = first.allow_once
        async with running(hub.agent()) as helper:  # a controlling connection answers
            await helper.initialize()
            await helper.request("session/load", params(sid, tmp_path))
            with anyio.fail_after(10):
                answer = await turn
            await watcher.wait_for(lambda: turn_ended(watcher.updates[sid]))
    assert answer["result"] == {"stopReason": "end_turn"}  # not cancelled by the watcher
    assert watcher.text(sid) == "before after"
    assert not [r for r in watcher.server_requests if r["method"] == methods.REQUEST_PERMISSION]


async def test_any_connection_lists_every_stored_session_with_its_agent_state_and_whether_it_waits_for_you(tmp_path):
    async with hub_serving(tmp_path) as hub, running(hub.agent()) as first, running(hub.agent(read_only=True)) as other:
        await first.initialize()
        done = await first.new_session(tmp_path)
        await first.prompt(done, "hello")
        busy = await first.new_session(tmp_path / "..")
        first.never_answer(methods.REQUEST_PERMISSION)
        await first.start_prompt(busy, "gate")
        await asked(first)
        await other.initialize()
        listed = (await other.request("session/list", {}))["sessions"]
    meta = {info["sessionId"]: (info["cwd"], info["_meta"]["acp-server"]) for info in listed}
    assert meta[done] == (str(tmp_path), {"state": "completed", "attached": 1, "waiting": False, "agent": "scripted"})
    assert meta[busy][1] == {"state": "running", "attached": 1, "waiting": True, "agent": "scripted"}  # asked


async def test_a_mode_changed_on_one_connection_is_shown_on_every_connection_with_the_session_open(tmp_path):
    async with hub_serving(tmp_path) as hub, running(hub.agent()) as first, running(hub.agent(read_only=True)) as other:
        await first.initialize()
        await other.initialize()
        sid = await first.new_session(tmp_path)
        await other.request("session/load", params(sid, tmp_path))
        await first.request("session/set_mode", {"sessionId": sid, "modeId": "yolo"})
        for editor in (first, other):
            await editor.wait_for(lambda e=editor: "current_mode_update" in e.kinds(sid))
            update = next(u for u in editor.updates[sid] if u["sessionUpdate"] == "current_mode_update")
            assert update["currentModeId"] == "yolo"
