"""The five real ACP agents (claude, codex, gemini, fast-agent, hermes-acp), which speak v1, THROUGH
acp-server to an ACP v2 client: `acp-server --agent acp -- AGENT` as a real process over real pipes,
against the fake of the agent's model API on 127.0.0.1, every frame checked against the vendored
v2 schema. Per agent: a v2 turn answered at its start and ending idle; a tool call whose question
holds the turn in `requires_action` and whose write lands; a cancel ending idle `cancelled`; after a
SIGKILL and a fresh acp-server, `session/resume` with `replayFrom` replays the earlier turns and the
next prompt reaches an agent that remembers them. Skips like tests/test_acp_runtime_real.py (CI
installs the agents).
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from acp_child import descendants
from agents import HELLO
from schema_check import check_agent_frame
from test_acp_runtime_real import (
    FIRST_WORDS,
    FRAME_TIMEOUT,
    GONE_WITHIN,
    Server,
    args,
    real,  # noqa: F401  (the fixture, per agent)
    run_dir,  # noqa: F401  (the fixture)
    server_env,
    still_running,
    write_hello,
)

V2_INIT = {"protocolVersion": 2, "info": {"name": "v2-real-test", "version": "0"}, "capabilities": {}}


class V2Server(Server):
    """The real-agent test's server, read as a v2 client reads it."""

    def next_frame(self, timeout: float = FRAME_TIMEOUT) -> dict[str, Any] | None:
        line = self._lines.get(timeout=timeout)
        if line is None:
            return None
        frame = json.loads(line)
        check_agent_frame(frame, self.methods.get(frame.get("id")) if "method" not in frame else None, version=2)
        self.frames.append(frame)
        return frame

    def initialize(self) -> None:
        assert self.call("initialize", V2_INIT)["protocolVersion"] == 2

    def read_until(self, condition: Any) -> None:
        """Read frames until `condition()`; a v2 prompt's answer comes at its start, so the turn's
        permission questions arrive here (answered with `permission_option`)."""
        while not condition():
            frame = self.next_frame()
            assert frame is not None, self.exit_report()
            if frame.get("method") == "session/request_permission":
                outcome = {"outcome": "selected", "optionId": self.permission_option}
                self.send({"jsonrpc": "2.0", "id": frame["id"], "result": {"outcome": outcome}})

    def turn(self, sid: str, text: str) -> tuple[str, list[dict[str, Any]]]:
        """Prompt, then read until the session is idle: the prompt's message id and the updates."""
        before = len(self.frames)
        message_id = self.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
        self.read_until(lambda: idle(self.frames[before:]))
        return message_id["messageId"], updates(self.frames[before:])


def updates(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f["params"]["update"] for f in frames if f.get("method") == "session/update"]


def idle(frames: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((u for u in updates(frames) if u["sessionUpdate"] == "state_update" and u["state"] == "idle"), None)


def said(shown: list[dict[str, Any]]) -> str:
    return "".join(u["content"].get("text", "") for u in shown if u["sessionUpdate"] == "agent_message_chunk")


def states(shown: list[dict[str, Any]]) -> list[str]:
    return [u["state"] for u in shown if u["sessionUpdate"] == "state_update"]


def serve(launch_args: tuple[str, ...], env: dict[str, str], work: Path) -> V2Server:
    return V2Server(*launch_args, env=env, cwd=work)


def test_a_real_agent_below_gives_a_v2_client_whole_turns_that_survive_a_restart(real, tmp_path, run_dir):  # noqa: F811
    with real.endpoint() as fake:
        launch = real.launch(tmp_path, fake.base_url)
        env, work, hello = server_env(launch, tmp_path, run_dir), launch.cwd, launch.cwd / "hello.txt"
        server = serve(args(launch, tmp_path), env, work)
        try:
            server.initialize()
            sid = server.call("session/new", {"cwd": str(work), "mcpServers": []})["sessionId"]
            fake.script(real.say("Hello from the model below."))
            message_id, shown = server.turn(sid, FIRST_WORDS)
            assert message_id.endswith(":0")
            assert said(shown) == "Hello from the model below."
            assert states(shown) == ["running", "idle"] and idle(server.frames)["stopReason"] == "end_turn"
            assert all(u["messageId"] for u in shown if u["sessionUpdate"].endswith("_chunk"))

            write_hello(real, fake, work)
            before = len(server.frames)
            _, shown = server.turn(sid, "create hello.txt")
            asked = [f["params"] for f in server.frames[before:] if f.get("method") == "session/request_permission"]
            assert len(asked) == 1 and asked[0]["title"] and asked[0]["subject"]["type"] == "tool_call"
            assert "requires_action" in states(shown) and states(shown)[-1] == "idle"
            assert hello.read_text() == HELLO

            fake.script(real.say("Thinking", hold_open=True))
            before = len(server.frames)
            server.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "wait"}]})
            server.read_until(lambda: "Thinking" in said(updates(server.frames[before:])))
            server.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
            server.read_until(lambda: idle(server.frames[before:]))
            assert idle(server.frames[before:])["stopReason"] == "cancelled"
            tree = descendants(server.process.pid)
            server.process.send_signal(signal.SIGKILL)
            server.process.wait()
            # The agent is gone before its store is touched (Gemini writes its chat file as it ends).
            assert still_running(tree, GONE_WITHIN) == set()
        finally:
            server.kill_group()

        real.between_lives(tmp_path)
        server = serve(args(launch, tmp_path), env, work)
        try:
            server.initialize()
            resume = {"sessionId": sid, "cwd": str(work), "mcpServers": [], "replayFrom": {"type": "start"}}
            server.call("session/resume", resume)
            replayed = updates(server.frames)
            users = [u["content"]["text"] for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
            assert users == [FIRST_WORDS, "create hello.txt", "wait"]
            assert replayed[-1]["sessionUpdate"] == "state_update"  # the current state, before the answer

            fake.script(real.say("It was zebra."))
            before, model_asked = len(server.frames), len(fake.model_requests)
            _, shown = server.turn(sid, "Which word?")
            assert said(shown) == "It was zebra."
            others = [u for u in shown if u["sessionUpdate"] != "agent_message_chunk"]  # a notice says why
            sent_below = json.dumps(fake.model_requests[model_asked:])
            assert "zebra" in sent_below, f"the model sees the first prompt; the turn also showed {others}"
            server.close_stdin()
            assert server.wait(timeout=30) == 0, server.exit_report()
        finally:
            server.kill_group()
