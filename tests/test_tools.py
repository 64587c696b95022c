"""Files and commands: through the editor when it offers them, locally inside cwd otherwise."""

from __future__ import annotations

import io
import os

import anyio
import pytest
from harness import running

from acp_server.acp.handlers import AcpAgent
from acp_server.turns.files import replace_text
from adapters.excerpt import read_lines
from adapters.scripted import ScriptedAdapter

FS = {"fs": {"readTextFile": True, "writeTextFile": True}}


def scripted(*steps: dict) -> AcpAgent:
    return AcpAgent(ScriptedAdapter.from_data({"scenarios": [{"match": "", "steps": list(steps)}]}))


def tool_updates(editor, sid):
    return [u for u in editor.updates[sid] if u["sessionUpdate"] == "tool_call_update"]


async def test_reads_and_writes_go_through_the_editor_when_it_offers_them(tmp_path):
    (tmp_path / "notes.txt").write_text("old text")
    agent = scripted(
        {"tool": "Read", "kind": "read", "read_file": "notes.txt"},
        {"tool": "Edit", "kind": "edit", "write_file": {"path": "notes.txt", "content": "new text"}},
    )
    async with running(agent) as editor:
        await editor.initialize(FS)
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "go")
        methods = [r["method"] for r in editor.server_requests]
        # read_file's read; the edit's read for the diff shown first (once: the write reads nothing)
        assert methods == ["fs/read_text_file", "fs/read_text_file", "fs/write_text_file"]
        assert {r["params"]["path"] for r in editor.server_requests} == {str(tmp_path / "notes.txt")}
        assert editor.files_written == [(str(tmp_path / "notes.txt"), "new text")]
        read_done, edit_done = [u for u in tool_updates(editor, sid) if u.get("status") == "completed"]
        assert read_done["content"] == [{"type": "content", "content": {"type": "text", "text": "old text"}}]
        assert edit_done["content"] == [
            {"type": "diff", "path": str(tmp_path / "notes.txt"), "oldText": "old text", "newText": "new text"}
        ]


async def test_without_editor_fs_files_are_read_and_written_locally_in_cwd(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("print(1)\n")
    agent = scripted(
        {"tool": "Read", "kind": "read", "read_file": "src/a.py"},
        {"tool": "Create", "kind": "edit", "write_file": {"path": "src/b.py", "content": "x = 2\n"}},
    )
    async with running(agent) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "go")
        assert editor.server_requests == []
        assert (tmp_path / "src" / "b.py").read_text() == "x = 2\n"
        read_done, create_done = [u for u in tool_updates(editor, sid) if u.get("status") == "completed"]
        assert read_done["content"][0]["content"]["text"] == "print(1)\n"
        assert create_done["content"] == [
            {"type": "diff", "path": str(tmp_path / "src" / "b.py"), "oldText": None, "newText": "x = 2\n"}
        ]


@pytest.mark.parametrize("path", ["../secret.txt", "link/secret.txt", "ABSOLUTE"])
async def test_local_file_access_outside_cwd_is_refused(tmp_path, path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    work = tmp_path / "work"
    work.mkdir()
    os.symlink(outside, work / "link")
    path = str(outside / "secret.txt") if path == "ABSOLUTE" else path
    agent = scripted(
        {"tool": "Read", "kind": "read", "read_file": path},
        {"tool": "Write", "kind": "edit", "write_file": {"path": path, "content": "pwned"}},
        {"say": "done"},
    )
    async with running(agent) as editor:
        await editor.initialize()
        sid = await editor.new_session(work)
        assert await editor.prompt(sid, "go") == {"stopReason": "end_turn"}
        failed = [u for u in tool_updates(editor, sid) if u.get("status") == "failed"]
        assert len(failed) == 2
        for update in failed:
            assert "outside the session's workspace" in update["content"][0]["content"]["text"]
        assert (outside / "secret.txt").read_text() == "top secret"
        assert "top secret" not in str(editor.frames)
        assert editor.text(sid) == "done"


async def test_a_missing_local_file_fails_the_tool_with_a_clear_message(tmp_path):
    async with running(scripted({"tool": "Read", "kind": "read", "read_file": "nope.txt"})) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "go")
        (failed,) = [u for u in tool_updates(editor, sid) if u.get("status") == "failed"]
        assert failed["content"][0]["content"]["text"] == f"No such file: {tmp_path / 'nope.txt'}"


async def test_an_editor_error_on_read_fails_the_tool_and_the_turn_goes_on(tmp_path):
    agent = scripted({"tool": "Read", "kind": "read", "read_file": "missing.txt"}, {"say": "next"})
    async with running(agent) as editor:
        await editor.initialize(FS)
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "go") == {"stopReason": "end_turn"}
        (failed,) = [u for u in tool_updates(editor, sid) if u.get("status") == "failed"]
        assert "fs/read_text_file" in failed["content"][0]["content"]["text"]
        assert editor.text(sid) == "next"


async def test_commands_run_locally_in_the_session_cwd(tmp_path):
    async with running(scripted({"tool": "Where", "kind": "execute", "run": "pwd; exit 3"})) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "go")
        final = tool_updates(editor, sid)[-1]
        assert final["status"] == "failed"
        assert final["rawOutput"] == {"exitCode": 3}
        assert final["content"][0]["content"]["text"].strip() == str(await anyio.Path(tmp_path).resolve())


async def test_commands_run_in_the_editor_terminal_when_it_offers_one(tmp_path):
    async with running(scripted({"tool": "Say", "kind": "execute", "run": "echo from-terminal"})) as editor:
        editor.enable_terminal()
        await editor.initialize({"terminal": True})
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "go")
        assert editor.terminal_calls == ["create", "wait_for_exit", "output", "release"]
        create = editor.server_requests[0]["params"]
        assert create["command"] == "/bin/sh" and create["args"] == ["-c", "echo from-terminal"]
        assert create["cwd"] == str(tmp_path)
        (terminal_id,) = editor.terminals
        embedded, final = [u for u in tool_updates(editor, sid) if "content" in u]
        assert embedded["content"] == [{"type": "terminal", "terminalId": terminal_id}]
        assert final["status"] == "completed"
        assert final["content"][1] == {"type": "content", "content": {"type": "text", "text": "from-terminal\n"}}


async def test_cancel_kills_and_releases_the_editor_terminal(tmp_path):
    async with running(scripted({"say": "running"}, {"tool": "Long", "kind": "execute", "run": "sleep 30"})) as editor:
        editor.enable_terminal()
        await editor.initialize({"terminal": True})
        sid = await editor.new_session(tmp_path)
        task = await editor.start_prompt(sid, "go")
        await editor.wait_for(lambda: "wait_for_exit" in editor.terminal_calls)
        await editor.notify("session/cancel", {"sessionId": sid})
        assert (await task)["result"] == {"stopReason": "cancelled"}
        await editor.wait_for(lambda: "release" in editor.terminal_calls)
        assert editor.terminal_calls[-2:] == ["kill", "release"]
        for process in editor.terminals.values():
            await anyio.to_thread.run_sync(process.wait, 5)  # raises TimeoutExpired if it was not killed


@pytest.mark.parametrize(
    ("line", "limit", "expected"),
    [
        (None, None, "a\nb\nc"),
        (2, None, "b\nc"),
        (None, 2, "a\nb\n"),
        (2, 1, "b\n"),
        (3, 5, "c"),
        (9, None, ""),
        (2, 0, ""),
        (0, 1, "a\n"),
    ],
)
def test_line_and_limit_pick_lines_as_fs_read_text_file_defines_them(line, limit, expected):
    assert read_lines(io.BytesIO(b"a\nb\nc"), line=line, limit=limit, name="f") == expected


def test_replacing_a_file_writes_through_a_symlink_and_keeps_the_mode(tmp_path):
    target = tmp_path / "script.sh"
    target.write_text("old")
    target.chmod(0o750)
    (tmp_path / "link.sh").symlink_to(target)
    replace_text(str(tmp_path / "link.sh"), "new")
    assert (tmp_path / "link.sh").is_symlink()
    assert target.read_text() == "new" and target.stat().st_mode & 0o777 == 0o750
    replace_text(str(tmp_path / "new" / "dir" / "file.txt"), "created")
    assert (tmp_path / "new" / "dir" / "file.txt").read_text() == "created"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.sh", "new", "script.sh"]  # no temporary left
