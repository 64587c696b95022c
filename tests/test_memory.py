"""The openai agent's memory, against the fake model over real HTTP, through the real server stack:
every request of a session carries what the model did before (live and after a restart, from
the journal), the system message and tools stay byte-identical, a session many times the
window keeps working by compacting, and the editor sees compaction as it asked to.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import Failure, FakeOpenAI, Stream, reply, tokens_of
from harness import running
from jsonschema import Draft202012Validator

from acp_server.acp.handlers import AcpAgent
from adapters.openai import OpenAIAdapter
from adapters.openai.context import CUT_MARK
from adapters.openai.history import STORED_RESULT_CHARS, SUMMARY_MARK
from journal.store import Journal

pytest.importorskip("httpx", reason="the openai extra is not installed")

KEY = "sk-test-0123456789abcd"
NOTES = "line one\nline two\n"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=["gpt-4o"]) as server:
        yield server


@pytest.fixture
def adapter(tmp_path: Path) -> Iterator[Callable[..., OpenAIAdapter]]:
    made: list[OpenAIAdapter] = []

    def make(fake: FakeOpenAI, **kwargs: Any) -> OpenAIAdapter:
        env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
        made.append(OpenAIAdapter(env=env, model="gpt-4o", base_url=fake.base_url, api_key=KEY, **kwargs))
        return made[-1]

    yield make
    for one in made:
        one.close()


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "tool"]


def summary_requests(fake: FakeOpenAI) -> list[dict[str, Any]]:
    return [body for body in fake.chats if "tools" not in body]


def agent_requests(fake: FakeOpenAI) -> list[dict[str, Any]]:
    return [body for body in fake.chats if "tools" in body]


def reads_then_answers(path: str = "notes.txt") -> Callable[[dict[str, Any]], Stream | Failure]:
    """A model that reads `path` after each prompt, answers once it has the result, and
    summarizes when asked without tools."""

    def respond(body: dict[str, Any]) -> Stream | Failure:
        if "tools" not in body:
            return reply("SUMMARY: the user asked to read notes.txt several times.")
        if body["messages"][-1]["role"] == "tool":
            return reply("Read it.")
        return reply(tools=[("read_file", {"path": path})])

    return respond


# --- history fidelity ------------------------------------------------------------------------


async def test_turn_two_and_a_turn_after_a_restart_carry_turn_ones_tool_call_and_result(fake, adapter, tmp_path):
    (tmp_path / "notes.txt").write_text(NOTES)
    fake.responder = reads_then_answers()
    db = tmp_path / "journal.db"
    journal = await Journal.open(db)
    async with running(AcpAgent(adapter(fake), journal=journal)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "read the notes")
        await editor.prompt(sid, "what did they say?")
    await journal.close()
    journal = await Journal.open(db)
    async with running(AcpAgent(adapter(fake), journal=journal)) as editor:
        await editor.initialize()
        await editor.prompt(sid, "and after a restart?")
    await journal.close()

    first_turn = fake.chats[1]["messages"] + [{"role": "assistant", "content": "Read it."}]
    call = first_turn[2]["tool_calls"][0]
    assert call == {
        "id": "call_0_read_file",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": "notes.txt"})},
    }
    assert first_turn[3] == {"role": "tool", "tool_call_id": "call_0_read_file", "content": NOTES}
    turn_two, after_restart = fake.chats[2], fake.chats[4]
    assert turn_two["messages"] == [*first_turn, {"role": "user", "content": "what did they say?"}]
    assert after_restart["messages"][: len(first_turn)] == first_turn
    assert after_restart["messages"][-1] == {"role": "user", "content": "and after a restart?"}
    assert after_restart["messages"][:-1] == fake.chats[3]["messages"] + [{"role": "assistant", "content": "Read it."}]


async def test_a_long_tool_result_is_stored_for_later_turns_cut_with_a_visible_marker(fake, adapter, tmp_path):
    big = "x" * (STORED_RESULT_CHARS + 500)
    (tmp_path / "big.txt").write_text(big)
    fake.script(reply(tools=[("read_file", {"path": "big.txt"})]), reply("Big."), reply("Yes."))
    async with running(AcpAgent(adapter(fake))) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "read big")
        await editor.prompt(sid, "again?")
    (in_turn,) = tool_messages(fake.chats[1])
    (later,) = tool_messages(fake.chats[2])
    assert in_turn["content"] == big
    assert later["content"].startswith("x" * STORED_RESULT_CHARS + "\n[500 more characters of this tool result")


async def test_reasoning_goes_back_within_its_turn_only(fake, adapter, tmp_path):
    (tmp_path / "notes.txt").write_text(NOTES)
    fake.script(
        reply(reasoning="let me read", tools=[("read_file", {"path": "notes.txt"})]), reply("done"), reply("ok")
    )
    async with running(AcpAgent(adapter(fake))) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "think")
        await editor.prompt(sid, "next")
    assert fake.chats[1]["messages"][2]["reasoning_content"] == "let me read"
    assert "reasoning_content" not in fake.chats[2]["messages"][2]


# --- the warm prefix -------------------------------------------------------------------------


async def test_the_system_message_and_sorted_tools_are_byte_identical_across_turns(fake, adapter, tmp_path):
    (tmp_path / "notes.txt").write_text(NOTES)
    fake.responder = reads_then_answers()
    async with running(AcpAgent(adapter(fake))) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        for text in ("one", "two", "three"):
            await editor.prompt(sid, text)
    bodies = fake.chats
    names = [tool["function"]["name"] for tool in bodies[0]["tools"]]
    assert names == sorted(names)
    assert len({json.dumps(body["tools"]) for body in bodies}) == 1
    assert len({json.dumps(body["messages"][0]) for body in bodies}) == 1
    system = bodies[0]["messages"][0]["content"]
    assert str(tmp_path) in system and "Session started on: 20" in system
    for before, after in itertools.pairwise(bodies):
        assert after["messages"][: len(before["messages"])] == before["messages"]


async def test_cached_prompt_tokens_reach_the_prompt_responses_usage(fake, adapter, tmp_path):
    cached = {"prompt_tokens": 900, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 768}}
    fake.script(reply("a", usage=cached), reply("b", usage={"prompt_tokens": 5, "completion_tokens": 1}))
    async with running(AcpAgent(adapter(fake))) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        first = await editor.prompt(sid, "a")
        second = await editor.prompt(sid, "b")
    assert first["usage"] == {"inputTokens": 900, "outputTokens": 10, "totalTokens": 910, "cachedReadTokens": 768}
    assert second["usage"] == {"inputTokens": 5, "outputTokens": 1, "totalTokens": 6}
    unstable = json.loads((Path(__file__).parent.parent / "schema" / "schema.unstable.json").read_text())
    Draft202012Validator({"$ref": "#/$defs/PromptResponse", "$defs": unstable["$defs"]}).validate(first)


# --- context management ----------------------------------------------------------------------

WINDOW = 6_000


def small_window(fake: FakeOpenAI) -> None:
    fake.models = [{"id": "gpt-4o", "object": "model", "context_window": WINDOW}]
    fake.context_limit = WINDOW


async def test_a_session_many_times_the_window_keeps_working_under_the_limit(fake, adapter, tmp_path):
    (tmp_path / "notes.txt").write_text("".join(f"note {i}: {'words ' * 8}\n" for i in range(60)))
    small_window(fake)
    fake.responder = reads_then_answers()
    db = tmp_path / "journal.db"
    journal = await Journal.open(db)
    async with running(AcpAgent(adapter(fake), journal=journal)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        for n in range(12):
            assert await editor.prompt(sid, f"turn {n}: read the notes") == {"stopReason": "end_turn"}
    await journal.close()
    assert not fake.refused
    assert all(tokens_of(body) <= WINDOW for body in fake.chats)
    sent = sum(len(json.dumps(m)) for m in fake.chats[-1]["messages"])
    assert len(summary_requests(fake)) >= 3 and sent < 12 * len((tmp_path / "notes.txt").read_text())
    for body in agent_requests(fake):
        if body["messages"][-1]["role"] == "tool":  # the newest result, always verbatim
            assert body["messages"][-1]["content"] == (tmp_path / "notes.txt").read_text()
    last = agent_requests(fake)[-1]["messages"]
    assert last[1]["content"].startswith(SUMMARY_MARK) and "SUMMARY: the user asked" in last[1]["content"]

    journal = await Journal.open(db)  # the compacted history is what a restarted server resumes
    async with running(AcpAgent(adapter(fake), journal=journal)) as editor:
        await editor.initialize()
        await editor.prompt(sid, "after the restart")
    await journal.close()
    resumed = agent_requests(fake)[-2]["messages"]
    assert resumed[: len(last) + 1] == [*last, {"role": "assistant", "content": "Read it."}]


async def test_an_endpoint_that_says_context_length_exceeded_gets_a_compacted_retry(fake, adapter, tmp_path):
    (tmp_path / "notes.txt").write_text("".join(f"note {i}: {'words ' * 8}\n" for i in range(60)))
    fake.responder = reads_then_answers()
    async with running(AcpAgent(adapter(fake))) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        for n in range(3):
            await editor.prompt(sid, f"turn {n}")
        fake.context_limit = tokens_of(fake.chats[-1]) + 200  # the window turns out smaller than thought
        assert await editor.prompt(sid, "one more") == {"stopReason": "end_turn"}
        assert await editor.prompt(sid, "and one more") == {"stopReason": "end_turn"}
    assert len(fake.refused) == 1
    assert summary_requests(fake)
    retried = agent_requests(fake)[agent_requests(fake).index(fake.refused[0]) + 1]
    assert retried["messages"][1]["content"].startswith(SUMMARY_MARK)
    assert {"role": "user", "content": "one more"} in retried["messages"]  # the current turn, verbatim
    assert retried["messages"][-1] == fake.refused[0]["messages"][-1]
    assert tokens_of(retried) < tokens_of(fake.refused[0])


async def test_a_tool_result_too_big_for_the_window_reaches_the_model_cut_with_a_marker(fake, adapter, tmp_path):
    (tmp_path / "notes.txt").write_text("y" * 40_000)
    small_window(fake)
    fake.responder = reads_then_answers()
    async with running(AcpAgent(adapter(fake))) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "read it") == {"stopReason": "end_turn"}
        assert editor.text(sid) == "Read it."
    assert not fake.refused and all(tokens_of(body) <= WINDOW for body in fake.chats)
    result = tool_messages(fake.chats[-1])[-1]["content"]
    cut = 40_000 - result.index("\n[...")
    assert result == "y" * (40_000 - cut) + CUT_MARK.format(cut) and cut > 20_000


@pytest.mark.parametrize("advertised", ["compaction", "notices", "nothing"])
async def test_the_editor_sees_compaction_as_it_advertised(fake, adapter, tmp_path, advertised, caplog):
    (tmp_path / "notes.txt").write_text("".join(f"note {i}: {'words ' * 8}\n" for i in range(60)))
    small_window(fake)
    fake.responder = reads_then_answers()
    session = {} if advertised == "nothing" else {advertised: {}}
    caplog.set_level("INFO", logger="adapters.openai.compaction")
    async with running(AcpAgent(adapter(fake))) as editor:
        await editor.initialize({"session": session})
        sid = await editor.new_session(tmp_path)
        for n in range(4):
            await editor.prompt(sid, f"turn {n}")
        shown = [u for u in editor.updates[sid] if u["sessionUpdate"] in ("compaction_update", "notice")]
        chunks = [u for u in editor.updates[sid] if u["sessionUpdate"] == "compaction_summary_chunk"]
    assert summary_requests(fake)
    logged = [r.getMessage() for r in caplog.records if "context compacted" in r.getMessage()]
    if advertised == "compaction":
        cid = shown[0]["compactionId"]
        assert [(u["compactionId"], u["status"]) for u in shown[:2]] == [(cid, "in_progress"), (cid, "completed")]
        text = "".join(c["content"]["text"] for c in chunks if c["compactionId"] == cid)
        assert text == "SUMMARY: the user asked to read notes.txt several times."
    elif advertised == "notices":
        assert shown[0]["severity"] == "info" and shown[0]["title"] == "Context compacted"
        assert "summarized to fit the model's context window of 6000 tokens" in shown[0]["description"]
        assert not chunks
    else:
        assert not shown and not chunks and logged


# --- images and embedded context -------------------------------------------------------------


async def test_an_image_an_embedded_resource_and_a_linked_file_reach_the_request(fake, adapter, tmp_path):
    (tmp_path / "linked.py").write_text("print('linked')\n")
    fake.models = [{"id": "gpt-4o", "object": "model", "architecture": {"input_modalities": ["text", "image"]}}]
    fake.script(reply("I see."))
    async with running(AcpAgent(adapter(fake))) as editor:
        init = await editor.initialize({"fs": {"readTextFile": True}})
        sid = await editor.new_session(tmp_path)
        prompt = [
            {"type": "text", "text": "look"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///spec.md", "text": "# Spec", "mimeType": "text/markdown"}},
            {"type": "resource_link", "uri": f"file://{tmp_path}/linked.py", "name": "linked.py"},
            {"type": "resource_link", "uri": "file:///etc/passwd", "name": "passwd"},
        ]
        await editor.request("session/prompt", {"sessionId": sid, "prompt": prompt})
        read = [r for r in editor.server_requests if r["method"] == "fs/read_text_file"]
    caps = init["agentCapabilities"]["promptCapabilities"]
    assert caps["image"] is True and caps["embeddedContext"] is True
    assert [r["params"]["path"] for r in read] == [str(tmp_path / "linked.py")]
    assert fake.chats[0]["messages"][1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "text", "text": '<resource uri="file:///spec.md">\n# Spec\n</resource>'},
            {"type": "text", "text": f"<resource uri=\"file://{tmp_path}/linked.py\">\nprint('linked')\n\n</resource>"},
            {
                "type": "text",
                "text": "[linked: file:///etc/passwd (not attached: Refused: /etc/passwd is outside "
                f"the session's workspace ({tmp_path}))]",
            },
        ],
    }


async def test_images_are_not_advertised_for_a_model_without_vision(fake, adapter, tmp_path):
    async with running(AcpAgent(adapter(fake))) as editor:
        init = await editor.initialize()
    caps = init["agentCapabilities"]["promptCapabilities"]
    assert caps.get("image") is not True and caps["embeddedContext"] is True


async def test_a_reload_replays_the_conversation_without_the_live_compaction_updates(fake, adapter, tmp_path):
    (tmp_path / "notes.txt").write_text("".join(f"note {i}: {'words ' * 8}\n" for i in range(60)))
    small_window(fake)
    fake.responder = reads_then_answers()
    db = tmp_path / "journal.db"
    journal = await Journal.open(db)
    async with running(AcpAgent(adapter(fake), journal=journal)) as editor:
        await editor.initialize({"session": {"compaction": {}, "notices": {}}})
        sid = await editor.new_session(tmp_path)
        for n in range(4):
            await editor.prompt(sid, f"turn {n}")
        assert "compaction_update" in editor.kinds(sid)
    await journal.close()
    journal = await Journal.open(db)
    async with running(AcpAgent(adapter(fake), journal=journal)) as editor:
        await editor.initialize()
        await editor.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        replayed = editor.kinds(sid)
    await journal.close()
    assert replayed.count("user_message_chunk") == 4
    assert not {"compaction_update", "compaction_summary_chunk", "notice"} & set(replayed)


# --- response style ----------------------------------------------------------------------------


async def test_the_vivid_contract_reaches_only_vivid_turns_and_never_the_stored_prompt(fake, adapter, tmp_path):
    from adapters.haui_contract import HAUI_CONTRACT, RICH_GUIDANCE

    fake.script(reply("one"), reply("two"), reply("three"))
    async with running(AcpAgent(adapter(fake))) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        for style, prompt in (("vivid", "first"), ("plain", "second"), ("rich", "third")):
            params = {"sessionId": sid, "configId": "response_style", "value": style}
            await editor.request("session/set_config_option", params)
            assert await editor.prompt(sid, prompt) == {"stopReason": "end_turn"}
    vivid, plain, rich = agent_requests(fake)
    assert vivid["messages"][-2] == {"role": "system", "content": HAUI_CONTRACT}  # just before the prompt
    assert vivid["messages"][-1]["content"] == "first"
    assert all(HAUI_CONTRACT not in json.dumps(body) for body in (plain, rich))
    assert rich["messages"][-2] == {"role": "system", "content": RICH_GUIDANCE}
    assert vivid["messages"][0] == plain["messages"][0] == rich["messages"][0]  # the stored system prompt
    assert plain["messages"][: len(vivid["messages"]) - 2] == vivid["messages"][:-2]  # the warm prefix holds
