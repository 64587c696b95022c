"""Control over ACP: permission answers and the mode, config options, slash commands,
clarifying questions, timeouts and usage, through the real server stack."""

from __future__ import annotations

import json

import pytest
from harness import RemoteError, running

from acp_server.acp.handlers import AcpAgent, AgentOptions
from acp_server.rpc.errors import INVALID_PARAMS
from adapters.base import AdapterCapabilities, ConfigChoice, ConfigOption, SlashCommand, ToolRefused
from adapters.scripted import ScriptedAdapter
from journal.store import Journal

RISKY = {"tool": "Deploy", "kind": "execute", "input": {"command": "make deploy"}, "ask": True, "result": "ok"}


def scripted(*steps, **options) -> AcpAgent:
    return AcpAgent(
        ScriptedAdapter.from_data({"scenarios": [{"match": "", "steps": list(steps)}]}), AgentOptions(**options)
    )


def answering(option_id: str):
    async def answer(params):
        return {"outcome": {"outcome": "selected", "optionId": option_id}}

    return answer


def statuses(editor, sid):
    return [u["status"] for u in editor.updates[sid] if u["sessionUpdate"] == "tool_call_update" and "status" in u]


def asked(editor, method="session/request_permission"):
    return [r for r in editor.server_requests if r["method"] == method]


@pytest.mark.parametrize(
    ("option", "second_time_asks", "final"),
    [
        ("allow_once", True, "completed"),
        ("allow_always", False, "completed"),
        ("reject_once", True, "failed"),
        ("reject_always", False, "failed"),
    ],
)
async def test_each_permission_answer_means_what_it_says(tmp_path, option, second_time_asks, final):
    async with running(scripted(RISKY)) as editor:
        editor.handlers["session/request_permission"] = answering(option)
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "one")
        await editor.prompt(sid, "two")
        assert len(asked(editor)) == (2 if second_time_asks else 1)
        assert statuses(editor, sid)[-1] == final


async def test_an_always_answer_for_one_program_does_not_cover_another(tmp_path):
    agent = AcpAgent(
        ScriptedAdapter.from_data(
            {
                "scenarios": [
                    {
                        "match": "git",
                        "steps": [{"tool": "git", "kind": "execute", "input": {"command": "git status"}, "ask": True}],
                    },
                    {
                        "match": "rm",
                        "steps": [{"tool": "rm", "kind": "execute", "input": {"command": "rm -rf build"}, "ask": True}],
                    },
                ]
            }
        )
    )
    async with running(agent) as editor:
        editor.handlers["session/request_permission"] = answering("allow_always")
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        for text in ("git", "git", "rm"):
            await editor.prompt(sid, text)
        assert [r["params"]["toolCall"]["title"] for r in asked(editor)] == ["git", "rm"]


async def test_always_answers_are_listed_and_revoked_with_the_permissions_command(tmp_path):
    async with running(scripted(RISKY)) as editor:
        editor.handlers["session/request_permission"] = answering("allow_always")
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "deploy")
        await editor.prompt(sid, "/permissions")
        assert "1. always allow `command:make deploy`" in editor.text(sid)
        await editor.prompt(sid, "/permissions revoke 1")
        assert "Revoked: always allow `command:make deploy`" in editor.text(sid)
        await editor.prompt(sid, "deploy")
        assert len(asked(editor)) == 2


async def test_a_permission_without_an_answer_in_time_is_denied_withdrawn_and_the_turn_goes_on(tmp_path):
    async with running(scripted(RISKY, {"say": "carried on"}, permission_timeout=0.2)) as editor:
        editor.never_answer("session/request_permission")
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "deploy") == {"stopReason": "end_turn"}
        failed = [u for u in editor.updates[sid] if u.get("status") == "failed"]
        assert "No answer to the permission request within 0.2 s" in failed[0]["content"][0]["content"]["text"]
        assert editor.text(sid) == "carried on"
        (request,) = asked(editor)
        cancel = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": request["id"]}}
        assert cancel in editor.unsolicited


async def test_a_repeated_or_late_answer_is_ignored(tmp_path):
    async with running(scripted(RISKY, {"say": "done"})) as editor:

        async def answer_twice(params):
            request_id = editor.server_requests[-1]["id"]
            await editor.send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "result": {"outcome": {"outcome": "selected", "optionId": "reject_once"}},
                }
            )
            return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

        editor.handlers["session/request_permission"] = answer_twice
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert await editor.prompt(sid, "deploy") == {"stopReason": "end_turn"}
        assert statuses(editor, sid) == ["failed"]  # the first answer counted, the second was dropped
        assert await editor.prompt(sid, "again") == {"stopReason": "end_turn"}


async def test_modes_are_offered_changed_announced_and_remembered_across_a_restart(tmp_path):
    db = tmp_path / "journal.db"
    journal = await Journal.open(db)
    async with running(AcpAgent(ScriptedAdapter.from_data({"scenarios": []}), journal=journal)) as editor:
        await editor.initialize()
        created = await editor.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        sid = created["sessionId"]
        assert created["modes"]["currentModeId"] == "ask"
        assert [m["id"] for m in created["modes"]["availableModes"]] == ["ask", "accept-edits", "read-only", "yolo"]
        assert created["configOptions"][0]["id"] == "mode" and created["configOptions"][0]["category"] == "mode"
        assert await editor.request("session/set_mode", {"sessionId": sid, "modeId": "read-only"}) == {}
        assert editor.updates[sid][-2:] == [
            {"sessionUpdate": "current_mode_update", "currentModeId": "read-only"},
            {
                "sessionUpdate": "config_option_update",
                "configOptions": [
                    {**created["configOptions"][0], "currentValue": "read-only"},
                    *created["configOptions"][1:],
                ],
            },
        ]
        result = await editor.request(
            "session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "yolo"}
        )
        assert result["configOptions"][0]["currentValue"] == "yolo"
        assert editor.updates[sid][-1] == {"sessionUpdate": "current_mode_update", "currentModeId": "yolo"}
        for bad in ({"modeId": "reckless"},):
            with pytest.raises(RemoteError) as caught:
                await editor.request("session/set_mode", {"sessionId": sid, **bad})
            assert caught.value.code == INVALID_PARAMS
    await journal.close()
    journal = await Journal.open(db)
    async with running(AcpAgent(ScriptedAdapter.from_data({"scenarios": []}), journal=journal)) as editor:
        await editor.initialize()
        resumed = await editor.request("session/resume", {"sessionId": sid, "cwd": str(tmp_path)})
        assert resumed["modes"]["currentModeId"] == "yolo"
    await journal.close()


async def test_read_only_mode_refuses_edits_and_commands_without_asking(tmp_path):
    agent = scripted(
        {"tool": "Write", "kind": "edit", "write_file": {"path": "a.txt", "content": "x"}},
        {"tool": "Run", "kind": "execute", "run": "touch b.txt"},
        {"tool": "Asked edit", "kind": "edit", "ask": True, "result": "ok"},
        {"tool": "Read", "kind": "read", "ask": True, "result": "read ok"},
    )
    async with running(agent) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.request("session/set_mode", {"sessionId": sid, "modeId": "read-only"})
        await editor.prompt(sid, "try")
        assert statuses(editor, sid) == [
            "in_progress",
            "failed",
            "in_progress",
            "failed",
            "failed",
            "in_progress",
            "completed",
        ]
        assert asked(editor) == []
        assert not (tmp_path / "a.txt").exists() and not (tmp_path / "b.txt").exists()
        messages = [u["content"][0]["content"]["text"] for u in editor.updates[sid] if u.get("status") == "failed"]
        assert messages == [
            "Refused: writing files is not allowed in read-only mode (change it with /mode)",
            "Refused: running commands is not allowed in read-only mode (change it with /mode)",
            "Refused by read-only mode",
        ]


async def test_yolo_mode_asks_nothing(tmp_path):
    async with running(scripted(RISKY)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "/mode yolo")
        assert {"sessionUpdate": "current_mode_update", "currentModeId": "yolo"} in editor.updates[sid]
        await editor.prompt(sid, "deploy")
        assert asked(editor) == [] and statuses(editor, sid)[-1] == "completed"


class ProbeAdapter:
    """Declares an option and a command; asks clarifying questions when told to."""

    name = "probe"

    def __init__(self) -> None:
        self.turns = []

    def capabilities(self) -> AdapterCapabilities:
        return AdapterCapabilities(
            context_window=1000,
            config_options=(
                ConfigOption(
                    "model",
                    "Model",
                    (ConfigChoice("small", "Small"), ConfigChoice("large", "Large")),
                    "small",
                    category="model",
                ),
            ),
            commands=(SlashCommand("review", "Review the diff", hint="files"),),
        )

    def run_turn(self, turn, sink):
        self.turns.append(turn)
        if turn.text.startswith("ask"):
            choices = tuple(turn.text.split()[1:])
            try:
                sink.text(f"answer: {sink.clarify('Which one?', choices=choices)}")
            except ToolRefused as exc:
                sink.text(f"no answer: {exc}")
        else:
            sink.text(f"model={turn.config['model']} mode={turn.mode}")
            sink.usage(input_tokens=30, output_tokens=12, context_used=42, context_size=1000)
        return "end_turn"

    def cancel(self, session_id):
        pass


async def test_adapter_options_are_validated_and_reach_the_turn(tmp_path):
    adapter = ProbeAdapter()
    async with running(AcpAgent(adapter)) as editor:
        await editor.initialize()
        created = await editor.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        sid = created["sessionId"]
        model = created["configOptions"][1]
        assert model["id"] == "model" and model["category"] == "model" and model["currentValue"] == "small"
        await editor.prompt(sid, "go")
        result = await editor.request(
            "session/set_config_option", {"sessionId": sid, "configId": "model", "value": "large"}
        )
        assert result["configOptions"][1]["currentValue"] == "large"
        for bad in (
            {"configId": "model", "value": "huge"},
            {"configId": "colour", "value": "red"},
            {"configId": "model", "type": "boolean", "value": True},
        ):
            with pytest.raises(RemoteError) as caught:
                await editor.request("session/set_config_option", {"sessionId": sid, **bad})
            assert caught.value.code == INVALID_PARAMS
        response = await editor.prompt(sid, "go")
        assert editor.text(sid).endswith("model=large mode=ask")
        assert response == {
            "stopReason": "end_turn",
            "usage": {"inputTokens": 30, "outputTokens": 12, "totalTokens": 42},
        }
        assert {"sessionUpdate": "usage_update", "used": 42, "size": 1000} in editor.updates[sid]


async def test_commands_are_announced_and_built_ins_are_answered_by_the_server(tmp_path):
    adapter = ProbeAdapter()
    async with running(AcpAgent(adapter)) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.wait_for(lambda: editor.updates[sid])
        (announced,) = editor.updates[sid]
        names = [c["name"] for c in announced["availableCommands"]]
        assert names == ["help", "mode", "permissions", "status", "review"]
        assert announced["availableCommands"][4]["input"] == {"hint": "files"}
        await editor.prompt(sid, "/help")
        assert "`/review files`: Review the diff" in editor.text(sid)
        await editor.prompt(sid, "/status")
        assert f"Session `{sid}`" in editor.text(sid) and "model=small" in editor.text(sid)
        assert adapter.turns == []
        await editor.prompt(sid, "/review src")
        assert adapter.turns[0].text == "/review src"


async def test_a_question_uses_a_form_when_the_editor_can_show_one(tmp_path):
    async with running(AcpAgent(ProbeAdapter())) as editor:

        async def form(params):
            assert params["mode"] == "form" and params["message"] == "Which one?"
            assert params["requestedSchema"]["properties"]["answer"]["enum"] == ["red", "blue"]
            return {"action": "accept", "content": {"answer": "blue"}}

        editor.handlers["elicitation/create"] = form
        await editor.initialize({"elicitation": {"form": {}}})
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "ask red blue")
        assert editor.text(sid) == "answer: blue"

        async def decline(params):
            return {"action": "decline"}

        editor.handlers["elicitation/create"] = decline
        await editor.prompt(sid, "ask")
        assert editor.text(sid).endswith("no answer: The user declined to answer")


async def test_without_forms_a_question_with_choices_becomes_a_permission_request(tmp_path):
    async with running(AcpAgent(ProbeAdapter())) as editor:
        editor.handlers["session/request_permission"] = answering("choice_1")
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "ask red blue")
        assert editor.text(sid) == "answer: blue"
        (request,) = asked(editor)
        assert [o["name"] for o in request["params"]["options"]] == ["red", "blue", "Skip"]
        await editor.prompt(sid, "ask")
        assert editor.text(sid).endswith(
            "no answer: Cannot ask the user: this editor shows neither forms "
            "(elicitation) nor choices for an open question"
        )


async def test_cancel_withdraws_a_pending_question(tmp_path):
    async with running(AcpAgent(ProbeAdapter())) as editor:
        editor.never_answer("elicitation/create")
        await editor.initialize({"elicitation": {"form": {}}})
        sid = await editor.new_session(tmp_path)
        task = await editor.start_prompt(sid, "ask red blue")
        await editor.wait_for(lambda: asked(editor, "elicitation/create"))
        await editor.notify("session/cancel", {"sessionId": sid})
        assert (await task)["result"] == {"stopReason": "cancelled"}
        (request,) = asked(editor, "elicitation/create")
        cancel = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": request["id"]}}
        assert cancel in editor.unsolicited


async def test_permission_decisions_are_journaled(tmp_path):
    journal = await Journal.open(tmp_path / "journal.db")
    async with running(
        AcpAgent(
            ScriptedAdapter.from_data(
                {"scenarios": [{"match": "", "steps": [RISKY, {"tool": "Look", "kind": "read", "ask": True}]}]}
            ),
            journal=journal,
        )
    ) as editor:
        editor.handlers["session/request_permission"] = answering("reject_once")
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "go")
    decisions = [r.payload async for r in journal.events(sid) if r.type == "permission"]
    await journal.close()
    assert [(d["outcome"], d["by"], d["option"]) for d in decisions] == [
        ("rejected", "user", "reject_once"),
        ("allowed", "policy", None),
    ]
    assert json.dumps(decisions)


async def test_the_scripted_agent_asks_questions_for_client_testers(tmp_path):
    agent = scripted({"ask_user": "Which colour?", "choices": ["red", "blue"]}, {"ask_user": "Your name?"})
    async with running(agent) as editor:
        editor.handlers["session/request_permission"] = answering("choice_0")
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "go")
        assert editor.text(sid) == (
            "Which colour? → red\nYour name? → (no answer: Cannot ask the user: this editor "
            "shows neither forms (elicitation) nor choices for an open question)\n"
        )
