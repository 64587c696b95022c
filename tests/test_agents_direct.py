"""Each real ACP agent, driven directly by a plain ACP client, offline against a fake model.

No acp-server in between yet: tests/agent_client.py speaks ACP to the agent's process; the
agent's model is a fake of its own API on 127.0.0.1 (tests/agents.py says which, and how each
agent is configured). Per agent: a prompt streams the model's text and ends the turn, and the
next prompt reaches the model with the earlier turns; a scripted tool call is announced and
asks the client's permission, and runs once allowed (gemini and fast-agent write through the
client's fs); cancel ends the turn as cancelled and drops the model's stream. Every frame the
agent writes is checked against the ACP schema (deviations each agent is known to have are
listed in tests/agents.py, precisely, so they hide nothing else), and closing kills the
agent's whole process group, leaving no process.

What the agents do that an adapter must know (found here, each pinned by the flags in agents.py):
- claude, codex, hermes and fast-agent stay alive after their stdin closes (claude and codex for
  good, hermes and fast-agent for 2-3 s); gemini exits at once. Kill the process group.
- Permission questions may name a tool call never announced: codex (exec_command: the tool_call
  follows the approval), gemini (no tool_call before it), hermes (write_file announces tc-...,
  asks as edit-approval-N, and never finishes tc-...). The question's toolCall must be enough.
- codex keeps a cancelled turn's model stream open until the model sends more or its
  `stream_idle_timeout_ms` passes (5 s in our config; 300 s by default); hermes does the same
  when the stream has stalled before the cancel (until its read timeout: 5 s in our config).
- gemini 0.61.0 cannot create a file through the client's fs: it reads it first, and its ACP SDK
  rejects with the plain error object, so a -32002 "not found" is not seen as ENOENT and
  write_file fails ("Error checking existing file"). Overwriting works.
- fast-agent passes the model's paths to fs/* as they are, relative ones included.
- claude sends `usage_update` with `used: null` (the schema wants an integer).
- claude answers the prompt after a cancel with `end_turn` at once, saying nothing (the end its
  cancelled turn left behind), and its reply comes in the turn after it (acp-server's quirk table
  handles it). hermes 0.19.0 answers it here (the -32603 the quirk table retries is not seen).
- gemini 0.61.0 resets the history of a session loaded within the clock minute it started (its
  file is named by the minute), and then cannot load it (tests/agents.py says more).

An agent that is not installed (tests/agent_installs.py installs them on first use) skips with
the reason; under CI it fails. Start-up times are printed (`-s`), never asserted.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import fake_anthropic
import fake_gemini
import fake_openai
import fake_responses
import httpx
import pytest
from agent_client import AgentClient, connect, live_processes_of
from agents import HELLO, REAL_AGENTS, RealAgent
from fake_anthropic import FakeAnthropic
from fake_endpoint import FakeEndpoint
from fake_gemini import FakeGemini
from fake_openai import FakeOpenAI
from fake_responses import FakeResponses

END = ("completed", "failed")
CANCEL_TIMEOUT = 30.0  # seconds for the fake to see the agent drop a cancelled stream


@dataclass
class Run:
    agent: RealAgent
    client: AgentClient
    fake: FakeEndpoint
    session: str
    work: Path


@pytest.fixture(params=sorted(REAL_AGENTS))
def real(request: pytest.FixtureRequest) -> RealAgent:
    return REAL_AGENTS[request.param]


@asynccontextmanager
async def running(agent: RealAgent, tmp_path: Path) -> AsyncIterator[Run]:
    """The agent against its fake, a session open; afterwards, its frames are valid against the
    schema (but for its known deviations) and none of its processes is left."""
    with agent.endpoint() as fake:
        launch = agent.launch(tmp_path, fake.base_url)
        async with connect(launch, log=tmp_path / "agent-stderr.log") as client:
            session = await client.open_session(launch.cwd)
            print(f"\n{agent.name}: initialize + session/new answered {client.ready_after:.1f} s after start")
            yield Run(agent, client, fake, session, launch.cwd)
    assert client.escaped == [], f"{agent.name} left its process group: {client.escaped}"
    assert live_processes_of(client.pid) == []
    unknown = [p for p in client.schema_problems() if not any(d in p for d in agent.schema_deviations)]
    assert unknown == [], f"{agent.name} wrote frames that are not valid ACP"


def unfinished(client: AgentClient) -> set[str]:
    """The tool calls announced (tool_call) that no update took to completed or failed."""
    ended = {
        u["toolCallId"]
        for u in [*client.of_kind("tool_call"), *client.of_kind("tool_call_update")]
        if u.get("status") in END
    }
    return {u["toolCallId"] for u in client.of_kind("tool_call")} - ended


async def test_a_prompt_streams_the_models_text_and_the_next_prompt_carries_the_earlier_turns(real, tmp_path):
    async with running(real, tmp_path) as run:
        run.fake.script(real.say("Hello from the fake model."), real.say("Second answer."))
        first = await run.client.prompt(run.session, "first question")
        assert first["stopReason"] == "end_turn"
        assert run.client.text() == "Hello from the fake model."
        assert len([u for u in run.client.of_kind("agent_message_chunk") if u["content"].get("text")]) > 1

        second = await run.client.prompt(run.session, "second question")
        assert second["stopReason"] == "end_turn"
        sent = json.dumps(run.fake.model_requests[-1])
        assert "first question" in sent
        assert "Hello from the fake model." in sent
        assert "second question" in sent


async def test_a_tool_call_asks_permission_naming_the_announced_call_and_runs_once_allowed(real, tmp_path):
    async with running(real, tmp_path) as run:
        hello = run.work / "hello.txt"
        if real.writes_existing_files_only:
            hello.write_text("old\n")
        run.fake.script(real.write_hello(run.work), real.say("Done."))
        result = await run.client.prompt(run.session, "create hello.txt")

        assert result["stopReason"] == "end_turn"
        (question,) = run.client.permissions
        (announced,) = run.client.announced_before
        assert (question["toolCall"]["toolCallId"] in announced) != real.asks_for_unannounced_calls
        assert bool(unfinished(run.client)) == real.leaves_calls_unfinished
        assert hello.read_text() == HELLO
        assert run.client.written == ([str(hello)] if real.writes_through_client else [])
        assert real.is_tool_result(run.fake.model_requests[-1])
        assert run.client.text().endswith("Done.")


async def test_cancel_ends_the_turn_as_cancelled_and_the_agent_drops_the_models_stream(real, tmp_path):
    async with running(real, tmp_path) as run:
        run.fake.script(real.say("Thinking", hold_open=True))
        answer: dict[str, Any] = {}

        async def prompt() -> None:
            answer.update(await run.client.prompt(run.session, "think forever"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(prompt)
            await run.client.wait_for("agent_message_chunk")
            await run.client.cancel(run.session)
        assert answer["stopReason"] == "cancelled"
        assert await anyio.to_thread.run_sync(run.fake.disconnected.wait, CANCEL_TIMEOUT)

        run.fake.script(real.say("Next."))
        said = len(run.client.text())
        assert (await run.client.prompt(run.session, "next"))["stopReason"] == "end_turn"
        assert run.client.text()[said:] == ("" if real.after_cancel == "ends_at_once" else "Next.")


# --- the fakes themselves --------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.1"])
def test_a_fake_endpoint_refuses_to_listen_beyond_loopback(host):
    with pytest.raises(ValueError, match="loopback only"):
        FakeEndpoint(host=host)


FAKE_CALLS = [
    (FakeOpenAI, fake_openai.reply, "/chat/completions", {"stream": True, "messages": []}, "data: [DONE]"),
    (FakeAnthropic, fake_anthropic.reply, "/v1/messages?beta=true", {"stream": True}, "event: message_stop"),
    (FakeResponses, fake_responses.reply, "/responses", {"stream": True, "input": []}, "event: response.completed"),
    (FakeGemini, fake_gemini.reply, "/v1beta/models/m:streamGenerateContent?alt=sse", {}, '"finishReason": "STOP"'),
]


@pytest.mark.parametrize("linger", [False, True], ids=["closed", "reset"])
def test_a_held_open_streams_client_that_leaves_before_the_stream_is_written_counts_as_gone(linger):
    """An agent cancels on the first delta it reads, and may close (or reset) the connection while
    the fake is still writing the rest: that is the client gone, as after the rest was written."""
    with FakeOpenAI() as fake:
        fake.script(replace(fake_openai.reply("abc" * 2000, hold_open=True), gap=0.001))
        body = json.dumps({"stream": True, "messages": []}).encode()
        request = (
            f"POST /chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        host, port = fake.base_url.split("//")[1].split("/")[0].split(":")
        with socket.create_connection((host, int(port)), timeout=10) as client:
            client.sendall(request)
            received = b""
            while b"data: " not in received:  # the first chunk, with 2,000 more to come
                more = client.recv(4096)
                assert more, "the fake closed the stream"
                received += more
            if linger:
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        assert fake.disconnected.wait(10)


def test_a_burst_stream_sends_the_same_events_in_one_write():
    """bench/_fake_model.py's answers: what a client reads is the stream written chunk by chunk."""
    body = {"stream": True, "messages": []}
    with FakeOpenAI() as fake:
        answer = fake_openai.reply("abc" * 50, usage={"prompt_tokens": 1, "completion_tokens": 1})
        fake.script(answer, replace(answer, burst=True))
        paced, burst = (httpx.post(fake.base_url + "/chat/completions", json=body, timeout=10) for _ in range(2))
    assert burst.status_code == 200 and burst.headers["content-type"] == "text/event-stream"
    assert burst.text == paced.text and burst.text.count("data: ") > 50 and burst.text.endswith("data: [DONE]\n\n")


@pytest.mark.parametrize(("endpoint", "reply", "path", "body", "ending"), FAKE_CALLS)
def test_each_fake_streams_its_scripted_answer_and_records_the_request(endpoint, reply, path, body, ending):
    with endpoint() as fake:
        fake.script(reply("Hi there"))
        answer = httpx.post(fake.base_url + path, json=body, timeout=10)
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "text/event-stream"
        assert "Hi " in answer.text
        assert ending in answer.text
        assert fake.model_requests == [body]


def test_the_anthropic_fake_streams_blocks_in_the_order_the_messages_api_does():
    stream = fake_anthropic.reply("Hi", thinking="hm", tools=[("Write", {"p": 1})])  # its input in two pieces
    kinds = [c["type"] + ":" + c.get("content_block", c.get("delta", {})).get("type", "") for c in stream.chunks]
    block = ["content_block_start:{}", "content_block_delta:{}_delta", "content_block_stop:"]
    assert kinds == [
        "message_start:",
        *(k.format("thinking") for k in block),
        *(k.format("text") for k in block),
        "content_block_start:tool_use",
        "content_block_delta:input_json_delta",
        "content_block_delta:input_json_delta",
        "content_block_stop:",
        "message_delta:",
        "message_stop:",
    ]
    assert stream.chunks[-2]["delta"]["stop_reason"] == "tool_use"


def test_the_responses_fake_wraps_each_output_item_in_added_and_done_events():
    shell = {"type": "local_shell_call", "action": {"type": "exec", "command": ["ls"]}}
    stream = fake_responses.reply("Hi", reasoning="hm", tools=[("exec_command", {"cmd": "ls"})], items=[shell])
    kinds = [c["type"].removeprefix("response.") for c in stream.chunks]
    assert kinds == [
        "created",
        *("output_item.added", "reasoning_summary_part.added", "reasoning_summary_text.delta"),
        *("reasoning_summary_text.done", "output_item.done"),
        *("output_item.added", "content_part.added", "output_text.delta", "output_text.done"),
        *("content_part.done", "output_item.done"),
        *("output_item.added", "function_call_arguments.delta", "function_call_arguments.delta"),
        *("function_call_arguments.done", "output_item.done"),
        *("output_item.added", "output_item.done"),
        "completed",
    ]
    output = stream.chunks[-1]["response"]["output"]
    assert [item["type"] for item in output] == ["reasoning", "message", "function_call", "local_shell_call"]
    assert len({item["call_id"] for item in output[2:]}) == 2
    assert [c["sequence_number"] for c in stream.chunks] == list(range(len(stream.chunks)))
