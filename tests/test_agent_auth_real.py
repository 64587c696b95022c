"""What a user who never logged in sees of Claude, Codex and Gemini through acp-server: the real
agents (tests/agent_installs.py), unconfigured (a throw-away HOME, no key), under `acp-server
--agent acp -- AGENT` as a real process, every frame checked against the schema. Their sign-in
methods reach the editor (Claude's terminal login arranged for acp-server's command), and their
"log in first" reaches it as `auth_required` (-32000) with their own message: Claude's at the
first prompt (it opens sessions before it checks), Codex's and Gemini's at `session/new`.
Agents that are not installed skip with the reason (under CI they fail: tests/agents.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import base_env, require, work_dir
from test_acp_runtime_real import serving

from acp_server.rpc.errors import AUTH_REQUIRED

TERMINAL = {"auth": {"terminal": True}}
CLAUDE_LOGIN = {
    "id": "claude-login",
    "name": "Log in with Claude",
    "description": "Run `claude /login` in the terminal",
    "type": "terminal",
    "args": [],  # the agent's own ["--cli"] is run by acp-server, which ACP_SERVER_LOGIN tells to
    "env": {"ACP_SERVER_LOGIN": "claude-login"},
}
CODEX_CHATGPT = {
    "id": "chatgpt",
    "name": "Login with ChatGPT",
    "description": "Use your ChatGPT login with Codex CLI (requires a paid ChatGPT subscription)",
}
GEMINI_IDS = ["oauth-personal", "gemini-api-key", "vertex-ai", "gateway"]


def command(name: str) -> list[str]:
    found = str(require(name))
    return [found, "--acp"] if name == "gemini" else [found]


def answer(server: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return server.response(server.request(method, params))


@pytest.mark.parametrize("name", ["claude-agent-acp", "codex-acp", "gemini"])
def test_an_unconfigured_agent_offers_its_login_and_asks_for_it_as_auth_required(name, tmp_path):
    agent = command(name)
    root = Path(tmp_path)
    env = base_env(root / "home") | {"XDG_DATA_HOME": str(root / "data"), "XDG_CONFIG_HOME": str(root / "config")}
    work = work_dir(root)
    argv = ("--db", str(root / "journal.db"), "--agent", "acp", "--", *agent)
    with serving(*argv, env=env, cwd=work) as server:
        init = server.call("initialize", {"protocolVersion": 1, "clientCapabilities": TERMINAL})
        offered = init["authMethods"]
        new = answer(server, "session/new", {"cwd": str(work), "mcpServers": []})
        if name == "claude-agent-acp":
            assert offered == [CLAUDE_LOGIN]
            assert "result" in new, new
            sid = new["result"]["sessionId"]
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
            refused = answer(server, "session/prompt", prompt)["error"]
        else:
            refused = new["error"]
        if name == "codex-acp":
            assert offered == [CODEX_CHATGPT]  # its env_var methods are a type ACP v1 no longer has
            assert init["agentCapabilities"]["auth"] == {"logout": {}}
        if name == "gemini":
            assert [m["id"] for m in offered] == GEMINI_IDS
    assert refused["code"] == AUTH_REQUIRED, refused
    expected = "Gemini API key is missing or not configured." if name == "gemini" else "Authentication required"
    assert refused["message"] == expected
