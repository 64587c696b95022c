"""Big inputs cost what they must and no more: a read takes the lines asked for and stops (a
1 TiB sparse file stands for a file too big to hold: reading it whole fails at once); a whole
file over the read cap is refused, a range over it is cut with a note. A reply and a tool's
output are cut at their caps with a note, the same live, in the journal and on reload; a tool
input nested too deeply fails that tool call, or is kept as a note, and the turn goes on. What
memory it all takes is measured in bench/big_inputs.py, never here."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, chunk, reply
from harness import FakeEditor, running

from acp_server.acp.handlers import AcpAgent
from acp_server.cli.local import read_text_file
from acp_server.rpc.errors import INTERNAL_ERROR, RpcError
from acp_server.turns.client import ClientCapabilities
from acp_server.turns.files import Files
from adapters.base import ToolRefused
from adapters.excerpt import MAX_READ_BYTES
from adapters.openai import OpenAIAdapter
from adapters.scripted import ScriptedAdapter
from journal import Journal
from journal.caps import MAX_REPLY_CHARS, MAX_TOOL_CHARS
from journal.codec import encode_event

HUGE = 1 << 40  # bytes: more than any machine here holds, and no disk (a sparse file)


def huge_file(tmp_path: Path, head: bytes = b"1\n2\n3\n4\n5\n6\n7\n") -> Path:
    """`head`, then NUL bytes up to 1 TiB, with no newline among them."""
    path = tmp_path / "huge.log"
    with path.open("wb") as f:
        f.write(head)
        f.truncate(HUGE)
    return path


@contextlib.asynccontextmanager
async def openai_editor(fake: FakeOpenAI, tmp_path: Path) -> AsyncIterator[FakeEditor]:
    """An initialized editor of a server whose openai agent talks to `fake`."""
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    adapter = OpenAIAdapter(env=env, model="gpt-4o", base_url=fake.base_url, api_key="sk-x")
    try:
        async with running(AcpAgent(adapter)) as editor:
            await editor.initialize()
            yield editor
    finally:
        adapter.close()


def local_files(tmp_path: Path) -> Files:
    """The server's files of a session whose editor offered no `fs`: read from the local disk."""
    return Files(channel=None, client=ClientCapabilities(), cwd=str(tmp_path), roots=(str(tmp_path),))  # type: ignore[arg-type]


async def test_lines_one_to_five_of_a_huge_file_are_read_without_reading_the_rest(tmp_path):
    huge_file(tmp_path)
    assert await local_files(tmp_path).read("huge.log", 1, 5) == "1\n2\n3\n4\n5\n"
    assert await local_files(tmp_path).read("huge.log", 6, 1) == "6\n"


async def test_the_prompt_client_serves_lines_of_a_huge_file_without_reading_the_rest(tmp_path):
    path = huge_file(tmp_path)
    assert await read_text_file({"path": str(path), "line": 2, "limit": 3}) == {"content": "2\n3\n4\n"}


async def test_the_openai_agent_reading_a_huge_file_whole_gets_its_first_lines_and_a_note(tmp_path):
    huge_file(tmp_path, head=b"".join(b"line %d\n" % n for n in range(1, 2100)))
    with FakeOpenAI(models=["gpt-4o"]) as fake:
        fake.script(reply(tools=[("read_file", {"path": "huge.log"})]), reply("Read."))
        async with openai_editor(fake, tmp_path) as editor:
            sid = await editor.new_session(tmp_path)
            assert await editor.prompt(sid, "go") == {"stopReason": "end_turn"}
    (result,) = [m["content"] for m in fake.chats[1]["messages"] if m["role"] == "tool"]
    assert result.startswith("line 1\nline 2\n")
    assert result.endswith("line 2000\n\n[file continues; read on with start_line=2001]")


async def test_a_whole_file_over_the_read_cap_is_refused_saying_how_to_read_it(tmp_path):
    huge_file(tmp_path)
    with pytest.raises(ToolRefused) as refused:
        await local_files(tmp_path).read("huge.log", None, None)
    assert str(refused.value) == (
        "Cannot read huge.log whole: it is larger than 16 MiB; read it in parts with line and limit"
    )
    with pytest.raises(RpcError) as caught:
        await read_text_file({"path": str(tmp_path / "huge.log")})
    assert caught.value.code == INTERNAL_ERROR


async def test_lines_that_go_on_past_the_read_cap_are_cut_with_a_note(tmp_path):
    huge_file(tmp_path, head=b"first\n" + "é".encode() * 4)
    text = await local_files(tmp_path).read("huge.log", 2, 1)
    kept, note = text.rsplit("\n", 1)
    assert kept.startswith("éééé\x00") and len(kept.encode()) <= MAX_READ_BYTES
    assert note == "[cut: the lines asked for go on past 16 MiB; read on from line 2 with a smaller limit]"


# --- a reply and a tool's output: cut at their caps, the same live and stored ----------------


async def run_then_reload(tmp_path: Path, steps: list[dict[str, Any]]) -> tuple[FakeEditor, FakeEditor, str, list[Any]]:
    """One turn of a scripted agent, then `session/load` from the journal by a second server;
    and the events the journal keeps."""
    agent = ScriptedAdapter.from_data({"scenarios": [{"match": "", "steps": steps}]})
    db = tmp_path / "journal.db"
    async with await Journal.open(db) as journal, running(AcpAgent(agent, journal=journal)) as live:
        await live.initialize()
        sid = await live.new_session(tmp_path)
        assert (await live.prompt(sid, "go"))["stopReason"] == "end_turn"
    async with await Journal.open(db) as journal, running(AcpAgent(agent, journal=journal)) as later:
        await later.initialize()
        await later.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        stored = [record.event async for record in journal.events(sid)]
    return live, later, sid, stored


def tool_texts(editor: FakeEditor, sid: str) -> list[str]:
    return [
        item["content"]["text"]
        for update in editor.updates[sid]
        if update["sessionUpdate"] in ("tool_call", "tool_call_update")
        for item in update.get("content") or []
        if item["type"] == "content"
    ]


async def test_a_reply_over_the_cap_is_cut_with_a_note_the_same_live_stored_and_reloaded(tmp_path):
    piece = "x" * (64 << 10)
    live, later, sid, stored = await run_then_reload(tmp_path, [{"say": piece, "repeat": 40}])  # 2.5 MiB

    note = "\n\n[acp-server: the reply was cut here at 1 MiB; the rest was not kept]"
    assert live.text(sid) == "x" * MAX_REPLY_CHARS + note
    assert later.text(sid) == live.text(sid)
    assert "".join(event.text for event in stored if event.kind == "text") == live.text(sid)


async def test_a_tool_result_over_the_cap_is_cut_with_a_note_the_same_live_stored_and_reloaded(tmp_path):
    (tmp_path / "big.txt").write_bytes((b"y" * 99 + b"\n") * 30_000)  # 3 MB: under the read cap
    steps = [{"tool": "Read big.txt", "kind": "read", "read_file": "big.txt"}]
    live, later, sid, stored = await run_then_reload(tmp_path, steps)

    (text, note) = tool_texts(live, sid)
    assert text == ("y" * 99 + "\n") * (MAX_TOOL_CHARS // 100) + "y" * (MAX_TOOL_CHARS % 100)
    assert note == "\n[acp-server: the tool's output was cut here at 1 MiB]"
    assert tool_texts(later, sid) == [text, note]
    assert sum(len(str(encode_event(event)[1])) for event in stored) < 2 * MAX_TOOL_CHARS


# --- a tool input nested too deeply ----------------------------------------------------------


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


async def test_a_tool_input_nested_too_deeply_is_kept_as_a_note_and_the_turn_goes_on(tmp_path):
    deep: Any = []
    for _ in range(900):  # the journal's codec and the redactor recursed and failed the turn
        deep = [deep]
    steps = [{"tool": "Deep", "input": {"x": deep}, "result": "done"}, {"say": "after"}]
    live, later, sid, stored = await run_then_reload(tmp_path, steps)

    (call,) = [u for u in live.updates[sid] if u["sessionUpdate"] == "tool_call"]
    assert call["rawInput"] == "[acp-server: raw input not kept: nested deeper than 64 levels]"
    assert live.text(sid) == "after" == later.text(sid)
    assert [u for u in later.updates[sid] if u["sessionUpdate"] == "tool_call"] == [call]
    assert not [event for event in stored if event.kind == "done" and event.reason != "end_turn"]


@pytest.mark.parametrize("depth", [900, 5000])  # past the journal's walk; past the JSON parser itself
async def test_tool_arguments_nested_too_deeply_fail_that_tool_call_only(tmp_path, depth):
    deep_call = reply()
    arguments = '{"path": "a.txt", "x": ' + nested(depth) + "}"
    call = {
        "index": 0,
        "id": "call_deep",
        "type": "function",
        "function": {"name": "read_file", "arguments": arguments},
    }
    deep_call.chunks[-1:] = [chunk({"tool_calls": [call]}), chunk(finish="tool_calls")]
    with FakeOpenAI(models=["gpt-4o"]) as fake:
        fake.script(deep_call, reply("Sorry."))
        async with openai_editor(fake, tmp_path) as editor:
            sid = await editor.new_session(tmp_path)
            assert await editor.prompt(sid, "go") == {"stopReason": "end_turn"}
            assert editor.text(sid) == "Sorry."
    told = "The tool arguments are nested deeper than 64 levels; send a flatter JSON object"
    statuses = [u.get("status") for u in editor.updates[sid] if u["sessionUpdate"].startswith("tool_call")]
    assert statuses == ["pending", "failed"]
    assert tool_texts(editor, sid) == [told]
    (result,) = [m["content"] for m in fake.chats[1]["messages"] if m["role"] == "tool"]
    assert result == f"Error: {told}"


async def test_a_permission_question_shows_a_big_diff_as_the_journal_keeps_it(tmp_path):
    asked: list[dict[str, Any]] = []

    async def allow(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    write = {"path": "big.txt", "content": "z" * (2 * MAX_TOOL_CHARS)}
    agent = ScriptedAdapter.from_data(
        {
            "scenarios": [
                {"match": "", "steps": [{"tool": "Write big.txt", "kind": "edit", "ask": True, "write_file": write}]}
            ]
        }
    )
    async with running(AcpAgent(agent)) as editor:
        editor.handlers["session/request_permission"] = allow
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert (await editor.prompt(sid, "go"))["stopReason"] == "end_turn"
    (question,) = asked
    shown = [u["content"] for u in editor.updates[sid] if u.get("content") and u["sessionUpdate"] == "tool_call_update"]
    assert question["toolCall"]["content"] == shown[0]
    assert [item["content"]["text"] for item in shown[0]] == [
        f"[acp-server: the diff of {tmp_path / 'big.txt'} is not shown: it is over the cap]",
        "\n[acp-server: the tool's output was cut here at 1 MiB]",
    ]
    assert (tmp_path / "big.txt").stat().st_size == 2 * MAX_TOOL_CHARS  # what was approved is written whole
