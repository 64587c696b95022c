"""MCP servers passed in `session/new` become tools of the openai agent, for real.

The small MCP server of `mcp_notes` (the official `mcp` package) is run over stdio by the
agent, or over streamable HTTP on 127.0.0.1 by the test; the model, played
by the fake endpoint, calls its tools through the same permission policy as built-in tools.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from fake_openai import FakeOpenAI, reply
from harness import running
from mcp_notes import http_server, started_pids, stdio_server

from acp_server.acp.handlers import AcpAgent
from adapters.openai import OpenAIAdapter
from journal.store import Journal

pytest.importorskip("httpx", reason="the openai extra is not installed")
pytest.importorskip("mcp", reason="the mcp package is not installed")


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def make_agent(fake: FakeOpenAI, tmp_path, journal: Journal | None = None) -> AcpAgent:
    return AcpAgent(
        OpenAIAdapter(
            model="gpt-4o",
            base_url=fake.base_url,
            api_key="sk-test-0000000000",
            env={"XDG_CONFIG_HOME": str(tmp_path / "config")},
        ),
        journal=journal,
    )


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


async def new_session(editor, tmp_path, servers: list[dict[str, Any]]) -> str:
    result = await editor.request("session/new", {"cwd": str(tmp_path), "mcpServers": servers})
    return result["sessionId"]


async def test_a_stdio_mcp_servers_tools_are_offered_asked_for_and_called(fake, tmp_path):
    fake.script(reply(tools=[("mcp__notes__add", {"a": 2, "b": 3}), ("mcp__notes__explode", {})]), reply("2 + 3 = 5"))
    async with running(make_agent(fake, tmp_path)) as editor:
        await editor.initialize()
        sid = await new_session(editor, tmp_path, [stdio_server()])
        assert await editor.prompt(sid, "add 2 and 3") == {"stopReason": "end_turn"}
        asked = [
            r["params"]["toolCall"]["title"]
            for r in editor.server_requests
            if r["method"] == "session/request_permission"
        ]
        assert asked == ["notes: add", "notes: explode"]
        statuses = [u.get("status") for u in editor.updates[sid] if u["sessionUpdate"] == "tool_call_update"]
        assert statuses[-1] == "failed" and "completed" in statuses
    offered = {t["function"]["name"]: t["function"] for t in fake.chats[0]["tools"]}
    assert offered["mcp__notes__add"]["parameters"]["required"] == ["a", "b"]
    assert offered["mcp__notes__add"]["description"] == "[MCP server notes] Add two numbers."
    results = tool_results(fake.chats[1])
    assert results["call_0_mcp__notes__add"] == "5"
    assert results["call_1_mcp__notes__explode"].startswith("Error: ")


async def test_an_mcp_server_that_cannot_start_is_shown_failed_and_the_turn_goes_on(fake, tmp_path):
    fake.script(reply("no tools, still fine"))
    async with running(make_agent(fake, tmp_path)) as editor:
        await editor.initialize()
        sid = await new_session(
            editor, tmp_path, [{"name": "ghost", "command": str(tmp_path / "no-such-server"), "args": [], "env": []}]
        )
        assert await editor.prompt(sid, "hi") == {"stopReason": "end_turn"}
        (started,) = [u for u in editor.updates[sid] if u["sessionUpdate"] == "tool_call"]
        assert started["title"] == "Connect to MCP server ghost"
        failed = [u for u in editor.updates[sid] if u.get("status") == "failed"]
        assert failed[0]["content"][0]["content"]["text"].startswith("Not connected: ")
        assert editor.text(sid) == "no tools, still fine"
    assert not [t for t in fake.chats[0]["tools"] if t["function"]["name"].startswith("mcp__")]


async def test_an_http_mcp_server_is_connected_when_the_agent_advertises_http(fake, tmp_path):
    with http_server() as url:
        fake.script(reply(tools=[("mcp__web__add", {"a": 40, "b": 2})]), reply("42"))
        async with running(make_agent(fake, tmp_path)) as editor:
            init = await editor.initialize()
            assert init["agentCapabilities"]["mcpCapabilities"] == {"http": True, "sse": False}
            sid = await new_session(editor, tmp_path, [{"type": "http", "name": "web", "url": url, "headers": []}])
            assert await editor.prompt(sid, "add") == {"stopReason": "end_turn"}
        assert tool_results(fake.chats[1]) == {"call_0_mcp__web__add": "42"}


def exited(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def wait_exited(pid: int) -> None:
    """Until `pid` exits: the agent's child, not ours to wait for, so through a pidfd (Linux)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # exited and reaped already
    try:
        with anyio.fail_after(10):
            await anyio.wait_readable(pidfd)  # a pidfd turns readable when its process exits
    finally:
        os.close(pidfd)


async def test_a_sessions_mcp_server_is_connected_once_and_disconnected_by_session_close(fake, tmp_path):
    log = tmp_path / "starts.log"
    fake.script(
        reply(tools=[("mcp__notes__add", {"a": 1, "b": 2})]),
        reply("3"),
        reply(tools=[("mcp__notes__add", {"a": 3, "b": 4})]),
        reply("7"),
    )
    journal = await Journal.open(tmp_path / "journal.db")  # session/close needs durable sessions
    try:
        async with running(make_agent(fake, tmp_path, journal)) as editor:
            await editor.initialize()
            sid = await new_session(editor, tmp_path, [stdio_server(NOTES_LOG=str(log))])
            assert await editor.prompt(sid, "add 1 and 2") == {"stopReason": "end_turn"}
            assert await editor.prompt(sid, "add 3 and 4") == {"stopReason": "end_turn"}
            (pid,) = started_pids(log)  # one start for both turns
            asked = [r for r in editor.server_requests if r["method"] == "session/request_permission"]
            assert len(asked) == 2  # the second turn's call asks through the second turn's sink
            assert not exited(pid)
            assert await editor.request("session/close", {"sessionId": sid}) == {}
            await wait_exited(pid)  # while the client is still connected
            assert started_pids(log) == [pid]
    finally:
        await journal.close()
    assert tool_results(fake.chats[1]) == {"call_0_mcp__notes__add": "3"}
    assert tool_results(fake.chats[3]) == {"call_0_mcp__notes__add": "7"}
    assert "mcp__notes__add" in {t["function"]["name"] for t in fake.chats[2]["tools"]}


async def test_a_sessions_mcp_server_is_disconnected_when_the_client_goes_away(fake, tmp_path):
    log = tmp_path / "starts.log"
    fake.script(reply("hello"))
    async with running(make_agent(fake, tmp_path)) as editor:
        await editor.initialize()
        sid = await new_session(editor, tmp_path, [stdio_server(NOTES_LOG=str(log))])
        assert await editor.prompt(sid, "hi") == {"stopReason": "end_turn"}
        (pid,) = started_pids(log)
        assert not exited(pid)
    await wait_exited(pid)
