"""Issue 26's "done when", end to end: an openai turn started from a stdio front (an editor's
`acp-server --runner`) asks to write a file; a remote client on the official TypeScript SDK's
`experimental/ws-client`, with a token from `acp-server pair`, loads the session mid-turn, sees it
from its start and live, and answers the question; the front's copy is withdrawn and it sees the
tool call complete and the turn end; a read-only watcher is never asked; after the runner is
killed and started again a fresh load shows every update exactly once. Real sockets, a fake model
endpoint on 127.0.0.1, every frame on both sides checked against the schema."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, reply
from installs import CLIENTS, node_packages, unavailable
from runner_fronts import Front, cli, ended, runners, short_runtime_dir, stop_runners, wait_until
from schema_check import check_agent_frame
from test_runner import is_permission, read_until, text, updates

SDK = "@agentclientprotocol/sdk"
PREAMBLE = "I will write the notes now, as you asked. "
WRITE = ("write_file", {"path": "notes.md", "content": "shared notes\n"})


@pytest.fixture
def served(tmp_path, monkeypatch):
    """The server options of one runner, its agent the openai one on a fake model endpoint."""
    run_dir = short_runtime_dir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", run_dir)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-000000")
    with FakeOpenAI() as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        try:
            yield fake, ("--agent", "openai", "--model", "gpt-4o", "--db", str(tmp_path / "journal.db"))
        finally:
            stop_runners()
            shutil.rmtree(run_dir, ignore_errors=True)


def listen(options: tuple[str, ...]) -> str:
    """`acp-server runner start --listen`; the runner's /acp address."""
    done = cli("runner", "start", "--listen", "127.0.0.1:0", *options)
    assert done.returncode == 0, done.stderr
    (status,) = runners()
    return status["listen"]["acpUrl"]


def token(*flags: str) -> str:
    done = cli("pair", "--json", *flags)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["token"]


class Remote:
    """tests/clients/remote-client.mjs over WebSocket, running beside the test: `wait_step` waits
    for one of its steps to be answered; `summary` for its end, every frame checked."""

    def __init__(self, url: str, key: str, cwd: Path, steps: list[dict[str, Any]]) -> None:
        node = node_packages(SDK)
        flags = [] if _has_websocket(node) else ["--experimental-websocket"]
        if flags and not _has_websocket(node, *flags):
            unavailable("this Node.js has no WebSocket (Node >= 20.10 is needed)", node=True)
        config = {"transport": "ws", "url": url, "cwd": str(cwd), "steps": steps, "timeoutMs": 60000}
        self.process = subprocess.Popen(
            [node, *flags, str(CLIENTS / "remote-client.mjs"), json.dumps(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "ACP_TOKEN": key},  # never in argv
        )
        self.steps: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)
            if line.startswith("step "):
                self.steps.put(line.split()[1])
        self.steps.put(None)

    def wait_step(self, call: str) -> None:
        while (done := self.steps.get(timeout=60)) != call:
            assert done is not None, f"the remote client ended first: {''.join(self.stderr)}"

    def summary(self) -> dict[str, Any]:
        out, _ = self.process.communicate(timeout=90)
        assert self.process.returncode == 0, "".join(self.stderr)
        summary = json.loads(out)
        assert summary["problems"] == [], summary["problems"]
        for frame in summary["received"]:
            answered = None if "method" in frame else summary["sent"].get(str(frame.get("id")))
            check_agent_frame(frame, answered)
        return summary


def _has_websocket(node: str, *flags: str) -> bool:
    probe = subprocess.run([node, *flags, "-e", "process.exit(typeof WebSocket === 'function' ? 0 : 1)"], check=False)
    return probe.returncode == 0


def loading(session_id: str, *then: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"call": "session/load", "params": {"sessionId": session_id, "cwd": "$CWD", "mcpServers": []}}, *then]


def shown(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [u["update"] for u in summary["updates"]]


def shown_text(shown_updates: list[dict[str, Any]]) -> str:
    chunks = [u for u in shown_updates if u["sessionUpdate"] == "agent_message_chunk"]
    return "".join(chunk["content"]["text"] for chunk in chunks)


def completed(shown_updates: list[dict[str, Any]], call_id: str) -> bool:
    return any(u.get("toolCallId") == call_id and u.get("status") == "completed" for u in shown_updates)


def test_a_turn_left_running_in_the_editor_is_answered_from_a_paired_remote_client_and_survives_a_restart(
    tmp_path, served
):
    fake, options = served
    fake.script(reply(PREAMBLE, tools=[WRITE]), reply("Done."))
    url = listen(options)
    front = Front(*options, cwd=str(tmp_path))
    session_id = front.start_session(str(tmp_path))
    asking = front.request("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "notes"}]})
    at_front = read_until(front, is_permission)  # the turn waits for an answer; nobody at the editor
    assert not (tmp_path / "notes.md").exists()

    watcher = Remote(url, token("--read-only"), tmp_path, loading(session_id, {"waitText": "Done."}))
    watcher.wait_step("session/load")  # attached while the question is out
    remote = Remote(url, token(), tmp_path, loading(session_id, {"waitText": "Done."}))
    at_front += read_until(front, lambda f: f.get("method") == "$/cancel_request")
    assert at_front[-1]["params"] == {"requestId": _asked(at_front)["id"]}  # the front's copy, withdrawn
    at_front += read_until(front, lambda f: f.get("id") == asking and "method" not in f)
    assert at_front[-1]["result"] == {"stopReason": "end_turn"}

    answered, watched = remote.summary(), watcher.summary()
    call_id = _asked(at_front)["params"]["toolCall"]["toolCallId"]
    asked_remote = [f for f in answered["received"] if f.get("method") == "session/request_permission"]
    assert [f["params"]["toolCall"]["toolCallId"] for f in asked_remote] == [call_id]  # asked there, answered there
    assert not [f for f in watched["received"] if f.get("method") == "session/request_permission"]  # never asked
    for seen in (shown(answered), shown(watched), updates(at_front)):
        assert shown_text(seen) == PREAMBLE + "Done." and completed(seen, call_id)
    assert text(at_front) == PREAMBLE + "Done."
    prompt_shown = {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "notes"}}
    assert shown(answered)[0] == {**prompt_shown, "messageId": f"{_run_of(shown(answered))}:0"}  # the prompt is :0
    assert (tmp_path / "notes.md").read_text() == "shared notes\n"
    front.close_stdin()
    assert front.wait() == 0

    [runner] = runners()
    os.kill(runner["pid"], signal.SIGKILL)
    wait_until(lambda: ended(runner["pid"]), what="the killed runner to die")
    again = Remote(listen(options), token(), tmp_path, loading(session_id, {"waitText": "Done."})).summary()
    assert _turn_updates(shown(again)) == _turn_updates(shown(answered))  # every update, exactly once


def _asked(frames: list[dict[str, Any]]) -> dict[str, Any]:
    return next(f for f in frames if is_permission(f))


def _turn_updates(shown_updates: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """What the turn showed: its text (a replay may join deltas into fewer chunks) and, in order,
    its prompt and tool calls (not the session's commands or info)."""
    kinds = ("user_message_chunk", "tool_call", "tool_call_update")
    return shown_text(shown_updates), [u for u in shown_updates if u["sessionUpdate"] in kinds]


def _run_of(seen: list[dict[str, Any]]) -> str:
    """The run id the first chunk's message id names (`RUN:N`)."""
    return next(u["messageId"] for u in seen if "messageId" in u).rsplit(":", 1)[0]
