"""The known misbehaviours of ACP agents (acp_server/downstream/quirks.py), each matched by the
agent's command or name and handled: Hermes' failure of the prompt after a cancel here; Gemini's
late replay in test_acp_runtime_restart.py; agents that outlive their stdin in
test_acp_runtime_process.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from acp_child import Runtimes
from harness import running

from acp_server.acp.handlers import AcpAgent
from acp_server.downstream.quirks import quirks_for
from acp_server.protocol import methods
from acp_server.rpc.errors import INTERNAL_ERROR

FAKE_AGENT = str(Path(__file__).with_name("fake_acp_agent.py"))


@pytest.mark.parametrize(
    ("argv", "name", "quirk"),
    [
        (("npx", "-y", "@zed-industries/claude-agent-acp@0.21"), None, "lingers_after_eof"),
        (("/usr/local/bin/claude-agent-acp",), None, "lingers_after_eof"),
        (("codex-acp",), None, "lingers_after_eof"),
        (("gemini", "--acp"), None, "replay_after_load"),
        (("python", "-m", "acp_adapter"), "hermes-agent", "fails_after_cancel"),
    ],
)
def test_each_quirk_is_found_by_the_agents_command_or_name(argv, name, quirk):
    assert quirks_for(argv, name).has(quirk)


def test_an_agent_without_a_known_quirk_gets_none():
    assert quirks_for(("my-agent", "--acp"), "my-agent").applied == ()


@pytest.fixture
def runtimes():
    made = Runtimes()
    yield made
    made.close()


async def cancel_then_prompt(tmp_path, runtimes, name: str):
    argv = (sys.executable, FAKE_AGENT, "--store", str(tmp_path / "store.json"), "--fail-after-cancel", "--name", name)
    async with running(AcpAgent(runtimes.make(argv))) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        turn = await editor.start_prompt(sid, "slow")
        await editor.wait_for(lambda: "working" in editor.text(sid))
        await editor.notify(methods.SESSION_CANCEL, {"sessionId": sid})
        assert (await turn)["result"] == {"stopReason": "cancelled"}
        params = {"sessionId": sid, "prompt": [{"type": "text", "text": "next"}]}
        return await editor.request_raw(methods.SESSION_PROMPT, params), editor.text(sid)


async def test_hermes_first_prompt_after_a_cancel_is_sent_again_when_it_fails(tmp_path, runtimes):
    response, text = await cancel_then_prompt(tmp_path, runtimes, "hermes-agent")
    assert response["result"]["stopReason"] == "end_turn"
    assert text.endswith("You said next; I remember slow.")


async def test_another_agent_failing_after_a_cancel_fails_the_prompt(tmp_path, runtimes):
    response, _ = await cancel_then_prompt(tmp_path, runtimes, "other-agent")
    assert response["error"]["code"] == INTERNAL_ERROR
