"""MCP tools ask in `ask` mode whatever their names or hints say, and "always" covers one tool.

The openai agent calls tools of the `mcp_notes` server (run over stdio), whose names read like
reads or searches (`get_...`, a server named `find` or `cat`) and which claim `readOnlyHint`;
the model is played by the fake endpoint. The notes server logs each call it gets.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, openai_adapter, reply
from harness import answer_permissions, running
from mcp_notes import stdio_server

from acp_server.acp.handlers import AcpAgent
from acp_server.turns.policy import decide
from adapters.events import ToolCallStarted
from adapters.hermes.tools import kind_of
from adapters.openai import OpenAIAdapter

pytest.importorskip("httpx", reason="the openai extra is not installed")
pytest.importorskip("mcp", reason="the mcp package is not installed")

NAMES = [("srv", "get_weather"), ("github", "get_file_contents"), ("find", "anything"), ("cat", "rm_everything")]


@pytest.fixture
def openai(tmp_path) -> Iterator[tuple[FakeOpenAI, OpenAIAdapter]]:
    with openai_adapter(tmp_path) as served:
        yield served


def asked(editor) -> list[str]:
    requests = [r for r in editor.server_requests if r["method"] == "session/request_permission"]
    return [r["params"]["toolCall"]["title"] for r in requests]


def calls(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


async def session(adapter: OpenAIAdapter, tmp_path: Path, server: dict[str, Any], prompts: int, *answers: str):
    async with running(AcpAgent(adapter)) as editor:
        editor.handlers["session/request_permission"] = answer_permissions(*answers)
        await editor.initialize()
        result = await editor.request("session/new", {"cwd": str(tmp_path), "mcpServers": [server]})
        for n in range(prompts):
            assert await editor.prompt(result["sessionId"], f"prompt {n}") == {"stopReason": "end_turn"}
        return editor


@pytest.mark.parametrize(("server", "tool"), NAMES)
async def test_an_mcp_tool_named_like_a_read_asks_in_ask_mode(openai, tmp_path, server, tool):
    fake, adapter = openai
    log = tmp_path / "calls"
    fake.script(reply(tools=[(f"mcp__{server}__{tool}", {})]), reply("done"))
    notes = stdio_server(server, NOTES_TOOLS=tool, NOTES_CALLS=str(log))
    editor = await session(adapter, tmp_path, notes, 1, "reject_once")
    assert asked(editor) == [f"{server}: {tool}"]
    assert calls(log) == []


async def test_always_allowing_one_mcp_tool_does_not_cover_another(openai, tmp_path):
    fake, adapter = openai
    log = tmp_path / "calls"
    fake.script(
        reply(tools=[("mcp__srv__get_weather", {})]),
        reply("sunny"),
        reply(tools=[("mcp__srv__get_weather", {}), ("mcp__srv__get_forecast", {})]),
        reply("sunny, then?"),
    )
    notes = stdio_server("srv", NOTES_TOOLS="get_weather get_forecast", NOTES_CALLS=str(log))
    editor = await session(adapter, tmp_path, notes, 2, "allow_always", "reject_once")
    assert asked(editor) == ["srv: get_weather", "srv: get_forecast"]
    assert calls(log) == ["get_weather", "get_weather"]


@pytest.mark.parametrize(("server", "tool"), NAMES)
def test_an_mcp_tool_as_the_hermes_agent_reports_it_asks_in_ask_mode(server, tool):
    name = f"mcp__{server}__{tool}"  # Hermes' mcp_prefixed_tool_name
    assert decide("ask", ToolCallStarted("call_1", f"{server}: {tool}", kind_of(name), name), {}) == "ask"
