"""Every built-in agent's permission question for an edit carries the diff, through the real stack.

The fake editor records the `session/request_permission` frames the server sends; their
`toolCall.content` must hold the `diff` (old text from the editor's buffer when it serves
`fs/read_text_file`, else from disk, `null` for a new file) so a user never approves a write
blind. The scripted agent plays a scenario; the openai agent talks to a fake model on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, reply
from harness import FakeEditor, running

from acp_server.acp.handlers import AcpAgent
from acp_server.protocol import methods
from adapters.scripted import ScriptedAdapter

FS = {"fs": {"readTextFile": True, "writeTextFile": True}}
DISK = "x = 1\ny = 2\n"
BUFFER = "x = 1\ny = 2  # unsaved edit in the editor\n"
NEW = "x = 1\ny = 3\n"

MakeAgent = Callable[[str, dict[str, Any]], AcpAgent]


def scripted_write(path: str, content: str) -> AcpAgent:
    step = {"tool": f"Write {path}", "kind": "edit", "ask": True, "write_file": {"path": path, "content": content}}
    return AcpAgent(ScriptedAdapter.from_data({"scenarios": [{"match": "", "steps": [step]}]}))


@pytest.fixture
def openai_agent(tmp_path: Path) -> Iterator[Callable[[list[tuple[str, dict[str, Any]]]], AcpAgent]]:
    """Servers whose openai agent calls the given tools once, then says "done"."""
    pytest.importorskip("httpx", reason="the openai extra is not installed")
    from adapters.openai import OpenAIAdapter

    with FakeOpenAI(models=["gpt-4o"]) as fake:
        made: list[OpenAIAdapter] = []

        def make(tools: list[tuple[str, dict[str, Any]]]) -> AcpAgent:
            fake.script(reply(tools=tools), reply("done"))
            env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
            made.append(OpenAIAdapter(env=env, model="gpt-4o", base_url=fake.base_url, api_key="sk-test-0123456789"))
            return AcpAgent(made[-1])

        yield make
        for adapter in made:
            adapter.close()


def serve_buffer(editor: FakeEditor, path: Path, text: str) -> None:
    """The editor holds `text` for `path` in an unsaved buffer; other files come from disk."""
    from_disk = editor.handlers[methods.FS_READ_TEXT_FILE]

    async def read(params: dict[str, Any]) -> dict[str, Any]:
        return {"content": text} if params["path"] == str(path) else await from_disk(params)

    editor.handlers[methods.FS_READ_TEXT_FILE] = read


async def permission_content(editor: FakeEditor, tmp_path: Path, capabilities: dict[str, Any]) -> list[Any]:
    """Run one prompt; the content of the single permission question's tool call."""
    await editor.initialize(capabilities)
    sid = await editor.new_session(tmp_path)
    assert await editor.prompt(sid, "change it") == {"stopReason": "end_turn"}
    (asked,) = [r for r in editor.server_requests if r["method"] == methods.REQUEST_PERMISSION]
    return asked["params"]["toolCall"].get("content", [])


def diff(path: Path, old: str | None, new: str) -> dict[str, Any]:
    return {"type": "diff", "path": str(path), "oldText": old, "newText": new}


# --- scripted -----------------------------------------------------------------------------


async def test_a_scripted_write_asks_with_the_diff_against_the_editors_buffer(tmp_path: Path):
    target = tmp_path / "app.py"
    target.write_text(DISK)
    async with running(scripted_write("app.py", NEW)) as editor:
        serve_buffer(editor, target, BUFFER)
        assert await permission_content(editor, tmp_path, FS) == [diff(target, BUFFER, NEW)]
        assert editor.files_written == [(str(target), NEW)]


async def test_a_scripted_write_asks_with_the_diff_against_the_disk_without_editor_fs(tmp_path: Path):
    target = tmp_path / "app.py"
    target.write_text(DISK)
    async with running(scripted_write("app.py", NEW)) as editor:
        assert await permission_content(editor, tmp_path, {}) == [diff(target, DISK, NEW)]
    assert target.read_text() == NEW


@pytest.mark.parametrize("capabilities", [FS, {}], ids=["editor fs", "local disk"])
async def test_a_scripted_new_file_asks_with_null_old_text(tmp_path: Path, capabilities: dict[str, Any]):
    (tmp_path / "sub").mkdir()
    async with running(scripted_write("sub/new.md", "# Title\n")) as editor:
        content = await permission_content(editor, tmp_path, capabilities)
        assert content == [diff(tmp_path / "sub" / "new.md", None, "# Title\n")]
    assert (tmp_path / "sub" / "new.md").read_text() == "# Title\n"


async def test_a_rejected_scripted_write_still_shows_what_it_would_have_done(tmp_path: Path):
    target = tmp_path / "app.py"
    target.write_text(DISK)
    async with running(scripted_write("app.py", NEW)) as editor:

        async def reject(params: dict[str, Any]) -> dict[str, Any]:
            return {"outcome": {"outcome": "selected", "optionId": "reject_once"}}

        editor.handlers[methods.REQUEST_PERMISSION] = reject
        assert await permission_content(editor, tmp_path, {}) == [diff(target, DISK, NEW)]
    assert target.read_text() == DISK


# --- openai -------------------------------------------------------------------------------


async def test_an_openai_write_asks_with_the_diff_against_the_editors_buffer(tmp_path: Path, openai_agent):
    target = tmp_path / "app.py"
    target.write_text(DISK)
    async with running(openai_agent([("write_file", {"path": "app.py", "content": NEW})])) as editor:
        serve_buffer(editor, target, BUFFER)
        assert await permission_content(editor, tmp_path, FS) == [diff(target, BUFFER, NEW)]
        assert editor.files_written == [(str(target), NEW)]


async def test_an_openai_edit_asks_with_the_diff_against_the_editors_buffer(tmp_path: Path, openai_agent):
    target = tmp_path / "app.py"
    target.write_text(DISK)
    edit = {"path": "app.py", "old_string": "y = 2", "new_string": "y = 3"}
    async with running(openai_agent([("edit_file", edit)])) as editor:
        serve_buffer(editor, target, BUFFER)
        edited = BUFFER.replace("y = 2", "y = 3")
        assert await permission_content(editor, tmp_path, FS) == [diff(target, BUFFER, edited)]
        assert editor.files_written == [(str(target), edited)]


@pytest.mark.parametrize(
    "tool",
    [
        ("write_file", {"path": "app.py", "content": NEW}),
        ("edit_file", {"path": "app.py", "old_string": "2", "new_string": "3"}),
    ],
    ids=["write_file", "edit_file"],
)
async def test_an_openai_change_asks_with_the_diff_against_the_disk_without_editor_fs(
    tmp_path: Path, openai_agent, tool: tuple[str, dict[str, Any]]
):
    target = tmp_path / "app.py"
    target.write_text(DISK)
    async with running(openai_agent([tool])) as editor:
        assert await permission_content(editor, tmp_path, {}) == [diff(target, DISK, NEW)]
    assert target.read_text() == NEW


@pytest.mark.parametrize("capabilities", [FS, {}], ids=["editor fs", "local disk"])
async def test_an_openai_new_file_asks_with_null_old_text(tmp_path: Path, openai_agent, capabilities: dict[str, Any]):
    async with running(openai_agent([("write_file", {"path": "new.md", "content": "# Title\n"})])) as editor:
        content = await permission_content(editor, tmp_path, capabilities)
        assert content == [diff(tmp_path / "new.md", None, "# Title\n")]
    assert (tmp_path / "new.md").read_text() == "# Title\n"


# --- one read per write, and only inside the workspace ----------------------------------------


def reads(editor: FakeEditor) -> list[str]:
    return [r["params"]["path"] for r in editor.server_requests if r["method"] == methods.FS_READ_TEXT_FILE]


async def test_a_scripted_write_reads_its_target_from_the_editor_once(tmp_path: Path):
    target = tmp_path / "app.py"
    target.write_text(DISK)
    async with running(scripted_write("app.py", NEW)) as editor:
        serve_buffer(editor, target, BUFFER)
        await permission_content(editor, tmp_path, FS)
        assert reads(editor) == [str(target)]
        assert editor.files_written == [(str(target), NEW)]
        (sid,) = editor.updates
        completed = [u for u in editor.updates[sid] if u.get("status") == "completed"]
        assert completed[-1]["content"] == [diff(target, BUFFER, NEW)]  # the diff the user approved


@pytest.mark.parametrize(
    "tool",
    [
        ("write_file", {"path": "app.py", "content": NEW}),
        ("edit_file", {"path": "app.py", "old_string": "y = 2", "new_string": "y = 3"}),
    ],
    ids=["write_file", "edit_file"],
)
async def test_an_openai_change_reads_its_target_from_the_editor_once(
    tmp_path: Path, openai_agent, tool: tuple[str, dict[str, Any]]
):
    target = tmp_path / "app.py"
    target.write_text(DISK)
    async with running(openai_agent([tool])) as editor:
        await permission_content(editor, tmp_path, FS)
        assert reads(editor) == [str(target)]


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/hostname", "link/secret.txt"])
async def test_the_editor_is_never_asked_for_a_file_outside_the_workspace(tmp_path: Path, path: str):
    workspace, outside = tmp_path / "work", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("aws_secret_access_key = abc\n")
    (workspace / "link").symlink_to(outside)
    steps = [
        {"tool": f"Read {path}", "kind": "read", "read_file": path},
        {"tool": f"Write {path}", "kind": "edit", "write_file": {"path": path, "content": "pwned\n"}},
    ]
    agent = AcpAgent(ScriptedAdapter.from_data({"scenarios": [{"match": "", "steps": steps}]}))
    async with running(agent) as editor:
        await editor.initialize(FS)
        sid = await editor.new_session(workspace)
        assert await editor.prompt(sid, "go") == {"stopReason": "end_turn"}
        assert reads(editor) == [] and editor.files_written == []
        failed = [u for u in editor.updates[sid] if u.get("status") == "failed"]
        assert len(failed) == 2
        assert all("outside the session's workspace" in str(u["content"]) for u in failed)
