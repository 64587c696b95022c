"""An agent below's boolean config options (`type: "boolean"`) reach an editor that opted in
with `clientCapabilities.session.configOptions.boolean`, and its changes go back to the agent as
booleans; an editor that did not opt in is never sent one."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from acp_child import Runtimes
from harness import RemoteError, running

from acp_server.acp.handlers import AcpAgent
from acp_server.protocol import methods
from acp_server.rpc.errors import INVALID_PARAMS

FAKE_AGENT = str(Path(__file__).with_name("fake_acp_agent.py"))
OPTS_IN = {"session": {"configOptions": {"boolean": {}}}}


@pytest.fixture
def runtimes():
    made = Runtimes()
    yield made
    made.close()


def agent(tmp_path: Path, runtimes: Runtimes) -> AcpAgent:
    store, calls = tmp_path / "store.json", tmp_path / "calls.jsonl"
    argv = (sys.executable, FAKE_AGENT, "--store", str(store), "--calls", str(calls), "--modes", "--boolean")
    return AcpAgent(runtimes.make(argv))


def calls(tmp_path: Path, method: str) -> list[dict[str, Any]]:
    lines = (tmp_path / "calls.jsonl").read_text().splitlines()
    return [call["params"] for call in map(json.loads, lines) if call["method"] == method]


def booleans(options: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [option for option in options if option["type"] == "boolean"]


async def test_an_editor_that_opted_in_sees_and_sets_the_agents_boolean_option(tmp_path, runtimes):
    async with running(agent(tmp_path, runtimes)) as editor:
        await editor.initialize(OPTS_IN)
        result = await editor.request(methods.SESSION_NEW, {"cwd": str(tmp_path), "mcpServers": []})
        assert booleans(result["configOptions"]) == [
            {"id": "fast", "name": "Fast mode", "type": "boolean", "currentValue": False}
        ]
        params = {"sessionId": result["sessionId"], "configId": "fast", "type": "boolean", "value": True}
        answer = await editor.request(methods.SESSION_SET_CONFIG_OPTION, params)
        assert booleans(answer["configOptions"])[0]["currentValue"] is True
        with pytest.raises(RemoteError) as refused:  # a boolean option takes a boolean
            await editor.request(methods.SESSION_SET_CONFIG_OPTION, params | {"type": None, "value": "on"})
        assert refused.value.code == INVALID_PARAMS
    (initialize,) = calls(tmp_path, "initialize")
    assert initialize["clientCapabilities"]["session"]["configOptions"] == {"boolean": {}}
    (sent,) = calls(tmp_path, methods.SESSION_SET_CONFIG_OPTION)
    assert (sent["configId"], sent["type"], sent["value"]) == ("fast", "boolean", True)


async def test_an_editor_that_did_not_opt_in_is_never_sent_a_boolean_option(tmp_path, runtimes):
    async with running(agent(tmp_path, runtimes)) as editor:
        await editor.initialize()
        result = await editor.request(methods.SESSION_NEW, {"cwd": str(tmp_path), "mcpServers": []})
        sid = result["sessionId"]
        assert booleans(result["configOptions"]) == []
        params = {"sessionId": sid, "configId": "model", "value": "small"}
        answer = await editor.request(methods.SESSION_SET_CONFIG_OPTION, params)
        assert booleans(answer["configOptions"]) == []
        assert [o["id"] for o in answer["configOptions"]] == ["mode", "agent-mode", "model", "haui"]
    sent = [f for f in editor.frames if "configOptions" in json.dumps(f)]
    assert sent and all('"boolean"' not in json.dumps(f) for f in sent)
