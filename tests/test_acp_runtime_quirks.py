"""The known misbehaviours of ACP agents (acp_server/downstream/quirks.py), each matched by the
agent's command or name and handled: Hermes' failure of the prompt after a cancel and its calls
left unfinished, and Claude's stale end of the prompt after a cancel here; Gemini's late replay
in test_acp_runtime_restart.py; agents that outlive their stdin in test_acp_runtime_process.py.
The real agents show them in test_acp_runtime_real.py."""

from __future__ import annotations

import json
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
        (("claude-agent-acp",), None, "stale_end_after_cancel"),
        (("hermes", "acp"), "hermes-agent", "leaves_calls_unfinished"),
        (("node", "/opt/agent/dist/index.js"), "@zed-industries/claude-agent-acp", "stale_end_after_cancel"),
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


async def cancel_then_prompt(tmp_path, runtimes, name: str, flag: str = "--fail-after-cancel", mode: str | None = None):
    store = str(tmp_path / "store.json")
    argv = (
        sys.executable,
        FAKE_AGENT,
        "--store",
        store,
        flag,
        "--resume",
        "--modes",
        "--calls",
        str(tmp_path / "calls"),
    )
    async with running(AcpAgent(runtimes.make((*argv, "--name", name)))) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        if mode is not None:
            await editor.request(methods.SESSION_SET_MODE, {"sessionId": sid, "modeId": mode})
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


def after_cancel(tmp_path: Path) -> list[str]:
    """What the fake agent was sent from the cancel to the next prompt (set_mode with its mode)."""
    lines = [json.loads(line) for line in (tmp_path / "calls").read_text().splitlines()]
    sent = [c["method"] + (f" {c['params']['modeId']}" if "modeId" in c["params"] else "") for c in lines]
    start = sent.index("session/cancel")
    return sent[start : sent.index("session/prompt", start) + 1]


async def test_claudes_session_is_reopened_after_a_cancel_so_the_next_prompt_is_answered(tmp_path, runtimes):
    response, text = await cancel_then_prompt(
        tmp_path, runtimes, "@zed-industries/claude-agent-acp", "--stale-end-after-cancel", mode="plan"
    )
    assert response["result"]["stopReason"] == "end_turn"
    assert text.endswith("You said next; I remember slow.")
    reopened = ["session/cancel", "session/close", "session/resume", "session/set_mode plan", "session/prompt"]
    assert after_cancel(tmp_path) == reopened, "reopened in the mode it had, before the next prompt"


async def test_another_agent_whose_prompt_after_a_cancel_ends_at_once_is_not_reopened(tmp_path, runtimes):
    response, text = await cancel_then_prompt(tmp_path, runtimes, "other-agent", "--stale-end-after-cancel")
    assert response["result"]["stopReason"] == "end_turn"
    assert not text.endswith("You said next; I remember slow.")
    assert after_cancel(tmp_path) == ["session/cancel", "session/prompt"]


@pytest.mark.parametrize(("name", "status"), [("hermes-agent", "completed"), ("other-agent", "failed")])
async def test_hermes_allowed_call_left_open_is_completed_at_the_end_of_its_turn(tmp_path, runtimes, name, status):
    argv = (sys.executable, FAKE_AGENT, "--store", str(tmp_path / "store.json"), "--name", name)
    async with running(AcpAgent(runtimes.make(argv))) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert (await editor.prompt(sid, "ask"))["stopReason"] == "end_turn"  # the fake never ends its call
        (call,) = [u["toolCallId"] for u in editor.updates[sid] if u["sessionUpdate"] == "tool_call"]
        ends = [u.get("status") for u in editor.updates[sid] if u.get("toolCallId") == call]
        assert ends[-1] == status, "allowed, and the turn ended normally: it ran"
