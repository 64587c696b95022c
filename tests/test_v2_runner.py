"""ACP v2 through the runner: each connection to one runner speaks the version its `initialize`
chose, on the same sessions and turns. In memory (two fake editors on one hub: the real
handlers, routes and journal), then end to end (a v1 stdio front and the TS SDK's v2 client over
the runner's WebSocket `/acp`, the runner SIGKILLed and started again). Every frame a v1
connection gets is checked against the v1 schema, every frame a v2 one gets against v2's."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

from fake_openai import reply
from harness import FakeEditor, running
from installs import CLIENTS, node_packages, unavailable
from runner_fronts import Front, ended, runners, wait_until
from schema_check import check_agent_frame
from test_reattach import hub_serving
from test_runner import is_permission, read_until, text
from test_runner import updates as v1_updates
from test_shared_remote import PREAMBLE, SDK, WRITE, _has_websocket, listen, served, token

from acp_server.protocol import methods
from acp_server.runner.fanout import FanOut
from acp_server.runner.tokens import READ_ONLY_REFUSED

PROMPT = {"type": "text", "text": "gate please"}
__all__ = ["served"]  # the fixture: the openai agent on a fake model endpoint, in a runner of the test's own
V2_INIT = {"protocolVersion": 2, "info": {"name": "v2-test", "version": "0"}, "capabilities": {}}


async def v2_initialize(editor: FakeEditor) -> dict[str, Any]:
    editor.version = 2  # from here on its frames are checked against the v2 schema
    return await editor.request("initialize", V2_INIT)


def kinds(updates: list[dict[str, Any]]) -> list[str]:
    return [u["sessionUpdate"] for u in updates]


def states(updates: list[dict[str, Any]]) -> list[str]:
    return [u["state"] for u in updates if u["sessionUpdate"] == "state_update"]


def idle_after(updates: list[dict[str, Any]], reason: str) -> bool:
    """Whether a turn ended idle with `reason`: an idle after a `running` (a resume's idle is not)."""
    ran = [i for i, u in enumerate(updates) if u.get("state") == "running"]
    idle = {"sessionUpdate": "state_update", "state": "idle", "stopReason": reason}
    return bool(ran) and idle in updates[ran[0] :]


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
        await v2.wait_for(lambda: idle_after(v2.updates[sid], "end_turn"))

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


class V2Remote:
    """tests/clients/v2-remote-client.mjs (the SDK's experimental/v2 client over its WebSocket
    transport) running beside the test; every frame it received checked against the v2 schema."""

    def __init__(
        self, url: str, key: str, cwd: Path, session_id: str, steps: list[dict[str, Any]], transport: str = "ws"
    ) -> None:
        node = node_packages(SDK)
        flags = [] if _has_websocket(node) else ["--experimental-websocket"]
        if flags and not _has_websocket(node, *flags):
            unavailable("this Node.js has no WebSocket (Node >= 20.10 is needed)", node=True)
        config = {"url": url, "transport": transport, "cwd": str(cwd), "sessionId": session_id, "steps": steps}
        self.process = subprocess.Popen(
            [node, *flags, str(CLIENTS / "v2-remote-client.mjs"), json.dumps(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "ACP_TOKEN": key},
        )
        self.steps: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)
            if line.startswith("step "):
                self.steps.put(line.split()[1])
        self.steps.put(None)

    def wait_step(self, step: str) -> None:
        while (done := self.steps.get(timeout=60)) != step:
            assert done is not None, f"the v2 client ended first: {''.join(self.stderr)}"

    def summary(self) -> dict[str, Any]:
        out, _ = self.process.communicate(timeout=90)
        assert self.process.returncode == 0, "".join(self.stderr)
        summary = json.loads(out)
        assert summary["problems"] == [], summary["problems"]
        for frame in summary["received"]:
            answered = None if "method" in frame else summary["sent"].get(str(frame.get("id")))
            check_agent_frame(frame, answered, version=2)
        return summary


def joined_text(shown: list[dict[str, Any]]) -> str:
    return "".join(u["content"]["text"] for u in shown if u["sessionUpdate"] == "agent_message_chunk")


def message_ids(shown: list[dict[str, Any]]) -> list[str]:
    return sorted({u["messageId"] for u in shown if "messageId" in u})


def test_a_v1_front_and_a_v2_websocket_client_share_a_turn_each_in_its_version_and_a_restart_replays_it(
    tmp_path, served
):
    fake, options = served
    fake.script(reply(PREAMBLE, tools=[WRITE]), reply("Done."), reply("Again."))
    url = listen(options)
    front = Front(*options, cwd=str(tmp_path))
    session_id = front.start_session(str(tmp_path))
    remote = V2Remote(url, token(), tmp_path, session_id, [{"do": "resume"}, {"do": "waitIdle"}])
    remote.wait_step("resume")  # attached before the turn starts: it sees the turn live
    asking = front.request("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "notes"}]})
    at_front = read_until(front, is_permission)  # v1's copy of the question, left unanswered here
    at_front += read_until(front, lambda f: f.get("method") == "$/cancel_request")  # the v2 client answered
    v1_asked = next(f for f in at_front if is_permission(f))
    assert at_front[-1]["params"] == {"requestId": v1_asked["id"]}  # v1's copy withdrawn: first answer wins
    at_front += read_until(front, lambda f: f.get("id") == asking and "method" not in f)
    assert at_front[-1]["result"] == {"stopReason": "end_turn"}  # v1: answered at the turn's end

    live = remote.summary()
    shown = live["updates"]
    call_id = v1_asked["params"]["toolCall"]["toolCallId"]
    asked = [f for f in live["received"] if f.get("method") == "session/request_permission"]
    assert [f["params"]["subject"]["toolCall"]["toolCallId"] for f in asked] == [call_id]  # v2's shape, answered there
    assert states(shown) == ["idle", "running", "requires_action", "running", "idle"]
    assert shown[-1] == {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
    assert "tool_call" not in kinds(shown)  # v2's upserts only
    assert [u for u in shown if u["sessionUpdate"] == "tool_call_update"][-1]["status"] == "completed"
    assert joined_text(shown) == text(at_front) == PREAMBLE + "Done."
    assert "state_update" not in kinds(v1_updates(at_front))  # the front got v1 only (schema-checked as v1)
    assert any(u.get("toolCallId") == call_id and u.get("status") == "completed" for u in v1_updates(at_front))
    assert (tmp_path / "notes.md").read_text() == "shared notes\n"
    front.close_stdin()
    assert front.wait() == 0

    [runner] = runners()
    os.kill(runner["pid"], signal.SIGKILL)
    wait_until(lambda: ended(runner["pid"]), what="the killed runner to die")
    steps = [{"do": "resume", "replay": True}, {"do": "prompt", "text": "again"}]
    again = V2Remote(listen(options), token(), tmp_path, session_id, steps).summary()
    resumed, prompted = again["results"][1], again["results"][2]
    replayed = again["updates"][
        : next(i for i, u in enumerate(again["updates"]) if u["sessionUpdate"] == "state_update")
    ]
    assert joined_text(replayed) == PREAMBLE + "Done."
    assert set(message_ids(shown)) <= set(message_ids(replayed))  # the ids shown live
    assert "configOptions" in resumed["result"] and prompted["result"]["messageId"].endswith(":0")
    assert joined_text(again["updates"]).endswith("Again.")


async def test_a_read_only_v2_watcher_is_never_asked_and_its_prompt_is_refused(tmp_path):
    async with (
        hub_serving(tmp_path) as hub,
        running(hub.agent()) as v1,
        running(hub.agent(read_only=True)) as watcher,
    ):
        await v1.initialize()
        await v2_initialize(watcher)
        sid = await v1.new_session(tmp_path)
        await watcher.request("session/resume", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        refused = await watcher.request_raw("session/prompt", {"sessionId": sid, "prompt": [PROMPT]})
        assert refused["error"]["code"] == READ_ONLY_REFUSED and refused["error"]["data"] == {"readOnly": True}
        assert await v1.prompt(sid, "gate") == {"stopReason": "end_turn"}  # the v1 editor answers
        await watcher.wait_for(lambda: idle_after(watcher.updates[sid], "end_turn"))
    assert watcher.server_requests == []  # never asked
    assert states(watcher.updates[sid]) == ["idle", "running", "idle"]  # no requires_action: not asked


def test_a_v2_client_over_streamable_http_resumes_a_v1_session_and_its_prompt_is_answered_at_acceptance(
    tmp_path, served
):
    fake, options = served
    fake.script(reply("First."), reply("Second."))
    url = listen(options)
    front = Front(*options, cwd=str(tmp_path))
    session_id = front.start_session(str(tmp_path))
    assert front.call("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "one"}]}) == {
        "stopReason": "end_turn"
    }
    steps = [{"do": "resume", "replay": True}, {"do": "prompt", "text": "two"}]
    summary = V2Remote(url, token(), tmp_path, session_id, steps, transport="http").summary()
    resumed, prompted = summary["results"][1:]
    assert "configOptions" in resumed["result"] and prompted["result"]["messageId"].endswith(":0")
    shown = summary["updates"]
    assert joined_text(shown) == "First.Second."
    assert shown[-1] == {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
    watched = read_until(front, lambda f: "turnEnded" in json.dumps(f))  # the v2 client's turn, at the v1 front
    assert text(watched) == "Second." and "state_update" not in kinds(v1_updates(watched))  # in v1 (schema-checked)
    front.close_stdin()
    assert front.wait() == 0


async def test_when_the_v1_editor_answers_first_the_v2_clients_copy_is_withdrawn_and_it_runs_again(tmp_path):
    async with (
        hub_serving(tmp_path) as hub,
        running(hub.agent()) as v1,
        running(hub.agent()) as v2,
    ):
        await v1.initialize()
        await v2_initialize(v2)
        sid = await v1.new_session(tmp_path)
        await v2.request("session/resume", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        v2.never_answer(methods.REQUEST_PERMISSION)
        prompt = await v1.start_prompt(sid, "gate")
        await v2.wait_for(lambda: [f for f in v2.frames if f.get("method") == "$/cancel_request"])
        assert (await prompt)["result"] == {"stopReason": "end_turn"}  # the v1 editor allowed it
        await v2.wait_for(lambda: idle_after(v2.updates[sid], "end_turn"))

    (asked,) = [r for r in v2.server_requests if r["method"] == methods.REQUEST_PERMISSION]
    (withdrawn,) = [f for f in v2.frames if f.get("method") == "$/cancel_request"]
    assert withdrawn["params"] == {"requestId": asked["id"]}
    assert states(v2.updates[sid]) == ["idle", "running", "requires_action", "running", "idle"]
    assert [u for u in v2.updates[sid] if u["sessionUpdate"] == "tool_call_update"][-1]["status"] == "completed"
