"""The example agent of docs/agents/your-own.md, through the real server: in memory with a fake editor, and once
as `python -m acp_server --agent examples.my_agent:make_agent` over stdio from the repo root."""

from __future__ import annotations

from pathlib import Path

from harness import running
from stdio_server import StdioServer

from acp_server.acp.handlers import AcpAgent
from examples.my_agent import make_agent

REPO = Path(__file__).resolve().parent.parent
FS = {"fs": {"readTextFile": True, "writeTextFile": True}}


def tool_statuses(updates: list[dict]) -> list[str]:
    return [u["status"] for u in updates if u["sessionUpdate"] == "tool_call_update" and "status" in u]


async def test_the_example_streams_its_reply_and_writes_the_file_once_allowed(tmp_path: Path):
    async with running(AcpAgent(make_agent())) as editor:
        await editor.initialize(FS)
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "hello there") == {"stopReason": "end_turn"}
        assert editor.text(sid) == "You said: hello there "
        (request,) = [r for r in editor.server_requests if r["method"] == "session/request_permission"]
        assert request["params"]["toolCall"]["title"] == "Save the prompt in hello.txt"
        assert editor.files_written == [(str(tmp_path / "hello.txt"), "hello there\n")]
        assert tool_statuses(editor.updates[sid])[-1] == "completed"


async def test_the_example_writes_nothing_when_the_permission_is_rejected(tmp_path: Path):
    async def reject(params: dict) -> dict:
        return {"outcome": {"outcome": "selected", "optionId": "reject_once"}}

    async with running(AcpAgent(make_agent())) as editor:
        editor.handlers["session/request_permission"] = reject
        await editor.initialize(FS)
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "hello") == {"stopReason": "end_turn"}
        assert editor.files_written == []
        assert tool_statuses(editor.updates[sid])[-1] == "failed"
        assert not (tmp_path / "hello.txt").exists()


def test_the_example_serves_over_stdio_from_the_repository_root(tmp_path: Path):
    server = StdioServer("--agent", "examples.my_agent:make_agent", cwd=str(REPO))
    try:
        sid = server.start_session(str(tmp_path))
        result = server.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
        assert result == {"stopReason": "end_turn"}
        updates = [f["params"]["update"] for f in server.frames if f.get("method") == "session/update"]
        chunks = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
        assert "".join(chunks) == "You said: hi "
        assert [f["method"] for f in server.frames if "id" in f and "method" in f] == ["session/request_permission"]
        assert tool_statuses(updates)[-1] == "completed"
        assert (tmp_path / "hello.txt").read_text() == "hi\n"
        server.close_stdin()
        assert server.wait() == 0
    finally:
        server.kill()
