"""`--agent acp`: an ACP agent below acp-server (here acp-server itself, playing scenarios),
driven by the fake editor through the real server stack. What the agent reports reaches the
editor as our own updates; what it asks goes through our policy, then the editor."""

from __future__ import annotations

import threading

import anyio
import pytest
from acp_child import Runtimes, child_argv
from harness import running

from acp_server.acp.handlers import AcpAgent
from acp_server.protocol import methods
from adapters.events import TextDelta
from adapters.testing import RecordingSink

FS = {"fs": {"readTextFile": True, "writeTextFile": True}}
SCENARIOS = [
    {"match": "hello", "steps": [{"think": "greeting"}, {"say": "Hello "}, {"say": "from below."}]},
    {
        "match": "edit",
        "steps": [
            {
                "tool": "Write notes.txt",
                "kind": "edit",
                "input": {"path": "notes.txt"},
                "ask": True,
                "write_file": {"path": "notes.txt", "content": "new text\n"},
            },
            {"say": "done"},
        ],
    },
    {"match": "read", "steps": [{"tool": "Read notes.txt", "kind": "read", "read_file": "notes.txt"}]},
    {"match": "slow", "steps": [{"say": "working"}, {"sleep": 60}]},
    {"match": "fail", "steps": [{"say": "trying"}, {"error": "the model is down"}]},
    {"match": "plan", "steps": [{"plan": [{"content": "Look", "status": "in_progress"}]}, {"title": "Planned"}]},
]


@pytest.fixture
def runtimes():
    made = Runtimes()
    yield made
    made.close()


@pytest.fixture
async def agent(tmp_path, runtimes):
    return AcpAgent(runtimes.make(child_argv(tmp_path, SCENARIOS)))


def tool_updates(editor, sid):
    return [u for u in editor.updates[sid] if u["sessionUpdate"] in ("tool_call", "tool_call_update")]


async def test_a_prompt_streams_the_agents_text_and_thoughts_to_the_editor(agent, tmp_path):
    async with running(agent) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        result = await editor.prompt(sid, "hello")
        assert result["stopReason"] == "end_turn"
        assert editor.text(sid) == "Hello from below."
        assert editor.text(sid, "agent_thought_chunk") == "greeting"


async def test_plans_and_titles_of_the_agent_reach_the_editor(agent, tmp_path):
    async with running(agent) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "plan")
        plans = [u for u in editor.updates[sid] if u["sessionUpdate"] == "plan"]
        assert plans == [
            {"sessionUpdate": "plan", "entries": [{"content": "Look", "status": "in_progress", "priority": "medium"}]}
        ]
        titles = [u["title"] for u in editor.updates[sid] if u["sessionUpdate"] == "session_info_update"]
        assert titles == ["Planned"]


async def test_a_tool_call_shows_its_diff_and_the_question_names_the_visible_call(agent, tmp_path):
    (tmp_path / "notes.txt").write_text("old text\n")
    asked = []

    async def allow(params):
        asked.append(params)
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    async with running(agent) as editor:
        editor.handlers[methods.REQUEST_PERMISSION] = allow
        await editor.initialize(FS)
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "edit")
        started = next(u for u in tool_updates(editor, sid) if u["sessionUpdate"] == "tool_call")
        assert started["title"] == "Write notes.txt" and started["kind"] == "edit"
        (question,) = asked
        assert question["toolCall"]["toolCallId"] == started["toolCallId"]
        assert [o["optionId"] for o in question["options"]] == [
            "allow_once",
            "allow_always",
            "reject_once",
            "reject_always",
        ]
        diff = {"type": "diff", "path": str(tmp_path / "notes.txt"), "oldText": "old text\n", "newText": "new text\n"}
        assert question["toolCall"]["content"] == [diff]
        done = [u for u in tool_updates(editor, sid) if u.get("status") == "completed"]
        assert [u["content"] for u in done] == [[diff]]
        assert editor.files_written == [(str(tmp_path / "notes.txt"), "new text\n")]
        assert editor.text(sid) == "done"


async def test_a_rejected_question_stops_the_agents_tool_and_the_turn_goes_on(agent, tmp_path):
    async def reject(params):
        return {"outcome": {"outcome": "selected", "optionId": "reject_once"}}

    async with running(agent) as editor:
        editor.handlers[methods.REQUEST_PERMISSION] = reject
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        result = await editor.prompt(sid, "edit")
        assert result["stopReason"] == "end_turn"
        assert [u.get("status") for u in tool_updates(editor, sid)][-1] == "failed"
        assert not (tmp_path / "notes.txt").exists()
        assert editor.text(sid) == "done"


async def test_our_policy_decides_before_the_editor_is_asked(agent, tmp_path):
    async with running(agent) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.request(methods.SESSION_SET_MODE, {"sessionId": sid, "modeId": "read-only"})
        await editor.prompt(sid, "edit")
        assert [r["method"] for r in editor.server_requests] == []
        assert not (tmp_path / "notes.txt").exists()
        failed = [u for u in tool_updates(editor, sid) if u.get("status") == "failed"]
        assert failed, "the refused edit should end failed"


async def test_an_always_answer_is_ours_the_agent_is_told_once(agent, tmp_path):
    answers = []

    async def always(params):
        answers.append(params["toolCall"]["toolCallId"])
        return {"outcome": {"outcome": "selected", "optionId": "allow_always"}}

    async with running(agent) as editor:
        editor.handlers[methods.REQUEST_PERMISSION] = always
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "edit")
        await editor.prompt(sid, "edit")
        assert len(answers) == 1, "the second edit is allowed by our remembered answer, unasked"
        assert (tmp_path / "notes.txt").read_text() == "new text\n"


async def test_files_the_agent_reads_come_from_the_editor_when_it_offers_them(agent, tmp_path):
    (tmp_path / "notes.txt").write_text("on disk\n")

    async def buffer(params):
        return {"content": "unsaved buffer\n"}

    async with running(agent) as editor:
        editor.handlers[methods.FS_READ_TEXT_FILE] = buffer
        await editor.initialize(FS)
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "read")
        completed = [u for u in tool_updates(editor, sid) if u.get("status") == "completed"]
        assert completed[0]["content"] == [{"type": "content", "content": {"type": "text", "text": "unsaved buffer\n"}}]
        assert [r["params"]["path"] for r in editor.server_requests] == [str(tmp_path / "notes.txt")]


async def test_without_editor_files_the_agent_reads_come_from_the_local_disk(agent, tmp_path):
    (tmp_path / "notes.txt").write_text("on disk\n")
    async with running(agent) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "read")
        completed = [u for u in tool_updates(editor, sid) if u.get("status") == "completed"]
        assert completed[0]["content"] == [{"type": "content", "content": {"type": "text", "text": "on disk\n"}}]
        assert editor.server_requests == []


async def test_the_agent_cannot_reach_a_file_outside_the_session(tmp_path, runtimes):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    work = tmp_path / "work"
    work.mkdir()
    scenario = {"match": "peek", "steps": [{"tool": "Read", "kind": "read", "read_file": str(outside)}]}
    agent = AcpAgent(runtimes.make(child_argv(tmp_path, [scenario])))
    async with running(agent) as editor:
        await editor.initialize()
        sid = await editor.new_session(work)
        await editor.prompt(sid, "peek")
        failed = [u for u in tool_updates(editor, sid) if u.get("status") == "failed"]
        assert failed and "secret" not in str(failed)


async def test_cancel_answers_cancelled_and_the_next_prompt_runs(agent, tmp_path):
    async with running(agent) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        turn = await editor.start_prompt(sid, "slow")
        await editor.wait_for(lambda: "working" in editor.text(sid))
        await editor.notify(methods.SESSION_CANCEL, {"sessionId": sid})
        with anyio.fail_after(5):
            assert (await turn)["result"] == {"stopReason": "cancelled"}
        assert (await editor.prompt(sid, "hello"))["stopReason"] == "end_turn"
        assert editor.text(sid).endswith("Hello from below.")


async def test_an_agent_error_fails_the_prompt_with_its_message(agent, tmp_path):
    async with running(agent) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        response = await editor.request_raw(
            methods.SESSION_PROMPT, {"sessionId": sid, "prompt": [{"type": "text", "text": "fail"}]}
        )
        assert response["error"]["message"] == "the model is down"
        assert editor.text(sid) == "trying"


class LaggingSink(RecordingSink):
    """A sink whose editor side lags until `caught_up()`; each look at its backlog is signalled."""

    def __init__(self) -> None:
        super().__init__()
        self.backlog = 1
        self.looked = threading.Event()

    @property
    def pending(self) -> int:
        self.looked.set()
        return self.backlog

    def caught_up(self) -> None:
        self.backlog = 0


async def test_streamed_text_waits_only_while_the_editors_side_lags_then_goes_in_order():
    from acp_server.downstream.link import Answered, Inbox, Update
    from acp_server.downstream.runtime import _serve  # pyright: ignore[reportPrivateUsage]

    def chunk(text: str) -> Update:
        return Update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})

    async def looked_again() -> None:
        for _ in range(2):  # the second look follows a take that began after the first
            sink.looked.clear()
            await anyio.to_thread.run_sync(sink.looked.wait, abandon_on_cancel=True)

    inbox, sink = Inbox(), LaggingSink()
    reasons: list[str] = []

    async def serve() -> None:
        reasons.append(await anyio.to_thread.run_sync(_serve, inbox, sink, abandon_on_cancel=True))

    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(serve)
                inbox.put_nowait(chunk("Hello "))
                await looked_again()
                inbox.put_nowait(chunk("world"))
                await looked_again()
                assert sink.events == ()  # the sink still lags: the text waits
                sink.caught_up()
                # Nothing else comes: the text goes by itself.
                await anyio.to_thread.run_sync(sink.activity.wait, abandon_on_cancel=True)
                inbox.put_nowait(Answered({"stopReason": "end_turn"}))
    finally:  # nothing is left waiting: the worker, or a thread of ours
        inbox.cancel()
        sink.looked.set()
        sink.activity.set()
    assert reasons == ["end_turn"]
    assert [e.event for e in sink.events] == [TextDelta("Hello "), TextDelta("world")]
