"""ACP v2 through the runner: each connection to one runner speaks the version its `initialize`
chose, on the same sessions and turns. In memory (two fake editors on one hub: the real
handlers, routes and journal), then end to end (a v1 stdio front and the TS SDK's v2 client over
the runner's WebSocket `/acp`, the runner SIGKILLed and started again). Every frame a v1
connection gets is checked against the v1 schema, every frame a v2 one gets against v2's."""

from __future__ import annotations

from typing import Any

from harness import FakeEditor, running
from test_reattach import hub_serving

from acp_server.protocol import methods
from acp_server.runner.fanout import FanOut

PROMPT = {"type": "text", "text": "gate please"}
V2_INIT = {"protocolVersion": 2, "info": {"name": "v2-test", "version": "0"}, "capabilities": {}}


async def v2_initialize(editor: FakeEditor) -> dict[str, Any]:
    editor.version = 2  # from here on its frames are checked against the v2 schema
    return await editor.request("initialize", V2_INIT)


def kinds(updates: list[dict[str, Any]]) -> list[str]:
    return [u["sessionUpdate"] for u in updates]


def states(updates: list[dict[str, Any]]) -> list[str]:
    return [u["state"] for u in updates if u["sessionUpdate"] == "state_update"]


def idle_after(updates: list[dict[str, Any]], reason: str) -> bool:
    return any(u == {"sessionUpdate": "state_update", "state": "idle", "stopReason": reason} for u in updates)


async def test_a_v2_prompt_is_answered_at_acceptance_while_a_v1_editor_of_the_session_watches_in_v1(tmp_path):
    async with (
        hub_serving(tmp_path) as hub,
        running(hub.agent()) as v1,
        running(hub.agent()) as v2,
    ):
        await v1.initialize()
        assert (await v2_initialize(v2))["protocolVersion"] == 2
        sid = await v1.new_session(tmp_path)
        await v2.request("session/resume", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        v1.never_answer(methods.REQUEST_PERMISSION)  # the v2 client answers the question
        answer = await v2.prompt(sid, "gate please")  # answered while the turn still runs (or waits)
        assert answer["messageId"].endswith(":0")
        await v2.wait_for(lambda: idle_after(v2.updates[sid], "end_turn"))
        await v1.wait_for(lambda: "turnEnded" in str(v1.updates[sid]))

    shown = v2.updates[sid]
    assert states(shown) == ["idle", "running", "requires_action", "running", "idle"]
    (said,) = [u for u in shown if u["sessionUpdate"] == "user_message"]
    assert said == {"sessionUpdate": "user_message", "messageId": answer["messageId"], "content": [PROMPT]}
    calls = [u for u in shown if u["sessionUpdate"] == "tool_call_update"]
    assert calls[-1]["status"] == "completed"
    (asked,) = [r for r in v2.server_requests if r["method"] == methods.REQUEST_PERMISSION]
    assert asked["params"]["subject"]["toolCall"]["toolCallId"] == calls[-1]["toolCallId"]  # v2's shape
    watched = v1.updates[sid]
    assert "state_update" not in kinds(watched) and "user_message" not in kinds(watched)  # v1 only
    assert v1.text(sid) == v2.text(sid) == "before after"
    assert [u for u in watched if u["sessionUpdate"] == "tool_call_update"][-1]["status"] == "completed"
    (withdrawn,) = [f for f in v1.frames if f.get("method") == "$/cancel_request"]  # v1's copy of the question
    (v1_asked,) = [r for r in v1.server_requests if r["method"] == methods.REQUEST_PERMISSION]
    assert withdrawn["params"] == {"requestId": v1_asked["id"]}


async def test_a_v1_prompt_is_answered_at_its_end_while_a_v2_client_of_the_session_sees_running_then_idle(tmp_path):
    async with (
        hub_serving(tmp_path) as hub,
        running(hub.agent()) as v1,
        running(hub.agent()) as v2,
    ):
        await v1.initialize()
        await v2_initialize(v2)
        sid = await v1.new_session(tmp_path)
        await v2.request("session/resume", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        assert await v1.prompt(sid, "hello") == {"stopReason": "end_turn"}
        await v2.wait_for(lambda: idle_after(v2.updates[sid][1:], "end_turn"))

    shown = v2.updates[sid]
    assert states(shown) == ["idle", "running", "idle"]
    prompt = [u for u in shown if u["sessionUpdate"] == "user_message_chunk"]
    assert [p["content"]["text"] for p in prompt] == ["hello"] and prompt[0]["messageId"].endswith(":0")
    assert v2.text(sid) == "short reply"
    assert all("messageId" in u for u in shown if u["sessionUpdate"] == "agent_message_chunk")


async def test_a_cancel_from_the_v1_editor_ends_the_v2_clients_open_tool_call_cancelled_and_its_turn_idle(tmp_path):
    async with (
        hub_serving(tmp_path) as hub,
        running(hub.agent()) as v1,
        running(hub.agent()) as v2,
    ):
        await v1.initialize()
        await v2_initialize(v2)
        sid = await v1.new_session(tmp_path)
        await v2.request("session/resume", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        v1.never_answer(methods.REQUEST_PERMISSION)
        v2.never_answer(methods.REQUEST_PERMISSION)
        prompt = await v1.start_prompt(sid, "gate")
        await v2.wait_for(lambda: "requires_action" in states(v2.updates[sid]))
        await v1.notify("session/cancel", {"sessionId": sid})
        assert (await prompt)["result"] == {"stopReason": "cancelled"}
        await v2.wait_for(lambda: idle_after(v2.updates[sid], "cancelled"))

    calls = [u for u in v2.updates[sid] if u["sessionUpdate"] == "tool_call_update"]
    assert calls[-1]["status"] == "cancelled"  # v2's status; the v1 editor was told failed
    assert [u for u in v1.updates[sid] if u["sessionUpdate"] == "tool_call_update"][-1]["status"] == "failed"


def test_the_fan_out_rewrites_an_update_once_for_every_v2_connection():
    fan = FanOut()
    chunk = {"sessionUpdate": "agent_message_chunk", "messageId": "m", "content": {"type": "text", "text": "x"}}
    params = {"sessionId": "s", "update": chunk}
    assert fan.notification(methods.SESSION_UPDATE, params) == [(methods.SESSION_UPDATE, params)]
    ended = {"sessionUpdate": "session_info_update", "_meta": {"acp-server": {"turnEnded": {"stopReason": "error"}}}}
    sent = fan.notification(methods.SESSION_UPDATE, {"sessionId": "s", "update": ended})
    assert sent[-1][1]["update"]["state"] == "idle" and sent[-1][1]["update"]["error"]["code"] == -32603
