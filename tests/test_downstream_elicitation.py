"""An ACP agent below acp-server asks the user with its own forms and URLs (`elicitation/create`):
an editor that shows that mode gets the question as the agent wrote it, and the agent its answer;
a URL's `elicitation/complete` follows it to the editor. An editor that shows neither gets nothing
it cannot show, and the agent is declined at once."""

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
FORM = {
    "mode": "form",
    "message": "Which database should I migrate?",
    "requestedSchema": {
        "type": "object",
        "properties": {
            "database": {"type": "string", "enum": ["staging", "production"]},
            "dryRun": {"type": "boolean", "title": "Dry run"},
        },
        "required": ["database"],
    },
}
URL = {
    "mode": "url",
    "message": "Sign in to the issue tracker",
    "elicitationId": "e-1",
    "url": "https://example.com/sso",
}


@pytest.fixture
def runtimes():
    made = Runtimes()
    yield made
    made.close()


async def ask(tmp_path: Path, runtimes: Runtimes, request: dict[str, Any], *, caps: dict[str, Any], answer: Any = None):
    """The fake agent asks `request` of an editor advertising `caps` that answers `answer`;
    returns the editor, the questions it was asked and what the agent was told."""
    asked: list[dict[str, Any]] = []

    async def answering(params: dict[str, Any]) -> Any:
        asked.append(params)
        return answer

    argv = (sys.executable, FAKE_AGENT, "--store", str(tmp_path / "store.json"))
    async with running(AcpAgent(runtimes.make(argv))) as editor:
        editor.handlers[methods.ELICITATION_CREATE] = answering
        await editor.initialize(caps)
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "elicit " + json.dumps(request))
    return editor, asked, json.loads(editor.text(sid).split(" elicitation=", 1)[1])


def completions(editor: FakeEditor) -> list[dict[str, Any]]:
    return [f["params"] for f in editor.unsolicited if f["method"] == methods.ELICITATION_COMPLETE]


async def test_an_agents_form_reaches_an_editor_that_shows_forms_and_its_answer_the_agent(tmp_path, runtimes):
    given = {"action": "accept", "content": {"database": "staging", "dryRun": True}}
    _, asked, told = await ask(tmp_path, runtimes, FORM, caps={"elicitation": {"form": {}}}, answer=given)
    (question,) = asked
    assert {k: v for k, v in question.items() if k != "sessionId"} == FORM
    assert told == {"result": given}


async def test_an_agents_url_and_its_completion_reach_an_editor_that_shows_urls(tmp_path, runtimes):
    caps = {"elicitation": {"form": {}, "url": {}}}
    editor, asked, told = await ask(tmp_path, runtimes, URL, caps=caps, answer={"action": "accept"})
    (question,) = asked
    assert {k: v for k, v in question.items() if k != "sessionId"} == URL
    assert told == {"result": {"action": "accept"}}
    await editor.wait_for(lambda: completions(editor))
    assert [c["elicitationId"] for c in completions(editor)] == ["e-1"]


@pytest.mark.parametrize("request_", [FORM, URL], ids=["form", "url"])
async def test_an_editor_without_elicitation_is_never_asked_and_the_agent_is_declined(tmp_path, runtimes, request_):
    editor, asked, told = await ask(tmp_path, runtimes, request_, caps={})
    assert asked == [] and completions(editor) == []
    assert told == {"result": {"action": "decline"}}


async def test_a_url_is_declined_for_an_editor_that_shows_only_forms(tmp_path, runtimes):
    _, asked, told = await ask(tmp_path, runtimes, URL, caps={"elicitation": {"form": {}}})
    assert asked == [] and told == {"result": {"action": "decline"}}
