"""ACP v2's background work through the official TS SDK's v2 client (tests/clients/v2-client.mjs):
a command that leaves a process running after its turn is listed in `state_update.background` as
a terminal, `terminal/cancel` stops it (the pid checked), and `tool_call/cancel` stops a long
command mid-turn. Real subprocesses; every frame checked against the v2 schema (test_v2.run_v2).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from test_v2 import FAKE_AGENT, run_v2, v2_client  # noqa: F401  (the fixture)

SCRIPT = {
    "contextWindow": 1000,
    "scenarios": [
        {
            "match": "background",
            "steps": [
                {"tool": "Start a sleeper", "kind": "execute", "run": "sleep 30 >/dev/null 2>&1 & echo $!"},
                {"say": "It runs on."},
            ],
        },
        {
            "match": "brief",
            "steps": [
                {"tool": "Start a brief one", "kind": "execute", "run": "sleep 0.2 >/dev/null 2>&1 & echo $!"},
                {"say": "It ends soon."},
            ],
        },
        {"match": "chatty", "steps": [{"tool": "Count", "kind": "execute", "run": "echo one; echo two >&2; exit 3"}]},
        {
            "match": "long",
            "steps": [
                {"tool": "Sleep long", "kind": "execute", "run": "echo started; exec sleep 30"},
                {"say": "The command ended."},
            ],
        },
        {"match": "", "steps": [{"say": "short reply"}]},
    ],
}


def args(tmp_path: Path) -> list[str]:
    script = tmp_path / "background-script.json"
    script.write_text(json.dumps(SCRIPT))
    return ["--agent", "scripted", "--script", str(script), "--db", str(tmp_path / "journal.db")]


def states(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [u for u in updates if u["sessionUpdate"] == "state_update"]


def test_a_command_left_running_after_a_turn_is_listed_idle_and_terminal_cancel_stops_it(v2_client, tmp_path):  # noqa: F811
    steps = [{"do": "new"}, {"do": "prompt", "text": "background please"}, {"do": "cancelTerminal"}]
    summary = run_v2(v2_client, tmp_path, steps, args=args(tmp_path))
    turn, cancel = summary["steps"][1], summary["steps"][2]
    idle = states(turn["updates"])[-1]
    assert idle["state"] == "idle" and idle["stopReason"] == "end_turn"
    assert [b["type"] for b in idle["background"]] == ["terminal"]
    terminal_id = idle["background"][0]["terminalId"]
    announced = [
        u for u in turn["updates"] if u["sessionUpdate"] == "terminal_update" and u["terminalId"] == terminal_id
    ]
    assert announced[0]["terminalId"] == terminal_id and announced[0]["capabilities"] == {"cancel": {}}
    assert "sleep 30" in announced[0]["command"]
    assert turn["updates"].index(announced[0]) < turn["updates"].index(idle)  # announced before listed
    assert states(turn["updates"])[0]["background"] == []  # every state update carries the list

    assert cancel["result"] == {} and cancel["terminalId"] == terminal_id
    assert cancel["alive"] == {"before": True, "after": False}
    assert not Path(f"/proc/{cancel['pid']}").exists()
    ended = [u for u in cancel["updates"] if u["sessionUpdate"] == "terminal_update"]
    assert ended == [
        {"sessionUpdate": "terminal_update", "terminalId": terminal_id, "exitStatus": {"signal": "SIGKILL"}}
        | {"capabilities": None}
    ]
    after = states(cancel["updates"])[-1]
    assert after["state"] == "idle" and after["background"] == [] and "stopReason" not in after


def test_a_background_command_that_ends_by_itself_is_reported_exited_and_dropped_from_the_list(
    v2_client,  # noqa: F811
    tmp_path,
):
    steps = [{"do": "new"}, {"do": "prompt", "text": "brief please"}, {"do": "backgroundEnds"}]
    summary = run_v2(v2_client, tmp_path, steps, args=args(tmp_path))
    turn, ended = summary["steps"][1], summary["steps"][2]
    updates = turn["updates"] + ended["updates"]
    terminal_id = next(u["background"][0]["terminalId"] for u in states(updates) if u["background"])
    exits = [u for u in updates if u.get("terminalId") == terminal_id and "exitStatus" in u]
    assert exits == [
        {"sessionUpdate": "terminal_update", "terminalId": terminal_id, "exitStatus": {}, "capabilities": None}
    ]
    last = states(updates)[-1]
    assert updates.index(exits[0]) < updates.index(last) and last["background"] == []
    assert not Path(f"/proc/{ended['pid']}").exists()  # reaped by the server that adopted it


def test_a_client_that_leaves_with_work_in_the_background_lets_the_server_exit_and_the_work_run_on(
    v2_client,  # noqa: F811
    tmp_path,
):
    steps = [{"do": "new"}, {"do": "prompt", "text": "background please"}]
    summary = run_v2(v2_client, tmp_path, steps, args=args(tmp_path))  # a slow exit would be a problem
    pid = next(
        int(item["content"]["text"])
        for u in summary["steps"][1]["updates"]
        if u["sessionUpdate"] == "tool_call_update"
        for item in u.get("content", [])
        if item.get("content", {}).get("text", "").strip().isdigit()
    )
    try:
        assert Path(f"/proc/{pid}").exists()  # a command's leftovers outlive the connection, as in v1
    finally:
        os.kill(pid, signal.SIGKILL)


def test_a_tool_call_s_command_is_shown_live_as_a_v2_terminal_its_output_and_its_exit(v2_client, tmp_path):  # noqa: F811
    summary = run_v2(v2_client, tmp_path, [{"do": "new"}, {"do": "prompt", "text": "chatty"}], args=args(tmp_path))
    updates = summary["steps"][1]["updates"]
    created = next(u for u in updates if u["sessionUpdate"] == "terminal_update")
    terminal_id = created["terminalId"]
    assert created["command"] == "echo one; echo two >&2; exit 3" and created["cwd"].endswith("workspace")
    shown = next(u for u in updates if u["sessionUpdate"] == "tool_call_update" and "content" in u)
    assert shown["content"] == [{"type": "terminal", "terminalId": terminal_id}]
    chunks = [u for u in updates if u["sessionUpdate"] == "terminal_output_chunk"]
    assert {u["terminalId"] for u in chunks} == {terminal_id}
    assert b"".join(base64.b64decode(u["data"]) for u in chunks) == b"one\ntwo\n"
    ended = next(u for u in updates if u["sessionUpdate"] == "terminal_update" and "exitStatus" in u)
    assert ended == {"sessionUpdate": "terminal_update", "terminalId": terminal_id, "exitStatus": {"exitCode": 3}}
    final = next(u for u in updates if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "failed")
    assert updates.index(chunks[-1]) < updates.index(ended) < updates.index(final)


def test_cancelling_an_unknown_terminal_or_tool_call_or_another_session_s_is_refused_invalid_params(
    v2_client,  # noqa: F811
    tmp_path,
):
    cancel = {"sessionId": "$SESSION", "terminalId": "bg-nothing"}
    steps = [
        {"do": "new"},
        {"do": "request", "method": "terminal/cancel", "params": cancel},
        {"do": "request", "method": "tool_call/cancel", "params": {"sessionId": "$SESSION", "toolCallId": "nope"}},
        {"do": "request", "method": "terminal/cancel", "params": {"sessionId": "sess_not_ours", "terminalId": "bg-x"}},
    ]
    summary = run_v2(v2_client, tmp_path, steps, args=args(tmp_path))
    assert [step["error"]["code"] for step in summary["steps"][1:]] == [-32602] * 3


def test_tool_call_cancel_stops_a_long_command_mid_turn_and_the_tool_call_ends_cancelled_also_replayed(
    v2_client,  # noqa: F811
    tmp_path,
):
    steps = [
        {"do": "new"},
        {"do": "cancelToolCall", "text": "long command"},
        {"do": "restart"},
        {"do": "resume", "replay": True},
    ]
    summary = run_v2(v2_client, tmp_path, steps, args=args(tmp_path))
    step = summary["steps"][1]
    assert step["cancel"] == {}
    calls = [u for u in step["updates"] if u["sessionUpdate"] == "tool_call_update"]
    offered = next(u for u in calls if u.get("capabilities"))
    final = [u for u in calls if u.get("status") in ("completed", "failed", "cancelled")]
    assert [u["status"] for u in final] == ["cancelled"]
    assert final[0]["toolCallId"] == offered["toolCallId"] and final[0]["capabilities"] is None
    idle = states(step["updates"])[-1]
    assert idle["state"] == "idle" and idle["stopReason"] == "end_turn"  # the turn went on: only the call stopped
    assert idle["background"] == []
    said = "".join(u["content"]["text"] for u in step["updates"] if u["sessionUpdate"] == "agent_message_chunk")
    assert "The command ended." in said
    # What the journal keeps is what the client saw: the replay after a restart ends it cancelled too.
    replayed = [u for u in summary["steps"][3]["updates"] if u.get("toolCallId") == offered["toolCallId"]]
    assert [u["status"] for u in replayed if u.get("status") in ("completed", "failed", "cancelled")] == ["cancelled"]
    assert all("_meta" not in u for u in replayed + final)  # v1's mark of it is not v2's to see


def test_an_acp_agent_below_whose_terminal_command_leaves_work_running_shows_it_and_terminal_cancel_stops_it(
    v2_client,  # noqa: F811
    tmp_path,
):
    below = ["--agent", "acp", "--db", str(tmp_path / "journal.db"), "--"]
    below += [sys.executable, FAKE_AGENT, "--store", str(tmp_path / "store.json"), "--v1"]
    create = {"command": "/bin/sh", "args": ["-c", "sleep 30 >/dev/null 2>&1 & echo $!"]}
    steps = [{"do": "new"}, {"do": "prompt", "text": "terminal " + json.dumps({"create": create})}]
    steps.append({"do": "cancelTerminal"})
    summary = run_v2(v2_client, tmp_path, steps, args=below)
    turn, cancel = summary["steps"][1], summary["steps"][2]
    idle = states(turn["updates"])[-1]
    assert idle["state"] == "idle" and [b["terminalId"] for b in idle["background"]] == [cancel["terminalId"]]
    assert cancel["result"] == {} and cancel["alive"] == {"before": True, "after": False}
    assert not Path(f"/proc/{cancel['pid']}").exists()
    assert states(cancel["updates"])[-1]["background"] == []
