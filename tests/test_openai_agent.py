"""The openai agent, for real over HTTP against a fake endpoint, through the real server stack.

Every test drives `OpenAIAdapter` from a fake editor (schema-checked frames) through the ACP
server, the thread bridge and httpx, to `FakeOpenAI` on 127.0.0.1, whose scripted streamed
answers play the model; nothing is mocked.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
from fake_openai import Failure, FakeOpenAI, Stream, chunk, reply
from harness import RemoteError, running

from acp_server.acp.handlers import AcpAgent
from acp_server.rpc.errors import INTERNAL_ERROR
from adapters.openai import OpenAIAdapter

pytest.importorskip("httpx", reason="the openai extra is not installed")

KEY = "sk-test-0123456789abcd"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=["gpt-4o", "llama3.2"]) as server:
        yield server


@pytest.fixture
def agent(tmp_path) -> Iterator[Callable[..., AcpAgent]]:
    """Make servers whose openai agent talks to a fake endpoint and reads no user config."""
    made: list[OpenAIAdapter] = []

    def make(fake: FakeOpenAI, **kwargs: Any) -> AcpAgent:
        env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
        options = {"model": "gpt-4o", "base_url": fake.base_url, "api_key": KEY, **kwargs}
        made.append(OpenAIAdapter(env=env, **options))
        return AcpAgent(made[-1])

    yield make
    for adapter in made:
        adapter.close()


def tool_updates(editor, sid: str) -> list[dict[str, Any]]:
    return [u for u in editor.updates[sid] if u["sessionUpdate"] in ("tool_call", "tool_call_update")]


def final_status(editor, sid: str, tool_call_id: str) -> str:
    statuses = [u.get("status") for u in tool_updates(editor, sid) if u["toolCallId"] == tool_call_id]
    return [s for s in statuses if s][-1]


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


async def reject(params: dict[str, Any]) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": "reject_once"}}


# --- streaming -------------------------------------------------------------------------


async def test_text_streams_to_the_editor_from_a_streamed_chat_completion_request(fake, agent, tmp_path):
    fake.script(reply("Hello from the fake model"))
    async with running(agent(fake)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "say hello") == {"stopReason": "end_turn"}
        assert editor.text(sid) == "Hello from the fake model"
    (chat,) = [r for r in fake.requests if r.method == "POST"]
    assert chat.path == "/v1/chat/completions"
    assert chat.headers["authorization"] == f"Bearer {KEY}"
    assert chat.body["model"] == "gpt-4o"
    assert chat.body["stream"] is True and chat.body["stream_options"] == {"include_usage": True}
    assert [m["role"] for m in chat.body["messages"]] == ["system", "user"]
    assert str(tmp_path) in chat.body["messages"][0]["content"]
    assert chat.body["messages"][1] == {"role": "user", "content": "say hello"}
    assert {t["function"]["name"] for t in chat.body["tools"]} == {
        "read_file",
        "list_directory",
        "search_text",
        "write_file",
        "edit_file",
        "run_command",
    }
    assert "reasoning_effort" not in chat.body


async def test_reasoning_deltas_become_thought_chunks_whichever_field_carries_them(fake, agent, tmp_path):
    fake.script(
        reply("answer", reasoning="thinking hard"), reply("again", reasoning="ollama way", reasoning_key="reasoning")
    )
    async with running(agent(fake)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "first")
        await editor.prompt(sid, "second")
        assert editor.text(sid, "agent_thought_chunk") == "thinking hardollama way"
        assert editor.text(sid) == "answeragain"


async def test_the_next_prompt_carries_the_earlier_exchange_as_history(fake, agent, tmp_path):
    fake.script(reply("first answer"), reply("second answer"))
    async with running(agent(fake)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "one")
        await editor.prompt(sid, "two")
    assert fake.chats[1]["messages"][1:] == [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "two"},
    ]


async def test_usage_reaches_the_editor_with_a_cost_only_when_the_provider_reports_one(fake, agent, tmp_path):
    fake.script(
        reply("a", usage={"prompt_tokens": 100, "completion_tokens": 20}),
        reply("b", usage={"prompt_tokens": 150, "completion_tokens": 30, "cost": 0.25}),
        reply("c", usage={"prompt_tokens": 200, "completion_tokens": 10, "cost": 0.5}),
    )
    async with running(agent(fake)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        for text in ("a", "b", "c"):
            await editor.prompt(sid, text)
        usage = [u for u in editor.updates[sid] if u["sessionUpdate"] == "usage_update"]
    assert usage == [
        {"sessionUpdate": "usage_update", "used": 120, "size": 128_000},
        {"sessionUpdate": "usage_update", "used": 180, "size": 128_000, "cost": {"amount": 0.25, "currency": "USD"}},
        {"sessionUpdate": "usage_update", "used": 210, "size": 128_000, "cost": {"amount": 0.75, "currency": "USD"}},
    ]


async def test_finish_reason_length_ends_the_turn_with_max_tokens(fake, agent, tmp_path):
    fake.script(reply("cut off mid", finish="length"))
    async with running(agent(fake)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "write a novel") == {"stopReason": "max_tokens"}
        assert editor.text(sid) == "cut off mid"


async def test_a_refusal_or_a_content_filter_ends_the_turn_with_refusal(fake, agent, tmp_path):
    fake.script(reply(refusal="I can't help with that."), reply("partial", finish="content_filter"))
    async with running(agent(fake)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "something bad") == {"stopReason": "refusal"}
        assert editor.text(sid) == "I can't help with that."
        assert await editor.prompt(sid, "something filtered") == {"stopReason": "refusal"}


# --- tools -----------------------------------------------------------------------------


async def test_a_tool_loop_goes_on_after_a_rejected_permission_and_the_model_hears_why(fake, agent, tmp_path):
    (tmp_path / "notes.txt").write_text("line one\nline two\nline three\n")
    fake.script(
        reply(
            "Let me look.",
            tools=[
                ("read_file", {"path": "notes.txt", "start_line": 2, "end_line": 3}),
                ("run_command", {"command": "touch made"}),
            ],
        ),
        reply("I was not allowed to run it."),
    )
    async with running(agent(fake)) as editor:
        editor.handlers["session/request_permission"] = reject
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "look and run") == {"stopReason": "end_turn"}
        started = [u for u in tool_updates(editor, sid) if u["sessionUpdate"] == "tool_call"]
        assert [(u["kind"], u["title"]) for u in started] == [
            ("read", "Read notes.txt (lines 2-3)"),
            ("execute", "`touch made`"),
        ]
        assert [final_status(editor, sid, u["toolCallId"]) for u in started] == ["completed", "failed"]
        asked = [r for r in editor.server_requests if r["method"] == "session/request_permission"]
        assert [r["params"]["toolCall"]["toolCallId"] for r in asked] == [started[1]["toolCallId"]]
        assert editor.text(sid) == "Let me look.I was not allowed to run it."
    assert not (tmp_path / "made").exists()
    second = fake.chats[1]
    assert second["messages"][-3]["tool_calls"][1]["function"] == {
        "name": "run_command",
        "arguments": json.dumps({"command": "touch made"}),
    }
    results = tool_results(second)
    assert results["call_0_read_file"] == "line two\nline three\n"
    assert results["call_1_run_command"].startswith("Error: the user did not allow this call")


async def test_an_edit_shows_its_diff_before_asking_permission_and_then_changes_the_file(fake, agent, tmp_path):
    target = tmp_path / "app.py"
    target.write_text("x = 1\ny = 2\n")
    fake.script(
        reply(tools=[("edit_file", {"path": "app.py", "old_string": "y = 2", "new_string": "y = 3"})]),
        reply("Changed y."),
    )
    async with running(agent(fake)) as editor:
        seen_before_asking: list[list[dict[str, Any]]] = []

        async def allow(params: dict[str, Any]) -> dict[str, Any]:
            seen_before_asking.append(list(editor.updates[params["sessionId"]]))
            return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

        editor.handlers["session/request_permission"] = allow
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "bump y") == {"stopReason": "end_turn"}
        (before,) = seen_before_asking
        diff = {"type": "diff", "path": str(target), "oldText": "x = 1\ny = 2\n", "newText": "x = 1\ny = 3\n"}
        assert [u["content"] for u in before if u.get("content")] == [[diff]]
        started = next(u for u in editor.updates[sid] if u["sessionUpdate"] == "tool_call")
        assert started["kind"] == "edit" and started["locations"] == [{"path": str(target)}]
        assert final_status(editor, sid, started["toolCallId"]) == "completed"
    assert target.read_text() == "x = 1\ny = 3\n"
    assert tool_results(fake.chats[1]) == {"call_0_edit_file": "Edited app.py."}


async def test_an_edit_whose_text_is_not_unique_fails_without_asking_and_the_model_is_told(fake, agent, tmp_path):
    (tmp_path / "dup.txt").write_text("same\nsame\n")
    fake.script(
        reply(tools=[("edit_file", {"path": "dup.txt", "old_string": "same", "new_string": "new"})]), reply("ok")
    )
    async with running(agent(fake)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "edit") == {"stopReason": "end_turn"}
        assert not [r for r in editor.server_requests if r["method"] == "session/request_permission"]
    assert (tmp_path / "dup.txt").read_text() == "same\nsame\n"
    assert "occurs 2 times" in tool_results(fake.chats[1])["call_0_edit_file"]


async def test_a_new_file_is_written_through_the_editor_when_it_offers_fs(fake, agent, tmp_path):
    fake.script(reply(tools=[("write_file", {"path": "sub/new.md", "content": "# Title\n"})]), reply("Written."))
    (tmp_path / "sub").mkdir()
    async with running(agent(fake)) as editor:
        await editor.initialize({"fs": {"readTextFile": True, "writeTextFile": True}})
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "write") == {"stopReason": "end_turn"}
        assert editor.files_written == [(str(tmp_path / "sub" / "new.md"), "# Title\n")]
        diffs = [c for u in tool_updates(editor, sid) for c in u.get("content") or [] if c["type"] == "diff"]
        assert diffs[0] == {
            "type": "diff",
            "path": str(tmp_path / "sub" / "new.md"),
            "oldText": None,
            "newText": "# Title\n",
        }


async def test_a_command_runs_in_the_client_terminal_when_the_editor_offers_one(fake, agent, tmp_path):
    fake.script(reply(tools=[("run_command", {"command": "echo from-terminal"})]), reply("Done."))
    async with running(agent(fake)) as editor:
        editor.enable_terminal()
        await editor.initialize({"terminal": True})
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "run it") == {"stopReason": "end_turn"}
        assert editor.terminal_calls[0] == "create"
        started = next(u for u in editor.updates[sid] if u["sessionUpdate"] == "tool_call")
        assert started["kind"] == "execute"
        last = [u for u in tool_updates(editor, sid) if u.get("status") == "completed"][-1]
        assert last["content"][0]["type"] == "terminal"
    assert tool_results(fake.chats[1])["call_0_run_command"] == "exit code 0\nfrom-terminal\n"


async def test_a_command_runs_locally_in_the_session_directory_without_a_client_terminal(fake, agent, tmp_path):
    fake.script(
        reply(tools=[("run_command", {"command": "echo local > out.txt; cat out.txt; exit 3"})]), reply("It failed.")
    )
    async with running(agent(fake)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "run it") == {"stopReason": "end_turn"}
        started = next(u for u in editor.updates[sid] if u["sessionUpdate"] == "tool_call")
        assert final_status(editor, sid, started["toolCallId"]) == "failed"
    assert (tmp_path / "out.txt").read_text() == "local\n"
    assert tool_results(fake.chats[1])["call_0_run_command"] == "exit code 3\nlocal\n"


async def test_search_respects_gitignore_and_listing_refuses_paths_outside_the_workspace(fake, agent, tmp_path):
    (tmp_path / ".gitignore").write_text("build/\n*.log\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "out.py").write_text("needle = 1\n")
    (tmp_path / "debug.log").write_text("needle in a log\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("import os\nneedle = 2\n")
    fake.script(
        reply(
            tools=[("search_text", {"pattern": "needle"}), ("list_directory", {"path": ".."}), ("list_directory", {})]
        ),
        reply("Found it."),
    )
    async with running(agent(fake)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "find needle") == {"stopReason": "end_turn"}
        assert not [r for r in editor.server_requests if r["method"] == "session/request_permission"]
    results = tool_results(fake.chats[1])
    assert results["call_0_search_text"] == "src/main.py:2: needle = 2"
    assert results["call_1_list_directory"].startswith("Error: Refused: .. is outside the session's workspace")
    assert results["call_2_list_directory"] == "build/\nsrc/\n.gitignore\ndebug.log"


async def test_unknown_tools_and_malformed_arguments_are_tool_errors_and_the_turn_goes_on(fake, agent, tmp_path):
    broken = reply(tools=[("delete_everything", {})])
    broken.chunks.insert(
        -1,
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_bad",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{oops"},
                    }
                ]
            }
        ),
    )
    fake.script(broken, reply("Sorry."))
    async with running(agent(fake)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "go") == {"stopReason": "end_turn"}
        assert [u["status"] for u in tool_updates(editor, sid) if u.get("status") != "pending"] == ["failed"] * 2
    results = tool_results(fake.chats[1])
    assert results["call_0_delete_everything"] == "Error: There is no tool named 'delete_everything'"
    assert results["call_bad"].startswith("Error: The tool arguments are not valid JSON")


async def test_the_tool_loop_stops_at_max_turn_requests_from_the_config_file(fake, agent, tmp_path):
    config = tmp_path / "config" / "acp-server" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[openai]\nmax_turn_requests = 2\n")
    fake.script(*[reply(tools=[("list_directory", {})]) for _ in range(3)])
    async with running(agent(fake)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "loop forever") == {"stopReason": "max_turn_requests"}
    assert len(fake.chats) == 2


# --- failures and cancellation -------------------------------------------------------------


async def test_a_429_is_retried_honouring_retry_after_and_then_succeeds(fake, agent, tmp_path):
    fake.script(
        Failure(429, "slow down", {"Retry-After": "0"}), Failure(503, "busy", {"Retry-After": "0"}), reply("finally")
    )
    async with running(agent(fake)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "hi") == {"stopReason": "end_turn"}
        assert editor.text(sid) == "finally"
    assert len(fake.chats) == 3


async def test_a_failure_that_persists_is_retried_a_bounded_number_of_times_then_explained(fake, agent, tmp_path):
    fake.script(*[Failure(503, "overloaded", {"Retry-After": "0"}) for _ in range(6)])
    async with running(agent(fake)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        with pytest.raises(RemoteError) as caught:
            await editor.prompt(sid, "hi")
    assert caught.value.code == INTERNAL_ERROR
    assert caught.value.message == f"The model endpoint {fake.base_url} failed (HTTP 503 after 4 attempts): overloaded"
    assert len(fake.chats) == 4


async def test_a_rejected_api_key_tells_the_user_to_set_openai_api_key(fake, agent, tmp_path):
    fake.script(Failure(401, "Incorrect API key provided"))
    async with running(agent(fake)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        with pytest.raises(RemoteError) as caught:
            await editor.prompt(sid, "hi")
    assert caught.value.code == INTERNAL_ERROR
    assert caught.value.message == (
        f"The model endpoint {fake.base_url} refused the API key (HTTP 401: Incorrect API key provided). "
        "Set OPENAI_API_KEY or api_key in " + str(tmp_path / "config" / "acp-server" / "config.toml") + "."
    )
    assert len(fake.chats) == 1


async def test_an_unreachable_endpoint_reaches_the_editor_as_a_clear_message(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://127.0.0.1:{port}/v1"
    adapter = OpenAIAdapter(model="gpt-4o", base_url=base, env={"XDG_CONFIG_HOME": str(tmp_path)})
    async with running(AcpAgent(adapter)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        with anyio.fail_after(10), pytest.raises(RemoteError) as caught:
            await editor.prompt(sid, "hi")
    assert caught.value.code == INTERNAL_ERROR
    assert caught.value.message == (
        f"Cannot reach the model endpoint {base} (connection refused). "
        f"Set OPENAI_BASE_URL or base_url in {tmp_path / 'acp-server' / 'config.toml'}."
    )


async def test_a_cancel_mid_stream_aborts_the_http_stream_at_once(fake, agent, tmp_path):
    fake.script(reply("Thinking about", hold_open=True), reply("still works"))
    async with running(agent(fake)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        task = await editor.start_prompt(sid, "long answer")
        await editor.wait_for(lambda: editor.text(sid) == "Thinking about")
        await editor.notify("session/cancel", {"sessionId": sid})
        assert (await task)["result"] == {"stopReason": "cancelled"}
        assert await anyio.to_thread.run_sync(fake.disconnected.wait, 5)
        assert await editor.prompt(sid, "again") == {"stopReason": "end_turn"}
        assert editor.text(sid).endswith("still works")


async def test_a_cancel_before_the_endpoint_answers_aborts_the_waiting_request(fake, agent, tmp_path):
    fake.script(Stream([], hold_headers=True))
    async with running(agent(fake)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        task = await editor.start_prompt(sid, "slow model")
        assert await anyio.to_thread.run_sync(fake.chat_arrived.wait, 5)
        await editor.notify("session/cancel", {"sessionId": sid})
        assert (await task)["result"] == {"stopReason": "cancelled"}
        assert await anyio.to_thread.run_sync(fake.disconnected.wait, 5)
