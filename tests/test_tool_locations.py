"""Tool calls that touch a file name it in `locations` (the absolute path; the first line of a
read that starts further in), through the real stack: editors follow along with them, and build
permission titles from them. The scripted agent plays a scenario; the openai agent talks to a
fake model on 127.0.0.1. (Hermes' file tools: tests/test_hermes.py.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, reply
from harness import FakeEditor, running

from acp_server.acp.handlers import AcpAgent
from acp_server.protocol import methods
from adapters.scripted import ScriptedAdapter

FS = {"fs": {"readTextFile": True, "writeTextFile": True}}


async def located_calls(editor: FakeEditor, cwd: Path) -> tuple[dict[str, Any], list[Any]]:
    """Run one prompt: each tool call's title -> its `locations` as the editor got them, and
    the `locations` of every permission question's tool call."""
    await editor.initialize(FS)
    sid = await editor.new_session(cwd)
    assert await editor.prompt(sid, "go") == {"stopReason": "end_turn"}
    calls = {u["title"]: u.get("locations") for u in editor.updates[sid] if u["sessionUpdate"] == "tool_call"}
    asked = [
        r["params"]["toolCall"].get("locations")
        for r in editor.server_requests
        if r["method"] == methods.REQUEST_PERMISSION
    ]
    return calls, asked


async def test_a_scripted_read_and_write_name_their_absolute_paths(tmp_path: Path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("x = 1\n")
    steps = [
        {"tool": "Read app", "kind": "read", "read_file": "src/app.py"},
        {"tool": "Write notes", "kind": "edit", "ask": True, "write_file": {"path": "notes.md", "content": "hi\n"}},
        {"tool": "Think", "kind": "think", "result": "no file"},
    ]
    agent = AcpAgent(ScriptedAdapter.from_data({"scenarios": [{"match": "", "steps": steps}]}))
    async with running(agent) as editor:
        calls, asked = await located_calls(editor, tmp_path)
    notes = [{"path": str(tmp_path / "notes.md")}]
    assert calls == {"Read app": [{"path": str(tmp_path / "src" / "app.py")}], "Write notes": notes, "Think": None}
    assert asked == [notes]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    pytest.importorskip("httpx", reason="the openai extra is not installed")
    with FakeOpenAI(models=["gpt-4o"]) as server:
        yield server


async def test_openai_reads_writes_and_edits_name_their_absolute_paths_and_a_reads_first_line(fake, tmp_path):
    from adapters.openai import OpenAIAdapter

    (tmp_path / "app.py").write_text("a\nb\nc\nd\n")
    tools = [
        ("read_file", {"path": "app.py", "start_line": 3}),
        ("read_file", {"path": "./app.py"}),
        ("edit_file", {"path": "app.py", "old_string": "b", "new_string": "B"}),
        ("write_file", {"path": "new.md", "content": "hi\n"}),
    ]
    fake.script(reply(tools=tools), reply("done"))
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    adapter = OpenAIAdapter(env=env, model="gpt-4o", base_url=fake.base_url, api_key="sk-test-0123456789")
    try:
        async with running(AcpAgent(adapter)) as editor:
            calls, asked = await located_calls(editor, tmp_path)
    finally:
        adapter.close()
    app, new = str(tmp_path / "app.py"), str(tmp_path / "new.md")
    assert calls == {
        "Read app.py (lines 3-end)": [{"path": app, "line": 3}],
        "Read app.py": [{"path": app}],  # named where it is, as the editor is asked
        "Edit app.py": [{"path": app}],
        "Write new.md": [{"path": new}],
    }
    assert asked == [[{"path": app}], [{"path": new}]]
