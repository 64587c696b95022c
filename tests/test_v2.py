"""ACP v2 beside v1: the official TypeScript SDK's `experimental/v2` client (tests/clients/v2-client.mjs)
drives a real `acp-server` over stdio, and every frame the server writes is checked against the
vendored v2 schema (schema/v2/schema.json), as v1's are against v1's.

Needs Node >= 18 and the pinned SDK in tests/clients (installed lazily, as for test_real_clients.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, reply
from harness import running
from hermes_home import hermes_model
from installs import CLIENTS, node_packages
from schema_check import check_agent_frame
from stdio_server import StdioServer
from test_reattach import hub_serving

from acp_server.rpc.errors import AUTH_REQUIRED, INVALID_PARAMS, METHOD_NOT_FOUND, REQUEST_CANCELLED
from acp_server.turns import mapping_v2

V2_CLIENT = CLIENTS / "v2-client.mjs"
FAKE_AGENT = str(Path(__file__).with_name("fake_acp_agent.py"))
CLIENT_TIMEOUT = 180
# A step's limit in the client: a prompt to a restarted Hermes imports Hermes first, which took
# over 15 s (the client's default) in one CI run with the machine at load average 9.
STEP_TIMEOUT_MS = 45_000

SCRIPT = {
    "contextWindow": 1000,
    "scenarios": [
        {
            "match": "tour",
            "steps": [
                {"think": "Planning the tour."},
                {"plan": [{"content": "Read notes", "status": "in_progress", "priority": "high"}]},
                {"say": "Hello "},
                {"say": "from v2.\n"},
                {"tool": "Read notes.txt", "kind": "read", "input": {"path": "notes.txt"}, "read_file": "notes.txt"},
                {
                    "tool": "Write out.txt",
                    "kind": "edit",
                    "input": {"path": "out.txt"},
                    "ask": True,
                    "write_file": {"path": "out.txt", "content": "written by the agent\n"},
                },
                {"say": "Done."},
            ],
        },
        {
            "match": "guarded",
            "steps": [
                {"say": "Asking first. "},
                {"tool": "Delete old.txt", "kind": "delete", "ask": True, "result": "deleted"},
                {"say": "never sent"},
            ],
        },
        {"match": "fail", "steps": [{"say": "About to fail. "}, {"error": "scripted failure for the test"}]},
        {"match": "long", "steps": [{"say": "Starting a long job. "}, {"sleep": 30}, {"say": "never sent"}]},
        {"match": "", "steps": [{"say": "short reply"}]},
    ],
}


@pytest.fixture(scope="session")
def v2_client() -> list[str]:
    return [node_packages("@agentclientprotocol/sdk"), str(V2_CLIENT)]


def server_args(tmp_path: Path) -> list[str]:
    script = tmp_path / "script.json"
    if not script.exists():
        script.write_text(json.dumps(SCRIPT))
    return ["--agent", "scripted", "--script", str(script), "--db", str(tmp_path / "journal.db")]


def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    if not path.exists():
        path.mkdir()
        (path / "notes.txt").write_text("the notes\n")
    return path


def run_v2(
    command: list[str],
    tmp_path: Path,
    steps: list[dict[str, Any]],
    session: str | None = None,
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run the v2 client through `steps` against a server with `args` (the scripted agent's by
    default); every frame the server writes is checked against the v2 schema."""
    args = server_args(tmp_path) if args is None else args
    config = {
        "server": {"command": sys.executable, "args": ["-m", "acp_server", *args], "env": env or {}},
        "cwd": str(workspace(tmp_path)),
        "steps": steps,
        "session": session,
        "timeoutMs": STEP_TIMEOUT_MS,
    }
    config_file = tmp_path / "v2-config.json"
    config_file.write_text(json.dumps(config))
    done = subprocess.run(
        [*command, f"@{config_file}"], capture_output=True, text=True, timeout=CLIENT_TIMEOUT, check=False
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    stderr = "\n".join(p["stderr"] for p in summary["processes"])
    assert summary["problems"] == [], f"{summary['problems']}\n{stderr}"
    for process in summary["processes"]:
        check_frames(process["frames"])
    return summary


def check_frames(frames: list[dict[str, Any]]) -> None:
    asked: dict[Any, str] = {}
    for entry in frames:
        frame = entry["frame"]
        if entry["from"] == "client":
            if "method" in frame and "id" in frame:
                asked[frame["id"]] = frame["method"]
            continue
        answered = None if "method" in frame else asked.get(frame.get("id"))
        check_agent_frame(frame, answered, version=2)


def kinds(updates: list[dict[str, Any]]) -> list[str]:
    return [u["sessionUpdate"] + (f":{u['state']}" if u["sessionUpdate"] == "state_update" else "") for u in updates]


def test_initialize_with_version_2_gets_v2_and_with_1_gets_v1_unchanged(v2_client, tmp_path):
    summary = run_v2(v2_client, tmp_path, [])
    init = summary["initialize"]
    assert init["protocolVersion"] == 2
    assert init["info"]["name"] == "acp-server"
    assert init["capabilities"]["session"]["delete"] == {}
    v1 = StdioServer(*server_args(tmp_path))
    try:
        result = v1.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert result["protocolVersion"] == 1
        assert "agentCapabilities" in result and "capabilities" not in result
    finally:
        stop(v1)
    later = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": 7, "info": {"name": "x", "version": "1"}},
    }
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", *server_args(tmp_path)],
        input=json.dumps(later) + "\n",
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT,
        check=False,
    )
    answer = json.loads(done.stdout.splitlines()[0])
    check_agent_frame(answer, "initialize", version=2)
    assert answer["result"]["protocolVersion"] == 2  # a version we do not speak: the highest we do


def stop(server: StdioServer) -> None:
    server.close_stdin()
    server.remaining_frames()
    server.wait()


def test_a_v2_turn_is_answered_at_acceptance_streams_with_message_ids_and_ends_idle(v2_client, tmp_path):
    summary = run_v2(v2_client, tmp_path, [{"do": "new"}, {"do": "prompt", "text": "tour please"}])
    turn = summary["steps"][1]
    message_id = turn["result"]["messageId"]
    updates = [u for u in turn["updates"] if u["sessionUpdate"] != "available_commands_update"]
    assert updates[0] == {"sessionUpdate": "state_update", "state": "running", "background": []}
    user = updates[1]
    assert user == {
        "sessionUpdate": "user_message",
        "messageId": message_id,
        "content": [{"type": "text", "text": "tour please"}],
    }
    assert updates[-1] == {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn", "background": []}
    chunks = [u for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert "".join(u["content"]["text"] for u in chunks) == "Hello from v2.\nDone."
    run_id = message_id.rsplit(":", 1)[0]
    assert {u["messageId"] for u in chunks} == {f"{run_id}:2", f"{run_id}:3"}
    assert [u["plan"] for u in updates if u["sessionUpdate"] == "plan_update"] == [
        {
            "type": "items",
            "planId": "plan",
            "entries": [{"content": "Read notes", "status": "in_progress", "priority": "high"}],
        }
    ]
    assert "tool_call" not in kinds(updates) and "plan" not in kinds(updates)
    # the write asked first: requires_action while the question waited, running once answered
    assert kinds(updates).count("state_update:requires_action") == 1
    at = kinds(updates).index("state_update:requires_action")
    assert kinds(updates)[at + 1] == "state_update:running"
    (question,) = turn["asked"]
    assert question["title"] == "Write out.txt"
    assert question["subject"]["type"] == "tool_call"
    diffs = [
        item
        for u in updates
        if u["sessionUpdate"] == "tool_call_update"
        for item in u.get("content") or []
        if item["type"] == "diff"
    ]
    assert diffs and diffs[-1]["changes"][0]["operation"] == "add"
    assert diffs[-1]["changes"][0]["path"].endswith("out.txt")
    assert (workspace(tmp_path) / "out.txt").read_text() == "written by the agent\n"  # locally: v2 has no client fs


def test_the_sdk_session_helper_reads_a_v2_turn_until_idle(v2_client, tmp_path):
    summary = run_v2(v2_client, tmp_path, [{"do": "sdkPrompt", "text": "hello"}])
    step = summary["steps"][0]
    assert step["text"] == "short reply"
    assert step["result"]["messageId"].endswith(":0")


def test_cancel_ends_a_v2_turn_idle_cancelled_and_a_failure_idle_error(v2_client, tmp_path):
    steps = [
        {"do": "new"},
        {"do": "prompt", "text": "long one", "cancelOn": "agent_message_chunk"},
        {"do": "prompt", "text": "guarded delete", "cancelOn": "permission"},
        {"do": "prompt", "text": "fail now"},
        {"do": "restart"},
        {"do": "resume", "replay": True},
    ]
    summary = run_v2(v2_client, tmp_path, steps)
    long_turn, guarded, failed, _, resumed = summary["steps"][1:]
    assert long_turn["updates"][-1] == {
        "sessionUpdate": "state_update",
        "state": "idle",
        "stopReason": "cancelled",
        "background": [],
    }
    assert guarded["updates"][-1]["stopReason"] == "cancelled"
    closed = [u for u in guarded["updates"] if u["sessionUpdate"] == "tool_call_update" and u.get("status")]
    assert closed[-1]["status"] == "cancelled"  # v2's own status for a tool call its cancelled turn left
    replayed = [u for u in resumed["updates"] if u.get("toolCallId") == closed[-1]["toolCallId"] and u.get("status")]
    assert replayed[-1]["status"] == "cancelled"  # the journal keeps what the client saw
    assert "requires_action" in [u.get("state") for u in guarded["updates"]]
    assert failed["updates"][-1]["stopReason"] == "error"
    assert "scripted failure" in failed["updates"][-1]["error"]["message"]


def test_a_prompt_held_behind_a_running_turn_is_withdrawn_by_a_cancel_with_the_turn_ending_idle_once(
    v2_client, tmp_path
):
    summary = run_v2(v2_client, tmp_path, [{"do": "new"}, {"do": "held", "text": "long one", "then": "hello"}])
    step = summary["steps"][1]
    assert step["result"]["messageId"].endswith(":0")  # answered when it started, before the cancel
    assert step["held"]["error"]["code"] == REQUEST_CANCELLED
    idles = [u for u in step["updates"] if u.get("state") == "idle"]
    assert idles == [{"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled", "background": []}]


def test_resume_after_a_restart_replays_with_the_live_ids_only_when_asked(v2_client, tmp_path):
    steps = [
        {"do": "new"},
        {"do": "prompt", "text": "tour please"},
        {"do": "restart"},
        {"do": "resume", "replay": False},
        {"do": "restart"},
        {"do": "resume", "replay": True},
        {"do": "prompt", "text": "again"},
    ]
    summary = run_v2(v2_client, tmp_path, steps)
    live = summary["steps"][1]["updates"]
    bare, replayed, again = summary["steps"][3], summary["steps"][5], summary["steps"][6]
    assert bare["updates"] == [
        {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn", "background": []}
    ]
    shown = replayed["updates"]
    assert shown[-1] == {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn", "background": []}

    def ids(updates: list[dict[str, Any]], kind: str) -> list[str]:
        return sorted({u["messageId"] for u in updates if u["sessionUpdate"] == kind})

    assert ids(shown, "agent_message_chunk") == ids(live, "agent_message_chunk")
    assert ids(shown, "user_message_chunk") == [summary["steps"][1]["result"]["messageId"]]
    tools = {u["toolCallId"] for u in live if u["sessionUpdate"] == "tool_call_update"}
    assert {u["toolCallId"] for u in shown if u["sessionUpdate"] == "tool_call_update"} == tools
    assert replayed["asked"] == []  # nothing ran again
    assert again["updates"][-1]["stopReason"] == "end_turn"


def test_a_v1_session_is_resumed_by_a_v2_client_and_the_other_way_round(v2_client, tmp_path):
    v1 = StdioServer(*server_args(tmp_path))
    try:
        session = v1.start_session(str(workspace(tmp_path)))
        v1.call("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]})
    finally:
        stop(v1)
    summary = run_v2(
        v2_client, tmp_path, [{"do": "resume", "replay": True}, {"do": "prompt", "text": "from v2"}], session=session
    )
    replayed = summary["steps"][0]["updates"]
    assert [u["content"]["text"] for u in replayed if u["sessionUpdate"] == "agent_message_chunk"] == ["short reply"]
    back = StdioServer(*server_args(tmp_path))
    try:
        back.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        back.call("session/load", {"sessionId": session, "cwd": str(workspace(tmp_path)), "mcpServers": []})
        texts = [
            f["params"]["update"]["content"]["text"]
            for f in back.frames
            if f.get("method") == "session/update"
            and f["params"]["update"]["sessionUpdate"] in ("agent_message_chunk", "user_message_chunk")
        ]
        assert texts == ["hi", "short reply", "from v2", "short reply"]
    finally:
        stop(back)


def test_an_acp_agent_below_speaking_v1_gives_a_v2_client_a_v2_turn_that_survives_a_restart(v2_client, tmp_path):
    below = ["--agent", "acp", "--db", str(tmp_path / "journal.db"), "--"]
    below += [sys.executable, FAKE_AGENT, "--store", str(tmp_path / "store.json"), "--v1", "--modes"]
    steps = [
        {"do": "new"},
        {
            "do": "request",
            "method": "session/set_config_option",
            "params": {"sessionId": "$SESSION", "configId": "model", "type": "id", "value": "small"},
        },
        {"do": "prompt", "text": "ask first"},
        {"do": "prompt", "text": "slow one", "cancelOn": "agent_message_chunk"},
        {"do": "restart"},
        {"do": "resume", "replay": True},
        {"do": "request", "method": "session/list", "params": {"cwd": "$CWD"}},
        {"do": "request", "method": "session/close", "params": {"sessionId": "$SESSION"}},
    ]
    summary = run_v2(v2_client, tmp_path, steps, args=below)
    new, option, asked, slow, _, resumed, listed, closed = summary["steps"]
    categories = {o["configId"]: o.get("category") for o in new["result"]["configOptions"]}
    assert categories["agent-mode"] == "mode"  # the agent's modes, as v2's mode option
    (question,) = asked["asked"]
    assert question["title"] == "Run ls -la" and question["subject"]["toolCall"]["toolCallId"]
    states = [u["state"] for u in asked["updates"] if u["sessionUpdate"] == "state_update"]
    assert states == ["running", "requires_action", "running", "idle"]
    said = [u for u in asked["updates"] if u["sessionUpdate"] == "agent_message_chunk"]
    assert said[0]["messageId"] == "their-0"  # the agent below's own id, kept
    assert slow["updates"][-1] == {
        "sessionUpdate": "state_update",
        "state": "idle",
        "stopReason": "cancelled",
        "background": [],
    }
    assert "error" not in option
    assert {o["configId"]: o["currentValue"] for o in option["result"]["configOptions"]}["model"] == "small"
    live_ids = {u["messageId"] for step in (asked, slow) for u in step["updates"] if "messageId" in u}
    replay_ids = {u["messageId"] for u in resumed["updates"] if "messageId" in u}
    assert live_ids <= replay_ids
    assert resumed["updates"][-1]["state"] == "idle"
    assert [s["sessionId"] for s in listed["result"]["sessions"]] == [summary["sessionId"]]
    assert closed["result"] == {}


def test_the_echo_agent_gives_a_v2_client_a_whole_turn_and_refuses_what_v2_does_not_have(v2_client, tmp_path):
    steps = [
        {"do": "sdkPrompt", "text": "say this"},
        {"do": "request", "method": "session/set_mode", "params": {"sessionId": "$SESSION", "modeId": "ask"}},
        {"do": "request", "method": "session/load", "params": {"sessionId": "$SESSION", "cwd": "$CWD"}},
        {
            "do": "request",
            "method": "session/resume",
            "params": {"sessionId": "$SESSION", "cwd": "$CWD", "replayFrom": {"type": "_from_the_middle"}},
        },
    ]
    summary = run_v2(v2_client, tmp_path, steps, args=["--agent", "echo", "--db", str(tmp_path / "j.db")])
    turn, set_mode, load, resume = summary["steps"]
    assert "say this" in turn["text"]
    assert set_mode["error"]["code"] == load["error"]["code"] == METHOD_NOT_FOUND  # v1's, not v2's
    assert resume["error"]["code"] == INVALID_PARAMS  # a replay point we cannot serve is refused


def test_a_diff_becomes_v2_changes_with_a_git_patch():
    v1 = {"type": "diff", "path": "/w/a.txt", "oldText": "one\n", "newText": "one\ntwo"}
    assert mapping_v2.tool_content(v1) == {
        "type": "diff",
        "changes": [{"operation": "modify", "path": "/w/a.txt", "fileType": "text"}],
        "patch": {
            "format": "git_patch",
            "text": "diff --git a/w/a.txt b/w/a.txt\n--- a/w/a.txt\n+++ b/w/a.txt\n@@ -1 +1,2 @@\n one\n+two\n"
            "\\ No newline at end of file\n",
        },
    }


def test_v1_shapes_without_a_v2_form_are_rewritten_or_dropped():
    assert mapping_v2.update({"sessionUpdate": "current_mode_update", "currentModeId": "x"}) is None
    assert mapping_v2.update({"sessionUpdate": "tool_call", "toolCallId": "t", "title": "T", "status": "pending"}) == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "t",
        "title": "T",
        "status": "pending",
    }
    command = {"name": "help", "description": "d", "input": {"hint": "topic"}}
    assert mapping_v2.commands([command]) == [
        {"type": "command", "name": "help", "description": "d", "input": {"type": "text", "hint": "topic"}}
    ]
    unknown = {"sessionUpdate": "_vendor_thing", "x": 1}
    assert mapping_v2.update(unknown) == unknown  # passed through as sent


def test_the_openai_agent_gives_a_v2_client_its_turn_with_a_tool_and_a_restart_replays_it(v2_client, tmp_path):
    (workspace(tmp_path) / "a.txt").write_text("hi\n")
    with FakeOpenAI(models=["gpt-4o"]) as fake:
        fake.script(
            reply("Looking.", reasoning="Let me see.", tools=[("read_file", {"path": "a.txt"})]),
            reply("It says hi."),
        )
        args = ["--agent", "openai", "--model", "gpt-4o", "--base-url", fake.base_url, "--db", str(tmp_path / "j.db")]
        env = {"OPENAI_API_KEY": "sk-test", "XDG_CONFIG_HOME": str(tmp_path / "config")}
        steps = [{"do": "new"}, {"do": "prompt", "text": "what does a.txt say?"}, {"do": "restart"}]
        steps.append({"do": "resume", "replay": True})
        summary = run_v2(v2_client, tmp_path, steps, args=args, env=env)
    live, resumed = summary["steps"][1], summary["steps"][3]
    run_id = live["result"]["messageId"].rsplit(":", 1)[0]
    texts = joined(live["updates"])
    assert texts == [
        ("agent_thought_chunk", f"{run_id}:1", "Let me see."),
        ("agent_message_chunk", f"{run_id}:2", "Looking."),
        ("agent_message_chunk", f"{run_id}:3", "It says hi."),
    ]
    calls = [u for u in live["updates"] if u["sessionUpdate"] == "tool_call_update"]
    assert calls[0]["name"] == "read_file" and calls[-1]["status"] == "completed"
    replayed_calls = [u for u in resumed["updates"] if u["sessionUpdate"] == "tool_call_update"]
    assert replayed_calls[-1]["status"] == "completed"
    assert {u["toolCallId"] for u in replayed_calls} == {calls[0]["toolCallId"]}
    assert [t for t in joined(resumed["updates"]) if t[0] != "user_message_chunk"] == texts


def joined(updates: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """The text chunks as (kind, message id, text), consecutive chunks of one message joined."""
    texts: list[tuple[str, str, str]] = []
    for u in updates:
        if not u["sessionUpdate"].endswith("_chunk") or u["content"].get("type") != "text":
            continue
        if texts and texts[-1][:2] == (u["sessionUpdate"], u["messageId"]):
            texts[-1] = (*texts[-1][:2], texts[-1][2] + u["content"]["text"])
        else:
            texts.append((u["sessionUpdate"], u["messageId"], u["content"]["text"]))
    return texts


def test_hermes_gives_a_v2_client_a_turn_with_a_tool_that_a_restart_resumes_from_the_journal(
    v2_client, tmp_path, monkeypatch
):
    (workspace(tmp_path) / "a.txt").write_text("alpha\n")
    with hermes_model(tmp_path, monkeypatch) as fake:
        fake.script(reply(tools=[("read_file", {"path": "a.txt"})]), reply("It says alpha."), reply("Yes."))
        steps = [{"do": "new"}, {"do": "prompt", "text": "what is in a.txt?"}, {"do": "restart"}]
        steps += [{"do": "resume", "replay": True}, {"do": "prompt", "text": "sure?"}]
        summary = run_v2(v2_client, tmp_path, steps, args=["--agent", "hermes", "--db", str(tmp_path / "j.db")])
    live, resumed, again = summary["steps"][1], summary["steps"][3], summary["steps"][4]
    assert [t[2] for t in joined(live["updates"])] == ["It says alpha."]
    assert live["updates"][-1] == {
        "sessionUpdate": "state_update",
        "state": "idle",
        "stopReason": "end_turn",
        "background": [],
    }
    call = [u for u in live["updates"] if u["sessionUpdate"] == "tool_call_update"]
    assert call[-1]["status"] == "completed"
    assert joined(resumed["updates"])[1:] == joined(live["updates"])  # after the prompt: the same ids and text
    assert [t[2] for t in joined(again["updates"])] == ["Yes."]
    calls = [c["id"] for m in fake.chats[-1]["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    assert calls == ["call_0_read_file"]  # the restarted agent knows its tool call from the journal


async def test_a_runner_connection_asked_for_v2_gets_v2_and_one_asked_for_1_gets_v1(tmp_path):
    async with hub_serving(tmp_path) as hub, running(hub.agent()) as v2, running(hub.agent()) as v1:
        v2.version = 2
        result = await v2.request("initialize", {"protocolVersion": 2, "info": {"name": "t", "version": "0"}})
        assert (await v1.initialize())["protocolVersion"] == 1
    assert result["protocolVersion"] == 2 and "info" in result  # details: tests/test_v2_runner.py


def test_an_agent_below_that_needs_a_login_offers_it_to_a_v2_client_and_auth_login_runs_it(v2_client, tmp_path):
    below = ["--agent", "acp", "--db", str(tmp_path / "journal.db"), "--"]
    below += [sys.executable, FAKE_AGENT, "--store", str(tmp_path / "store.json"), "--auth"]
    steps = [
        {"do": "request", "method": "session/new", "params": {"cwd": "$CWD", "mcpServers": []}},
        {"do": "request", "method": "auth/login", "params": {"methodId": "login"}},
        {"do": "new"},
    ]
    summary = run_v2(v2_client, tmp_path, steps, args=below)
    assert summary["initialize"]["authMethods"] == [{"type": "agent", "methodId": "login", "name": "Log in"}]
    assert "auth" in summary["initialize"]["capabilities"]
    refused, login, created = summary["steps"]
    assert refused["error"]["code"] == AUTH_REQUIRED
    assert login["result"] == {}
    assert created["result"]["sessionId"]
