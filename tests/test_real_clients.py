"""End to end with clients nobody on this team wrote: the official ACP SDKs drive a real `acp-server`.

- TypeScript: `@agentclientprotocol/sdk` (npm), through tests/clients/ts-client.mjs; needs Node >= 18
  and `npm ci` in tests/clients (done here lazily when node_modules is missing or stale).
- Python: `agent-client-protocol` (PyPI, module `acp`), through tests/clients/py_sdk_client.py; it runs
  with this interpreter when the pinned version is installed here, otherwise in a venv of its own built
  once under the cache directory (`$ACP_TEST_CACHE`, default `~/.cache/acp-server-tests`).

Each client spawns the server over stdio, initializes with fs read/write capabilities, opens a session,
plays a scripted tour (thought, plan, streamed text, a read through the client's fs, a write behind a
permission round trip answered "allow once", a local command, usage, title), a turn it cancels while a
permission question is open, a failing turn, a refused turn and a long turn it cancels; then closes the
process, starts a new one on the same journal, loads the session, prompts once more and calls
session/list, set_mode, set_config_option, resume and close. It prints a JSON summary, asserted on here.

Both SDKs validate what they receive (zod, Pydantic); the clients also check every response against the
SDK's own schemas and compare each message with the SDK's parse of it, so a value the SDK would reject,
skip, replace or drop shows up in `problems` and fails the test.

Without Node/npm or a reachable registry the tests skip with the reason; under CI (`CI` set to a true
value) they fail instead, except when .ci/run could not install Node.js and says why in
`ACP_TEST_NO_NODE`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import venv
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pytest
from install_lock import install_lock
from installs import CLIENTS, locked_version, may_download, node_packages, unavailable

TS_CLIENT = CLIENTS / "ts-client.mjs"
PY_CLIENT = CLIENTS / "py_sdk_client.py"
PY_SDK = "agent-client-protocol"
PY_SDK_VERSION = "0.12.1"
SDK_PACKAGE = "@agentclientprotocol/sdk"
CLIENT_TIMEOUT = 90  # seconds for one client run; a run normally takes 2-4 s

# What the official clients say about our server and that these tests tolerate: each one was found by
# these tests and reported, and is listed precisely so that it hides nothing else.
# (client, problem kind, text in the problem's detail)
KNOWN_COMPLAINTS = [
    # The server adds `usage` to the session/prompt result when the turn reported usage. That field is
    # only in the *unstable* v1 schema: the TS SDK's stable schema drops it (no error, no log).
    ("@agentclientprotocol/sdk", "normalized", "session/prompt response", "$.usage: dropped by the SDK schema"),
    # On session/cancel the server withdraws its open session/request_permission with `$/cancel_request`
    # (optional in ACP v1). agent-client-protocol 0.12.1 does not know it and logs an ERROR (harmless).
    (
        "agent-client-protocol",
        "log.error",
        "",
        "Unhandled error while handling notification method=$/cancel_request: RequestError: Method not found",
    ),
]

SCRIPT = {
    "contextWindow": 1000,
    "scenarios": [
        {
            "match": "tour",
            "steps": [
                {"think": "Planning the tour."},
                {
                    "plan": [
                        {"content": "Read notes", "status": "in_progress", "priority": "high"},
                        {"content": "Write out", "status": "pending"},
                    ]
                },
                {"say": "Hello "},
                {"say": "from the "},
                {"say": "scripted agent.\n"},
                {"tool": "Read notes.txt", "kind": "read", "input": {"path": "notes.txt"}, "read_file": "notes.txt"},
                {
                    "tool": "Write out.txt",
                    "kind": "edit",
                    "input": {"path": "out.txt"},
                    "ask": True,
                    "write_file": {"path": "out.txt", "content": "written by the agent\n"},
                },
                {
                    "tool": "Echo",
                    "kind": "execute",
                    "input": {"command": "echo ran-locally"},
                    "run": "echo ran-locally",
                },
                {"usage": {"inputTokens": 10, "outputTokens": 5, "costUsd": 0.001}},
                {"title": "Real client tour"},
                {"say": "Done."},
            ],
        },
        {
            "match": "guarded",
            "steps": [
                {"say": "Asking first. "},
                {"tool": "Delete old.txt", "kind": "delete", "ask": True, "result": "deleted"},
                {"say": "never sent either"},
            ],
        },
        {"match": "fail", "steps": [{"say": "About to fail. "}, {"error": "scripted failure for the test"}]},
        {"match": "refuse", "steps": [{"say": "No. "}, {"stop": "refusal"}]},
        {"match": "long", "steps": [{"say": "Starting a long job. "}, {"sleep": 30}, {"say": "never sent"}]},
        {"match": "", "steps": [{"say": "short reply"}]},
    ],
}
TURNS = [
    {"prompt": "tour please"},
    {"prompt": "guarded delete", "cancelOn": "permission"},  # cancel while the permission question is open
    {"prompt": "fail now"},
    {"prompt": "refuse this"},
    {"prompt": "long one", "cancelOn": "agent_message_chunk"},
]
AFTER_RESTART = [{"prompt": "again"}]
CALLS_AFTER_RESTART = [
    {"method": "session/list", "params": {"cwd": "$CWD"}},
    {"method": "session/set_mode", "params": {"sessionId": "$SESSION", "modeId": "read-only"}},
    {
        "method": "session/set_config_option",
        "params": {"sessionId": "$SESSION", "configId": "mode", "value": "accept-edits"},
    },
    {"method": "session/resume", "params": {"sessionId": "$SESSION", "cwd": "$CWD", "mcpServers": []}},
    {"method": "session/close", "params": {"sessionId": "$SESSION"}},
]
TOUR_TEXT = "Hello from the scripted agent.\nDone."


# --- the TypeScript SDK client ------------------------------------------------------------------


@pytest.fixture(scope="session")
def ts_client() -> list[str]:
    return [node_packages(SDK_PACKAGE), str(TS_CLIENT)]


# --- the Python SDK client ----------------------------------------------------------------------


def _cache_dir() -> Path:
    if root := os.environ.get("ACP_TEST_CACHE"):
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "acp-server-tests"


@pytest.fixture(scope="session")
def py_sdk_client() -> list[str]:
    with contextlib.suppress(PackageNotFoundError):
        if version(PY_SDK) == PY_SDK_VERSION:
            return [sys.executable, str(PY_CLIENT)]
    if sys.version_info >= (3, 15):  # its Requires-Python: it cannot be installed here at all
        pytest.skip(f"{PY_SDK} {PY_SDK_VERSION} supports Python < 3.15 only")
    # Not in this environment (or another version): a venv of its own, built once and cached.
    home = _cache_dir() / f"py-sdk-{PY_SDK_VERSION}-py{sys.version_info.major}.{sys.version_info.minor}"
    python = home / "bin" / "python"
    marker = home / ".installed"
    if not marker.exists():
        may_download(f"{PY_SDK} {PY_SDK_VERSION} (a venv of its own)")
    with install_lock("py-sdk"):
        if not marker.exists():
            shutil.rmtree(home, ignore_errors=True)
            venv.create(home, with_pip=True)
            try:
                done = subprocess.run(
                    [str(python), "-m", "pip", "install", "--quiet", f"{PY_SDK}=={PY_SDK_VERSION}"],
                    capture_output=True,
                    text=True,
                    timeout=300,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                unavailable(f"pip install {PY_SDK}=={PY_SDK_VERSION} took longer than 300 s (no index?)")
            if done.returncode != 0:
                unavailable(f"pip install {PY_SDK}=={PY_SDK_VERSION} failed (no index?): {done.stderr[-1500:]}")
            marker.write_text(PY_SDK_VERSION)
    return [str(python), str(PY_CLIENT)]


# --- running a client ---------------------------------------------------------------------------


def run_client(command: list[str], config: dict[str, Any]) -> dict[str, Any]:
    config_file = Path(config["cwd"]).parent / "client-config.json"
    config_file.write_text(json.dumps(config))
    try:
        done = subprocess.run(
            [*command, f"@{config_file}"], capture_output=True, text=True, timeout=CLIENT_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{command[-1]} did not finish in {CLIENT_TIMEOUT} s; stderr: {exc.stderr!r}")
    assert done.returncode == 0, f"client exited {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    lines = done.stdout.strip().splitlines()
    assert lines, f"client printed no summary; stderr: {done.stderr}"
    summary = json.loads(lines[-1])
    summary["clientStderr"] = done.stderr[-3000:]
    return summary


def server_config(tmp_path: Path, script: dict[str, Any] | None = None) -> dict[str, Any]:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("the notes\n")
    script_file = tmp_path / "script.json"
    script_file.write_text(json.dumps(script or SCRIPT))
    return {
        "server": {
            "command": sys.executable,
            "args": [
                "-m",
                "acp_server",
                "--agent",
                "scripted",
                "--script",
                str(script_file),
                "--db",
                str(tmp_path / "journal.db"),
            ],
        },
        "cwd": str(workspace),
        "permission": "allow_once",
        "timeoutMs": 15000,
        "turns": TURNS,
        "restart": {"turns": AFTER_RESTART, "calls": CALLS_AFTER_RESTART},
    }


def unexpected_problems(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The summary's problems less the KNOWN_COMPLAINTS of its client."""

    def known(kind: str, where: str, text: str) -> bool:
        return any(
            client == summary["client"] and kind == known_kind and known_where in where and known_text in text
            for client, known_kind, known_where, known_text in KNOWN_COMPLAINTS
        )

    left = []
    for found in summary["problems"]:
        detail = found["detail"]
        if found["kind"] == "normalized":
            lost = [item for item in detail["lost"] if not known("normalized", detail["where"], item)]
            if lost:
                left.append({**found, "detail": {**detail, "lost": lost}})
        elif not (isinstance(detail, str) and known(found["kind"], "", detail)):
            left.append(found)
    return left


def check_summary(summary: dict[str, Any], tmp_path: Path, sdk_version: str) -> None:
    workspace = tmp_path / "workspace"
    stderr = "\n".join(
        [
            *(f"[{p['label']} server stderr]\n{p['stderr']}" for p in summary["processes"]),
            f"[client stderr]\n{summary['clientStderr']}",
        ]
    )
    complaints = json.dumps(summary["problems"], indent=1)
    assert unexpected_problems(summary) == [], f"the official client complained:\n{complaints}\n{stderr}"
    assert summary["sdkVersion"] == sdk_version
    servers = "".join(p["stderr"] for p in summary["processes"])
    assert "Traceback" not in servers and "ERROR" not in servers, stderr

    # initialize and session/new, as the SDK parsed them
    assert summary["initialize"]["protocolVersion"] == 1
    assert summary["initialize"]["agentCapabilities"]["loadSession"] is True
    assert summary["initialize"]["agentInfo"]["name"] == "acp-server"
    sid = summary["sessionId"]
    assert sid

    tour, guarded, failed, refused, cancelled = summary["turns"]
    # the tour: every update kind the scripted agent produces, in order
    assert tour["stopReason"] == "end_turn", tour
    assert tour["error"] is None
    assert tour["sessionIds"] == [sid]
    assert tour["agentText"] == TOUR_TEXT
    assert tour["thoughtText"] == "Planning the tour."
    kinds = tour["kinds"]
    assert kinds[:3] == ["agent_thought_chunk", "plan", "agent_message_chunk"]
    assert kinds.count("tool_call") == 3
    assert kinds[-3:] == ["usage_update", "session_info_update", "agent_message_chunk"]
    calls = {call["title"]: call for call in tour["toolCalls"]}
    assert list(calls) == ["Read notes.txt", "Write out.txt", "Echo"]
    for call in calls.values():
        assert call["statuses"] == ["pending", "in_progress", "completed"], call
    assert calls["Read notes.txt"]["kind"] == "read"
    assert calls["Read notes.txt"]["contentTypes"] == ["content"]
    assert calls["Write out.txt"]["kind"] == "edit"
    assert calls["Write out.txt"]["contentTypes"] == ["diff", "diff"]  # shown before the question, then written
    assert calls["Echo"]["kind"] == "execute"
    assert calls["Echo"]["rawOutput"] == {"exitCode": 0}

    # the permission round trips and the client's file system
    write, delete = summary["permissionRequests"]
    assert (write["title"], write["process"]) == ("Write out.txt", "first")
    assert {"allow_once", "reject_once"} <= set(write["optionKinds"])
    assert write["chosen"] is not None
    assert delete["title"] == "Delete old.txt"
    assert delete["chosen"] is None  # answered `cancelled`: the user cancelled the turn instead
    read_paths = [read["path"] for read in summary["fsReads"]]
    assert str(workspace / "notes.txt") in read_paths
    assert summary["fsWrites"] == [
        {"process": "first", "path": str(workspace / "out.txt"), "content": "written by the agent\n"}
    ]
    assert (workspace / "out.txt").read_text() == "written by the agent\n"
    assert summary["unexpectedRequests"] == []

    # cancel while the permission question is open: the server withdraws the question
    # ($/cancel_request), answers `cancelled`, never runs the tool, and shrugs off the late answer
    assert guarded["cancelled"] is True
    assert (guarded["stopReason"], guarded["error"]) == ("cancelled", None), guarded
    assert guarded["agentText"] == "Asking first. "
    [held] = guarded["toolCalls"]
    assert held["title"] == "Delete old.txt"
    assert held["statuses"][0] == "pending" and "completed" not in held["statuses"], held
    first, second = summary["processes"]
    assert "notification $/cancel_request" in first["order"]
    assert first["sent"].count("response session/request_permission") == 2

    # a failing turn is a JSON-RPC error the SDK surfaces; a refusal is a stop reason
    assert failed["stopReason"] is None
    assert failed["error"]["code"] == -32603
    assert "scripted failure for the test" in failed["error"]["message"]
    assert failed["agentText"] == "About to fail. "
    assert refused["stopReason"] == "refusal"
    assert refused["agentText"] == "No. "

    # cancel of a long turn: answered `cancelled` (not an error), at once, nothing after it
    assert cancelled["cancelled"] is True
    assert (cancelled["stopReason"], cancelled["error"]) == ("cancelled", None), cancelled
    assert cancelled["cancelToResponseMs"] < 3000
    assert cancelled["agentText"] == "Starting a long job. "

    # both processes ended on stdin EOF with status 0, and every update reached the SDK handler
    for process in (first, second):
        assert process["exit"]["code"] == 0, process
        assert process["handledUpdates"] == process["rawIncoming"]["session/update"], process
    # the only error the client sent: "no such file" while the server read out.txt's old text, for
    # the diff shown before the permission question (the write itself reads nothing)
    assert [e["error"]["code"] for e in first["outgoingErrors"]] in ([], [-32002])
    assert second["outgoingErrors"] == []

    # after the restart: session/load replays the whole conversation, then answers
    load = summary["load"]
    assert load["sessionIds"] == [sid]
    assert load["kinds"][0] == "user_message_chunk"
    assert load["userText"] == "".join(turn["prompt"] for turn in TURNS)
    assert load["agentText"].startswith(TOUR_TEXT)
    for text in ("Asking first. ", "About to fail. ", "scripted failure for the test", "No. ", "Starting a long job. "):
        assert text in load["agentText"]
    assert "never sent" not in load["agentText"]
    assert load["thoughtText"] == "Planning the tour."
    assert [(c["title"], c["statuses"][-1]) for c in load["toolCalls"][:3]] == [
        ("Read notes.txt", "completed"),
        ("Write out.txt", "completed"),
        ("Echo", "completed"),
    ]
    assert [c["title"] for c in load["toolCalls"]] == [*calls, "Delete old.txt"]
    # ACP: every replayed update comes before the session/load response; only the (live, not
    # replayed) commands list may follow it
    order = second["order"]
    answered = order.index("response session/load")
    history = [kind for kind in load["kinds"] if kind != "available_commands_update"]
    assert [label for label in order[:answered] if label != "session/update available_commands_update"] == [
        "response initialize",
        *(f"session/update {kind}" for kind in history),
    ]
    until_prompt = order[answered + 1 : order.index("response session/prompt")]
    assert set(until_prompt) <= {"session/update available_commands_update", "session/update agent_message_chunk"}
    [again] = summary["afterRestart"]
    assert (again["stopReason"], again["agentText"]) == ("end_turn", "short reply")

    # the other session methods, each response checked against the SDK's schema
    results = {call["method"]: call.get("result", call.get("error")) for call in summary["calls"]}
    assert [call["method"] for call in summary["calls"]] == [call["method"] for call in CALLS_AFTER_RESTART]
    assert [(s["sessionId"], s["cwd"], s.get("title")) for s in results["session/list"]["sessions"]] == [
        (sid, str(workspace), "Real client tour")
    ]
    assert results["session/set_mode"] == {}
    [mode] = [option for option in results["session/set_config_option"]["configOptions"] if option["id"] == "mode"]
    assert mode["currentValue"] == "accept-edits"
    assert results["session/resume"]["modes"]["currentModeId"] == "accept-edits"
    # resume tells the client its slash commands after the answer, as load does
    assert "session/update available_commands_update" in order[order.index("response session/resume") + 1 :]
    assert results["session/close"] == {}


def test_official_typescript_sdk_client(ts_client, tmp_path):
    summary = run_client(ts_client, server_config(tmp_path))
    check_summary(summary, tmp_path, locked_version(SDK_PACKAGE))


def test_official_python_sdk_client(py_sdk_client, tmp_path):
    summary = run_client(py_sdk_client, server_config(tmp_path))
    check_summary(summary, tmp_path, PY_SDK_VERSION)


# --- the harness is not blind -------------------------------------------------------------------

BROKEN_AGENT = r"""
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    method, rid = msg.get("method"), msg.get("id")
    def send(obj):
        sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": "s1"}})
    elif method == "session/prompt":
        # a text chunk without its text: invalid for every ACP schema
        send({"jsonrpc": "2.0", "method": "session/update",
              "params": {"sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk",
                                                      "content": {"type": "text"}}}})
        send({"jsonrpc": "2.0", "method": "session/update",
              "params": {"sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk",
                                                      "content": {"type": "text", "text": "ok"}}}})
        send({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})
"""


@pytest.mark.parametrize("client", ["ts_client", "py_sdk_client"])
def test_the_clients_report_an_invalid_update(client, request, tmp_path):
    """A deliberately broken agent: the SDK's complaint must reach `problems`, or the tests above prove nothing."""
    command = request.getfixturevalue(client)
    agent = tmp_path / "broken_agent.py"
    agent.write_text(BROKEN_AGENT)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    summary = run_client(
        command,
        {
            "server": {"command": sys.executable, "args": [str(agent)]},
            "cwd": str(workspace),
            "turns": [{"prompt": "hi"}],
            "timeoutMs": 10000,
        },
    )
    kinds = {found["kind"] for found in summary["problems"]}
    assert "schema" in kinds, summary["problems"]
    assert kinds & {"console.error", "log.error"}, summary["problems"]  # the SDK's own report
    [turn] = summary["turns"]
    assert turn["stopReason"] == "end_turn"
    assert turn["agentText"] == "ok"  # the invalid update never reached the handler
