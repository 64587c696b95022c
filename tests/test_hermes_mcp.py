"""MCP servers for the hermes agent, for real: Hermes' AIAgent against the fake model on
127.0.0.1, the notes server of `mcp_notes` over stdio (run by the adapter) or streamable HTTP,
connected by acp-server's own MCP client and registered in Hermes' tool registry under
Hermes' names (`mcp__<server>__<tool>`), every call asked about through our permission flow.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("run_agent", reason="the hermes extra is not installed")

from fake_openai import FakeOpenAI, reply
from hermes_home import hermes_model
from mcp_notes import SCRIPT, http_server, started_pids, stdio_server
from stdio_server import StdioServer

from adapters.base import TurnInput
from adapters.events import TextContent, ToolCallStarted, ToolCallUpdated
from adapters.hermes import HermesAdapter
from adapters.testing import REJECT, RecordingSink, TurnRecord, run_turn, start_turn

UNTRUSTED = '<untrusted_tool_result source="'


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    with hermes_model(tmp_path, monkeypatch) as server:
        yield server


@pytest.fixture
def adapter(fake: FakeOpenAI) -> Iterator[HermesAdapter]:
    hermes = HermesAdapter(warm=False)
    yield hermes
    hermes.close()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def turn(
    adapter: HermesAdapter, prompt: str, workspace: Path, sink: RecordingSink | None = None, **fields: Any
) -> TurnRecord:
    fields.setdefault("session_id", "s1")
    return run_turn(adapter, prompt, sink=sink, cwd=str(workspace), timeout=60, **fields)


def tool_results(body: dict[str, Any]) -> dict[str, Any]:
    """A request's tool results as JSON; Hermes wraps longer MCP results as untrusted data."""
    results: dict[str, Any] = {}
    for message in (m for m in body["messages"] if m["role"] == "tool"):
        content: str = message["content"]
        if content.startswith(UNTRUSTED):
            content = content.split("\n\n", 1)[1].removesuffix("\n</untrusted_tool_result>")
        results[message["tool_call_id"]] = json.loads(content)
    return results


def offered(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in body.get("tools") or []}


def statuses(record: TurnRecord) -> list[str]:
    return [e.status for e in record.of_kind(ToolCallUpdated) if e.status]


def logged(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_an_mcp_tool_asks_about_its_visible_call_and_its_result_reaches_the_model(fake, adapter, workspace):
    fake.script(reply(tools=[("mcp__notes__add", {"a": 2, "b": 3})]), reply("2 + 3 = 5"))
    record = turn(adapter, "add 2 and 3", workspace, mcp_servers=(stdio_server(),))
    assert (record.reason, record.text) == ("end_turn", "2 + 3 = 5")
    (started,) = record.of_kind(ToolCallStarted)
    assert (started.tool_call_id, started.tool_kind, started.title) == ("call_0_mcp__notes__add", "other", "notes: add")
    asked = [a for a in record.asks if a.method == "request_permission"]
    assert [a.args for a in asked] == [("call_0_mcp__notes__add",)]
    assert statuses(record) == ["in_progress", "completed"]
    add = offered(fake.chats[0])["mcp__notes__add"]
    assert (add["description"], add["parameters"]["required"]) == ("Add two numbers.", ["a", "b"])
    assert tool_results(fake.chats[1]) == {"call_0_mcp__notes__add": {"result": "5"}}


def test_a_refused_mcp_call_never_reaches_the_server_and_the_turn_goes_on(fake, adapter, workspace, tmp_path):
    calls = tmp_path / "calls.log"
    fake.script(reply(tools=[("mcp__notes__add", {"a": 2, "b": 3})]), reply("Understood."))
    server = stdio_server(NOTES_CALLS=str(calls))
    record = turn(adapter, "add", workspace, RecordingSink(REJECT), mcp_servers=(server,))
    assert (record.reason, record.text) == ("end_turn", "Understood.")
    assert statuses(record) == ["failed"]
    assert "Rejected by the test" in tool_results(fake.chats[1])["call_0_mcp__notes__add"]["error"]
    assert logged(calls) == []


def test_a_failing_mcp_tool_is_a_failed_call_the_model_hears_about(fake, adapter, workspace):
    fake.script(reply(tools=[("mcp__notes__explode", {})]), reply("It broke."))
    record = turn(adapter, "explode", workspace, mcp_servers=(stdio_server(),))
    assert (record.reason, record.text) == ("end_turn", "It broke.")
    assert statuses(record)[-1] == "failed"
    assert "broken on purpose" in tool_results(fake.chats[1])["call_0_mcp__notes__explode"]["error"]


def test_a_server_that_cannot_start_is_logged_reported_on_the_first_turn_and_the_session_goes_on(
    fake, adapter, workspace, tmp_path, caplog
):
    ghost = {"name": "ghost", "command": str(tmp_path / "no-such-server"), "args": [], "env": []}
    adapter.open_session(TurnInput("s1", str(workspace), (), mcp_servers=(ghost,)))  # no turn to report to yet
    assert "MCP server ghost is not connected" in caplog.text
    fake.script(reply("Still fine."), reply("Again."))
    first = turn(adapter, "hi", workspace, mcp_servers=(ghost,))
    assert (first.reason, first.text) == ("end_turn", "Still fine.")
    (started,) = first.of_kind(ToolCallStarted)
    assert started.title == "Connect to MCP server ghost"
    (failed,) = [e for e in first.of_kind(ToolCallUpdated) if e.status == "failed"]
    assert failed.content is not None and isinstance(text := failed.content[0], TextContent)
    assert text.text.startswith("Not connected: ")
    assert not [name for name in offered(fake.chats[0]) if name.startswith("mcp__")]
    assert turn(adapter, "again", workspace, mcp_servers=(ghost,)).of_kind(ToolCallStarted) == []  # said once


def test_a_call_waiting_on_its_server_stops_at_a_cancel_and_the_connection_stays(fake, adapter, workspace, tmp_path):
    calls = tmp_path / "calls.log"
    servers = (stdio_server(NOTES_CALLS=str(calls)),)
    fake.script(reply(tools=[("mcp__notes__wait", {})]))
    running = start_turn(adapter, "wait", cwd=str(workspace), session_id="s1", mcp_servers=servers)
    deadline = time.monotonic() + 60
    while "wait" not in logged(calls) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert logged(calls) == ["wait"], "the server never got the call"
    running.cancel()
    assert running.wait(60).reason == "cancelled"
    fake.script(reply(tools=[("mcp__notes__add", {"a": 1, "b": 1})]), reply("2"))
    assert turn(adapter, "add", workspace, mcp_servers=servers).reason == "end_turn"
    assert tool_results(fake.chats[-1])["call_0_mcp__notes__add"] == {"result": "2"}


def test_an_http_mcp_server_is_connected(fake, adapter, workspace):
    assert adapter.capabilities().mcp_http
    with http_server() as url:
        fake.script(reply(tools=[("mcp__web__add", {"a": 40, "b": 2})]), reply("42"))
        web = {"type": "http", "name": "web", "url": url, "headers": []}
        assert turn(adapter, "add", workspace, mcp_servers=(web,)).reason == "end_turn"
        adapter.close_session("s1")
    assert tool_results(fake.chats[1]) == {"call_0_mcp__web__add": {"result": "42"}}


def test_two_sessions_with_a_same_named_server_each_reach_and_see_their_own(fake, adapter, workspace):
    alpha = (stdio_server(NOTES_NAME="alpha", NOTES_EXTRA="1"),)
    beta = (stdio_server(NOTES_NAME="beta"),)
    ask = reply(tools=[("mcp__notes__whoami", {})])
    fake.script(ask, reply("alpha"), ask, reply("beta"), ask, reply("alpha again"))
    turn(adapter, "who?", workspace, session_id="s1", mcp_servers=alpha)
    turn(adapter, "who?", workspace, session_id="s2", mcp_servers=beta)
    turn(adapter, "who?", workspace, session_id="s1", mcp_servers=alpha)  # after s2 registered its tools
    answers = [tool_results(fake.chats[i])["call_0_mcp__notes__whoami"] for i in (1, 3, 5)]
    assert answers == [{"result": "alpha"}, {"result": "beta"}, {"result": "alpha"}]
    assert ["mcp__notes__extra" in offered(fake.chats[i]) for i in (0, 2, 4)] == [True, False, True]


def test_a_session_loaded_again_with_other_mcp_servers_is_built_again_with_them(fake, adapter, workspace, tmp_path):
    starts = tmp_path / "alpha.log"
    alpha = (stdio_server(NOTES_NAME="alpha", NOTES_LOG=str(starts)),)
    beta = (stdio_server(NOTES_NAME="beta"),)
    ask = reply(tools=[("mcp__notes__whoami", {})])
    fake.script(ask, reply("alpha"), ask, reply("beta"))
    turn(adapter, "who?", workspace, mcp_servers=alpha)
    adapter.open_session(TurnInput("s1", str(workspace), (), mcp_servers=beta))  # session/load, other servers
    turn(adapter, "who?", workspace, mcp_servers=beta)
    answers = [tool_results(fake.chats[i])["call_0_mcp__notes__whoami"] for i in (1, 3)]
    assert answers == [{"result": "alpha"}, {"result": "beta"}]
    (pid,) = started_pids(starts)
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid), "the replaced server was left running"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z")  # a zombie is gone


def test_config_yaml_mcp_servers_are_connected_once_and_shared_by_the_sessions(
    fake, adapter, workspace, tmp_path, monkeypatch
):
    log = tmp_path / "starts.log"
    monkeypatch.setenv("NOTES_SECRET_NAME", "from-the-environment")
    config = Path(os.environ["HERMES_HOME"]) / "config.yaml"
    config.write_text(
        config.read_text()
        + f"""
mcp_servers:
  notes:
    command: {json.dumps(sys.executable)}
    args: [{json.dumps(SCRIPT)}]
    env:
      NOTES_LOG: {json.dumps(str(log))}
      NOTES_NAME: "${{NOTES_SECRET_NAME}}"
    tools:
      exclude: [explode]
  ghost:
    command: {json.dumps(str(tmp_path / "no-such-server"))}
    enabled: false
"""
    )
    ask = reply(tools=[("mcp__notes__whoami", {})])
    fake.script(ask, reply("one"), ask, reply("two"))
    first = turn(adapter, "who?", workspace, session_id="s1")
    second = turn(adapter, "who?", workspace, session_id="s2")
    assert [r.text for r in (first, second)] == ["one", "two"]
    assert [tool_results(fake.chats[i])["call_0_mcp__notes__whoami"] for i in (1, 3)] == [
        {"result": "from-the-environment"}
    ] * 2
    assert len(started_pids(log)) == 1, "config.yaml's server was not shared (or Hermes' own client started it)"
    tools = offered(fake.chats[0])
    assert "mcp__notes__add" in tools and "mcp__notes__explode" not in tools
    assert [s.title for s in first.of_kind(ToolCallStarted)] == ["notes: whoami"]  # the disabled ghost: not tried


def test_a_session_new_with_mcp_servers_works_end_to_end_through_the_real_server(fake, workspace, tmp_path):
    fake.script(reply(tools=[("mcp__notes__add", {"a": 2, "b": 3})]), reply("5"))
    server = StdioServer("--agent", "hermes", "--db", str(tmp_path / "journal.db"))
    try:
        server.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        new = {"cwd": str(workspace), "mcpServers": [stdio_server()]}
        sid = server.call("session/new", new)["sessionId"]
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "add 2 and 3"}]}
        done = server.response(server.request("session/prompt", prompt), timeout=90)
        assert done["result"]["stopReason"] == "end_turn", server.exit_report()
        server.close_stdin()
        assert server.wait(30) == 0
    finally:
        server.kill()
    (asked,) = [f["params"]["toolCall"] for f in server.frames if f.get("method") == "session/request_permission"]
    started = [
        f["params"]["update"]
        for f in server.frames
        if f.get("method") == "session/update" and f["params"]["update"]["sessionUpdate"] == "tool_call"
    ]
    assert [(s["toolCallId"], s["title"], s["kind"]) for s in started] == [
        ("call_0_mcp__notes__add", "notes: add", "other")
    ]
    assert asked["toolCallId"] == "call_0_mcp__notes__add"
    assert tool_results(fake.chats[1]) == {"call_0_mcp__notes__add": {"result": "5"}}
