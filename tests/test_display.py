"""How `session/update` payloads look on a terminal (`acp-server prompt` and `show`), including
payloads that are not what the schema says: they are shown as far as they make sense, never
crash the command."""

from __future__ import annotations

import io

from acp_server.cli.display import Display


def shown(*updates: object) -> str:
    out = io.StringIO()
    display = Display(out, raw=False, color=False)
    for update in updates:
        display.show({"sessionId": "s", "update": update})
    display.finish()
    return out.getvalue()


def test_a_plan_marks_completed_and_running_entries():
    assert (
        shown(
            {
                "sessionUpdate": "plan",
                "entries": [
                    {"content": "read", "status": "completed"},
                    {"content": "edit", "status": "in_progress"},
                    {"content": "test", "status": "pending"},
                ],
            }
        )
        == "[plan]\n  [x] read\n  [~] edit\n  [ ] test\n"
    )


def test_a_plan_entry_whose_status_is_not_a_string_is_shown_unmarked_instead_of_crashing():
    assert (
        shown(
            {
                "sessionUpdate": "plan",
                "entries": [
                    {"content": "odd", "status": ["completed"]},
                    "not an entry",
                    {"content": "odder", "status": {}},
                ],
            }
        )
        == "[plan]\n  [ ] odd\n  [ ] odder\n"
    )


def test_streamed_text_thoughts_and_tool_calls_each_start_where_they_should():
    assert shown(
        {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}},
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hel"}},
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "lo"}},
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "title": "Read",
            "kind": "read",
            "status": "pending",
            "content": [{"type": "content", "content": {"type": "text", "text": "line"}}, 7],
        },
        {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"},
        {"sessionUpdate": "usage_update", "used": 50, "size": 200, "cost": {"amount": 0.1, "currency": "USD"}},
        {"sessionUpdate": "something_newer", "x": 1},
        "not an update",
    ) == (
        "(thinking) hmm\nHello\n[tool] Read (read) pending\n    line\n[tool] Read -> completed\n"
        "[usage] 50/200 tokens (25.0%), cost 0.1 USD\n"
    )


def test_a_writes_diff_is_shown_once_though_the_question_and_the_completed_update_both_carry_it():
    diff = {"type": "diff", "path": "/w/a.txt", "oldText": None, "newText": "hello\n"}
    other = {"type": "diff", "path": "/w/a.txt", "oldText": "hello\n", "newText": "bye\n"}
    text = shown(
        {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Write a.txt", "kind": "edit", "status": "pending"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "content": [diff]},
        {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "in_progress"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed", "content": [diff]},
        {"sessionUpdate": "tool_call_update", "toolCallId": "t2", "title": "Write again", "content": [diff, other]},
    )
    assert text == (
        "[tool] Write a.txt (edit) pending\n"
        "[tool] Write a.txt\n    --- /dev/null\n    +++ /w/a.txt\n    @@ -0,0 +1 @@\n    +hello\n"
        "[tool] Write a.txt -> in_progress\n"
        "[tool] Write a.txt -> completed\n"
        "[tool] Write again\n    --- /dev/null\n    +++ /w/a.txt\n    @@ -0,0 +1 @@\n    +hello\n"
        "    --- /w/a.txt\n    +++ /w/a.txt\n    @@ -1 +1 @@\n    -hello\n    +bye\n"
    )
