"""Prompt turns: streaming, queueing, cancellation, permissions and agent failures."""

from __future__ import annotations

import threading

import anyio
import pytest
from harness import RemoteError, running

from acp_server.acp.handlers import AcpAgent, AgentOptions
from acp_server.rpc.errors import INTERNAL_ERROR
from adapters.base import AdapterCapabilities
from adapters.scripted import ScriptedAdapter


def scripted(*scenarios: tuple[str, list[dict]], **options) -> AcpAgent:
    data = {"scenarios": [{"match": match, "steps": steps} for match, steps in scenarios]}
    return AcpAgent(ScriptedAdapter.from_data(data), AgentOptions(**options))


SLOW = ("slow", [{"say": "working"}, {"sleep": 30}, {"say": "never"}])


async def test_a_turn_streams_every_update_before_its_response(tmp_path):
    agent = scripted(("go", [{"think": "plan it"}, {"say": "a", "repeat": 50}, {"title": "Greeting"}]))
    async with running(agent) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "go") == {"stopReason": "end_turn"}
        assert editor.text(sid) == "a" * 50
        assert editor.text(sid, "agent_thought_chunk") == "plan it"
        response_at = next(i for i, f in enumerate(editor.frames) if f.get("result") == {"stopReason": "end_turn"})
        last_update_at = max(i for i, f in enumerate(editor.frames) if f.get("method") == "session/update")
        assert last_update_at < response_at
        assert editor.kinds(sid)[-1] == "session_info_update"


async def test_cancel_during_a_sleep_ends_the_turn_cancelled_and_the_session_keeps_working(tmp_path):
    async with running(scripted(SLOW)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        task = await editor.start_prompt(sid, "slow")
        await editor.wait_for(lambda: editor.text(sid) == "working")
        await editor.notify("session/cancel", {"sessionId": sid})
        assert (await task)["result"] == {"stopReason": "cancelled"}
        assert "never" not in editor.text(sid)
        assert await editor.prompt(sid, "hello") == {"stopReason": "end_turn"}
        assert editor.text(sid).endswith("hello")


async def test_a_cancel_sent_as_a_request_still_cancels_and_is_answered_with_an_empty_result(tmp_path):
    async with running(scripted(SLOW)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        task = await editor.start_prompt(sid, "slow")
        await editor.wait_for(lambda: editor.text(sid) == "working")
        assert await editor.request("session/cancel", {"sessionId": sid}) == {}
        assert (await task)["result"] == {"stopReason": "cancelled"}
        assert await editor.request("session/cancel", {"sessionId": "sess_unknown"}) == {}


async def test_a_prompt_sent_during_a_turn_waits_for_it_and_then_runs(tmp_path):
    # The first turn holds on a permission question until the test has seen the second prompt
    # wait, so the test fails if the second prompt ever runs beside the first.
    agent = scripted(("first", [{"say": "one"}, {"tool": "Edit", "kind": "edit", "ask": True}, {"say": "two"}]))
    async with running(agent) as editor:
        release = anyio.Event()

        async def hold(params):
            await release.wait()
            return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

        editor.handlers["session/request_permission"] = hold
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        first = await editor.start_prompt(sid, "first")
        await editor.wait_for(lambda: any(r["method"] == "session/request_permission" for r in editor.server_requests))
        second = await editor.start_prompt(sid, "second")
        await editor.request("session/set_mode", {"sessionId": sid, "modeId": "ask"})  # the server has read it
        assert not second.done() and "second" not in editor.text(sid)
        release.set()
        assert (await second)["result"] == {"stopReason": "end_turn"}
        assert first.done() and (await first)["result"] == {"stopReason": "end_turn"}
        assert editor.text(sid) == "onetwosecond"


async def test_cancel_ends_the_running_turn_and_every_queued_prompt_but_not_later_ones(tmp_path):
    async with running(scripted(SLOW)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        running_turn = await editor.start_prompt(sid, "slow")
        await editor.wait_for(lambda: editor.text(sid) == "working")
        queued = [await editor.start_prompt(sid, f"queued {n}") for n in range(3)]
        await editor.notify("session/cancel", {"sessionId": sid})
        later = await editor.prompt(sid, "after the cancel")
        assert (await running_turn)["result"] == {"stopReason": "cancelled"}
        for task in queued:
            assert (await task)["result"] == {"stopReason": "cancelled"}
        assert later == {"stopReason": "end_turn"}
        assert "queued" not in editor.text(sid)


async def test_a_cancel_on_an_idle_session_does_not_affect_the_next_prompt(tmp_path):
    async with running(scripted()) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.notify("session/cancel", {"sessionId": sid})
        await editor.notify("session/cancel", {"sessionId": "sess_unknown"})
        assert await editor.prompt(sid, "still here") == {"stopReason": "end_turn"}
        assert editor.text(sid) == "still here"


async def test_two_sessions_stream_at_the_same_time(tmp_path):
    steps = [{"say": "x", "repeat": 20}, {"sleep": 0.05}, {"say": "y", "repeat": 20}]
    async with running(scripted(("stream", steps))) as editor:
        await editor.initialize()
        first, second = await editor.new_session(tmp_path), await editor.new_session(tmp_path)
        tasks = [await editor.start_prompt(first, "stream"), await editor.start_prompt(second, "stream")]
        await editor.wait_for(lambda: editor.text(first) and editor.text(second))
        for task in tasks:
            assert (await task)["result"] == {"stopReason": "end_turn"}
        assert editor.text(first) == editor.text(second) == "x" * 20 + "y" * 20


async def test_permission_requests_reference_the_visible_tool_call_and_offer_four_choices(tmp_path):
    agent = scripted(
        (
            "tool",
            [{"tool": "Delete junk", "kind": "delete", "input": {"path": "junk"}, "ask": True, "result": "deleted"}],
        )
    )
    async with running(agent) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "tool")
        (request,) = [r for r in editor.server_requests if r["method"] == "session/request_permission"]
        tool_call = next(u for u in editor.updates[sid] if u["sessionUpdate"] == "tool_call")
        assert request["params"]["toolCall"]["toolCallId"] == tool_call["toolCallId"]
        assert request["params"]["toolCall"]["title"] == "Delete junk"
        assert request["params"]["toolCall"]["rawInput"] == {"path": "junk"}
        assert [o["kind"] for o in request["params"]["options"]] == [
            "allow_once",
            "allow_always",
            "reject_once",
            "reject_always",
        ]
        assert editor.frames.index(request) > editor.frames.index(
            next(f for f in editor.frames if f.get("params", {}).get("update") == tool_call)
        )
        assert editor.updates[sid][-1]["status"] == "completed"


async def test_a_rejected_tool_ends_failed_and_the_turn_goes_on(tmp_path):
    agent = scripted(
        ("tool", [{"tool": "Risky", "kind": "execute", "ask": True, "run": "touch made"}, {"say": "carried on"}])
    )
    async with running(agent) as editor:

        async def reject(params):
            return {"outcome": {"outcome": "selected", "optionId": "reject_once"}}

        editor.handlers["session/request_permission"] = reject
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "tool") == {"stopReason": "end_turn"}
        statuses = [u.get("status") for u in editor.updates[sid] if u["sessionUpdate"].startswith("tool_call")]
        assert statuses == ["pending", "failed"]
        assert editor.text(sid) == "carried on"
        assert not (tmp_path / "made").exists()


async def test_allow_always_is_remembered_for_that_tool_in_the_session(tmp_path):
    agent = scripted(("tool", [{"tool": "Format", "kind": "edit", "ask": True, "result": "ok"}]))
    async with running(agent) as editor:

        async def always(params):
            return {"outcome": {"outcome": "selected", "optionId": "allow_always"}}

        editor.handlers["session/request_permission"] = always
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "tool")
        await editor.prompt(sid, "tool")
        asked = [r for r in editor.server_requests if r["method"] == "session/request_permission"]
        assert len(asked) == 1
        assert [u["status"] for u in editor.updates[sid] if u.get("status") == "completed"] == ["completed"] * 2


async def test_cancel_while_a_permission_is_pending_withdraws_the_request(tmp_path):
    agent = scripted(("tool", [{"tool": "Risky", "kind": "execute", "ask": True, "result": "ran"}]))
    async with running(agent) as editor:
        editor.never_answer("session/request_permission")
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        task = await editor.start_prompt(sid, "tool")
        await editor.wait_for(lambda: editor.server_requests)
        await editor.notify("session/cancel", {"sessionId": sid})
        assert (await task)["result"] == {"stopReason": "cancelled"}
        withdrawn = [f for f in editor.unsolicited if f.get("method") == "$/cancel_request"]
        assert withdrawn == [
            {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": editor.server_requests[0]["id"]}}
        ]
        assert "completed" not in [u.get("status") for u in editor.updates[sid]]


async def test_a_permission_answered_cancelled_ends_the_turn_cancelled(tmp_path):
    agent = scripted(("tool", [{"tool": "Risky", "ask": True, "result": "ran"}, {"say": "after"}]))
    async with running(agent) as editor:

        async def cancelled(params):
            await editor.notify("session/cancel", {"sessionId": params["sessionId"]})
            return {"outcome": {"outcome": "cancelled"}}

        editor.handlers["session/request_permission"] = cancelled
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "tool") == {"stopReason": "cancelled"}
        assert "after" not in editor.text(sid)


async def test_an_agent_exception_is_an_internal_error_and_the_session_keeps_working(tmp_path):
    async with running(scripted(("boom", [{"say": "partial"}, {"error": "the model endpoint said no"}]))) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        with pytest.raises(RemoteError) as caught:
            await editor.prompt(sid, "boom")
        assert caught.value.code == INTERNAL_ERROR
        assert caught.value.message == "the model endpoint said no"
        assert await editor.prompt(sid, "fine") == {"stopReason": "end_turn"}


class StubbornAdapter:
    """Ignores cancellation: waits for the test without asking its sink, then keeps talking."""

    name = "stubborn"

    def __init__(self) -> None:
        self.waiting = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()

    def capabilities(self) -> AdapterCapabilities:
        return AdapterCapabilities()

    def run_turn(self, turn, sink):
        try:
            sink.text("before")  # returns once published: the first delta of a run waits for that
            self.waiting.set()
            self.release.wait(10)  # not the sink's sleep, so the cancel goes unheard
            sink.text("after the cancel")
        finally:
            self.finished.set()
        return "end_turn"

    def cancel(self, session_id: str) -> None:
        pass


async def test_a_worker_that_ignores_cancellation_is_abandoned_and_its_later_output_never_arrives(tmp_path):
    adapter = StubbornAdapter()
    async with running(AcpAgent(adapter, AgentOptions(cancel_grace=0.1))) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        task = await editor.start_prompt(sid, "x")
        await editor.wait_for(lambda: editor.text(sid) == "before")
        # Cancel only once the worker is past its first report, deaf to the sink.
        assert await anyio.to_thread.run_sync(adapter.waiting.wait, 10)
        await editor.notify("session/cancel", {"sessionId": sid})
        try:
            assert (await task)["result"] == {"stopReason": "cancelled"}  # while the worker still runs
        finally:
            adapter.release.set()
        assert await anyio.to_thread.run_sync(adapter.finished.wait, 10)
        assert editor.text(sid) == "before"


class CountingAdapter:
    """Reports how many turns ran at once, to check one turn per session."""

    name = "counting"

    def __init__(self) -> None:
        self.active = 0
        self.most = 0
        self.lock = threading.Lock()

    def capabilities(self) -> AdapterCapabilities:
        return AdapterCapabilities()

    def run_turn(self, turn, sink):
        with self.lock:
            self.active += 1
            self.most = max(self.most, self.active)
        sink.sleep(0.05)  # slow on purpose: two turns of one session running at once would overlap here
        with self.lock:
            self.active -= 1
        sink.text(turn.text)
        return "end_turn"

    def cancel(self, session_id: str) -> None:
        pass


async def test_a_session_runs_one_turn_at_a_time_in_arrival_order(tmp_path):
    adapter = CountingAdapter()
    async with running(AcpAgent(adapter)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        tasks = [await editor.start_prompt(sid, str(n)) for n in range(5)]
        for task in tasks:
            assert (await task)["result"] == {"stopReason": "end_turn"}
        assert adapter.most == 1
        assert editor.text(sid) == "01234"


async def test_a_tool_call_left_open_by_a_cancel_ends_failed_before_the_response(tmp_path):
    agent = scripted(("tool", [{"tool": "Risky", "kind": "execute", "ask": True, "result": "ran"}]))
    async with running(agent) as editor:
        editor.never_answer("session/request_permission")
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        task = await editor.start_prompt(sid, "tool")
        await editor.wait_for(lambda: editor.server_requests)
        await editor.notify("session/cancel", {"sessionId": sid})
        assert (await task)["result"] == {"stopReason": "cancelled"}
        tool_id = editor.updates[sid][-2]["toolCallId"]
        assert editor.updates[sid][-1] == {
            "sessionUpdate": "tool_call_update",
            "toolCallId": tool_id,
            "status": "failed",  # v1 has no cancelled status: the mark says why (v2 shows cancelled)
            "_meta": {"acp-server": {"cancelled": True}},
        }
