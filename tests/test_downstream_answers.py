"""What an ACP agent below acp-server is told of a user's permission answer: never more than the
user said. An agent that offers no allow-once option is asked about with the options it offers,
so the user's "Allow once" can never reach it as its allow-always."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from acp_child import Runtimes
from harness import FakeEditor, running

from acp_server.acp.handlers import AcpAgent
from acp_server.protocol import methods

FAKE_AGENT = str(Path(__file__).with_name("fake_acp_agent.py"))


@pytest.fixture
def runtimes():
    made = Runtimes()
    yield made
    made.close()


async def ask_once_less(
    tmp_path: Path, runtimes: Runtimes, option_id: str, *, mode: str = "ask"
) -> tuple[FakeEditor, str, list[Any]]:
    """A prompt whose agent asks about `ls -la` offering allow-always and reject-once only; the
    editor answers `option_id`. Returns the editor, the agent's reply and the questions."""
    asked: list[Any] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"outcome": {"outcome": "selected", "optionId": option_id}}

    agent = AcpAgent(runtimes.make((sys.executable, FAKE_AGENT, "--store", str(tmp_path / "store.json"))))
    async with running(agent) as editor:
        editor.handlers[methods.REQUEST_PERMISSION] = answer
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.request(methods.SESSION_SET_MODE, {"sessionId": sid, "modeId": mode})
        await editor.prompt(sid, "ask, no once")
    return editor, editor.text(sid), asked


def told(reply: str) -> Any:
    return json.loads(reply.split(" answer=", 1)[1])


async def test_an_agent_without_allow_once_is_asked_about_with_the_options_it_offers(tmp_path, runtimes):
    _, reply, asked = await ask_once_less(tmp_path, runtimes, "allow_always")
    (question,) = asked
    # "Always reject" is ours to keep, answered with its "reject_once" each time; "Allow once" is gone
    assert [o["kind"] for o in question["options"]] == ["allow_always", "reject_once", "reject_always"]
    assert told(reply) == {"outcome": {"outcome": "selected", "optionId": "always"}}


async def test_allow_once_is_never_sent_to_the_agent_as_its_allow_always(tmp_path, runtimes):
    _, reply, _ = await ask_once_less(tmp_path, runtimes, "allow_once")  # an editor that answers it anyway
    assert told(reply) == {"outcome": {"outcome": "selected", "optionId": "no"}}


async def test_a_policy_allow_that_the_agent_could_only_hear_as_always_is_asked_of_the_user(tmp_path, runtimes):
    _, reply, asked = await ask_once_less(tmp_path, runtimes, "allow_always", mode="yolo")
    assert len(asked) == 1  # yolo asks about nothing, but its "allow" is no "always"
    assert told(reply) == {"outcome": {"outcome": "selected", "optionId": "always"}}
