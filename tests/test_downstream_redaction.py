"""What an ACP agent below acp-server says outside its turns reaches the editor redacted, as its
turns do: the stderr line quoted when it fails to start, its modes' and commands' descriptions;
a mode whose id is a secret is left out (a redacted id would name nothing at the agent)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from acp_child import Runtimes
from harness import RemoteError, running

from acp_server.acp.handlers import AcpAgent
from acp_server.protocol import methods

FAKE_AGENT = str(Path(__file__).with_name("fake_acp_agent.py"))
SECRETS = ("sk-proj-" + "Q7w8E9r0T1y2U3i4O5p6", "password=hunter22", "ghp_" + "Aa1Bb2Cc3Dd4Ee5Ff6Gg7Hh8")


@pytest.fixture
def runtimes():
    made = Runtimes()
    yield made
    made.close()


async def test_the_agents_stderr_line_in_a_start_up_error_is_redacted(tmp_path, runtimes):
    line = "fatal: " + " ".join(SECRETS)
    argv = ("/bin/sh", "-c", f"echo '{line}' >&2; exit 3")
    async with running(AcpAgent(runtimes.make(argv))) as editor:
        await editor.initialize()
        with pytest.raises(RemoteError) as failed:
            await editor.new_session(tmp_path)
    message = str(failed.value)
    assert "fatal: [REDACTED] password=[REDACTED] [REDACTED]" in message
    assert not [secret for secret in SECRETS if secret[-8:] in message]


async def test_the_agents_modes_and_commands_reach_the_editor_redacted(tmp_path, runtimes):
    argv = (sys.executable, FAKE_AGENT, "--store", str(tmp_path / "store.json"), "--modes", "--leaky")
    async with running(AcpAgent(runtimes.make(argv))) as editor:
        await editor.initialize()
        result = await editor.request(methods.SESSION_NEW, {"cwd": str(tmp_path), "mcpServers": []})
        sid = result["sessionId"]

        def deploy() -> list[str]:
            updates = [u for u in editor.updates[sid] if u["sessionUpdate"] == "available_commands_update"]
            listed = updates[-1]["availableCommands"] if updates else []
            return [c["description"] for c in listed if c["name"] == "deploy"]

        await editor.wait_for(deploy)
    modes = {m["id"]: m.get("description") for m in result["modes"]["availableModes"]}
    assert modes == {
        "default": "Asks before edits",
        "plan": "Plans, changes nothing",
        "careful": "uses password=[REDACTED] for the db",
    }
    assert deploy() == ["deploy with [REDACTED]"]
    shown = str(result) + str(editor.updates[sid])
    assert not [body for body in ("L3akyModeK3y", "hunter22", "D3pl0yT0k3n") if body in shown]
