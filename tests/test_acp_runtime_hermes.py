"""`hermes acp` (Hermes' own ACP adapter, a third-party ACP agent) behind acp-server's
`hermes-acp` preset, against the fake model on 127.0.0.1: a prompt streams, Hermes' modes are
the editor's, a question Hermes asks about a tool call it never announced names the visible
call, and the prompt after a cancel gets its answer. `hermes acp` is the pinned install of
tests/agent_installs.py; skips (or, under CI, fails) when it cannot be set up."""

from __future__ import annotations

import pytest
from acp_child import Runtimes
from agents import require
from fake_openai import FakeOpenAI, reply
from harness import running
from hermes_home import make_home

from acp_server.acp.handlers import AcpAgent
from acp_server.downstream.presets import preset_agent
from acp_server.protocol import methods

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def answer(body):
    messages = body["messages"]
    prompt = str(next(m["content"] for m in reversed(messages) if m["role"] == "user"))
    if messages[-1]["role"] == "tool":
        return reply("Done.")
    if "clean up" in prompt:
        return reply(tools=[("terminal", {"command": f"rm -rf {prompt.split()[-1]}"})])
    if "think forever" in prompt:
        return reply("Thinking", hold_open=True)
    return reply("Hello from Hermes!")


@pytest.fixture
def hermes(tmp_path, monkeypatch):
    command = (str(require("hermes")), "acp")
    runtimes = Runtimes()
    with FakeOpenAI() as model:
        model.responder = answer
        monkeypatch.setenv("HERMES_HOME", str(make_home(tmp_path, model.base_url, acp=True)))
        runtime = preset_agent("hermes-acp", command)
        runtimes.made.append(runtime)
        yield runtime
        runtimes.close()


async def test_a_prompt_to_hermes_streams_its_reply_and_the_editor_sees_its_modes(hermes, tmp_path):
    async with running(AcpAgent(hermes)) as editor:
        await editor.initialize()
        session = await editor.request(methods.SESSION_NEW, {"cwd": str(tmp_path), "mcpServers": []})
        modes = [m["id"] for m in session["modes"]["availableModes"]]
        assert "default" in modes and len(modes) > 1, modes
        sid = session["sessionId"]
        assert (await editor.prompt(sid, "hello"))["stopReason"] == "end_turn"
        assert editor.text(sid) == "Hello from Hermes!"


async def test_hermes_asks_about_its_visible_tool_call_and_a_refusal_holds(hermes, tmp_path):
    doomed = tmp_path / "keep-me"
    doomed.mkdir()
    asked = []

    async def refuse(params):
        asked.append(params)
        return {"outcome": {"outcome": "selected", "optionId": "reject_once"}}

    async with running(AcpAgent(hermes)) as editor:
        editor.handlers[methods.REQUEST_PERMISSION] = refuse
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, f"clean up {doomed}")
        (shown,) = [u["toolCallId"] for u in editor.updates[sid] if u["sessionUpdate"] == "tool_call"]
        (question,) = asked
        assert question["toolCall"]["toolCallId"] == shown, "the question is about the call the editor was shown"
        assert question["toolCall"]["rawInput"]["command"] == f"rm -rf {doomed}"
        assert doomed.exists()


async def test_the_prompt_after_a_cancel_gets_hermes_answer(hermes, tmp_path):
    async with running(AcpAgent(hermes)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        turn = await editor.start_prompt(sid, "think forever")
        await editor.wait_for(lambda: "Thinking" in editor.text(sid), timeout=60)
        await editor.notify(methods.SESSION_CANCEL, {"sessionId": sid})
        assert (await turn)["result"] == {"stopReason": "cancelled"}
        before = editor.text(sid)
        assert (await editor.prompt(sid, "hello"))["stopReason"] == "end_turn"
        assert editor.text(sid)[len(before) :] == "Hello from Hermes!"
