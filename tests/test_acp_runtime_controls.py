"""What the editor sees of the agent below is what the agent offers: its modes, its config
options (next to acp-server's permission mode, which stays ours) and its commands, changed
through the agent; and the authentication it demands."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from acp_child import Runtimes
from harness import RemoteError, running

from acp_server.acp.handlers import AcpAgent
from acp_server.protocol import methods
from acp_server.rpc.errors import AUTH_REQUIRED, INVALID_PARAMS
from journal.store import Journal

FAKE_AGENT = str(Path(__file__).with_name("fake_acp_agent.py"))


@pytest.fixture
def runtimes():
    made = Runtimes()
    yield made
    made.close()


async def fake(tmp_path, runtimes, *flags: str, journal: Journal | None = None) -> AcpAgent:
    argv = (sys.executable, FAKE_AGENT, "--store", str(tmp_path / "store.json"), *flags)
    return AcpAgent(runtimes.make(argv), journal=journal)


def option_ids(options):
    return [(o["id"], o.get("category"), o["currentValue"]) for o in options]


async def test_the_editor_sees_the_agents_modes_options_and_commands(tmp_path, runtimes):
    async with running(await fake(tmp_path, runtimes, "--modes")) as editor:
        await editor.initialize()
        result = await editor.request(methods.SESSION_NEW, {"cwd": str(tmp_path), "mcpServers": []})
        assert result["modes"]["currentModeId"] == "default"
        assert [m["id"] for m in result["modes"]["availableModes"]] == ["default", "plan"]
        assert option_ids(result["configOptions"]) == [
            ("mode", "_permissions", "ask"),  # acp-server's permission mode stays ours
            ("agent-mode", "mode", "default"),  # the agent's own "mode" option, under another id
            ("model", "model", "large"),
            ("haui", None, "on"),
        ]
        model = result["configOptions"][2]
        assert [c["value"] for c in model["options"]] == ["small", "large"]  # a group, flattened
        sid = result["sessionId"]

        def announced():
            updates = [u for u in editor.updates[sid] if u["sessionUpdate"] == "available_commands_update"]
            return [c["name"] for c in updates[-1]["availableCommands"]] if updates else []

        await editor.wait_for(lambda: "review" in announced())
        assert announced() == ["help", "mode", "permissions", "status", "compact", "review"]


async def test_setting_a_mode_goes_to_the_agent_and_the_editor_sees_it_change(tmp_path, runtimes):
    async with running(await fake(tmp_path, runtimes, "--modes")) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert await editor.request(methods.SESSION_SET_MODE, {"sessionId": sid, "modeId": "plan"}) == {}
        await editor.wait_for(
            lambda: {"sessionUpdate": "current_mode_update", "currentModeId": "plan"} in editor.updates[sid]
        )
        with pytest.raises(RemoteError) as refused:
            await editor.request(methods.SESSION_SET_MODE, {"sessionId": sid, "modeId": "yolo"})
        assert refused.value.code == INVALID_PARAMS  # ours are not the agent's modes


async def test_setting_an_agent_option_goes_to_the_agent_and_ours_stay_ours(tmp_path, runtimes):
    async with running(await fake(tmp_path, runtimes, "--modes")) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        changed = await editor.request(
            methods.SESSION_SET_CONFIG_OPTION, {"sessionId": sid, "configId": "model", "value": "small"}
        )
        assert ("model", "model", "small") in option_ids(changed["configOptions"])
        ours = await editor.request(
            methods.SESSION_SET_CONFIG_OPTION, {"sessionId": sid, "configId": "mode", "value": "read-only"}
        )
        assert option_ids(ours["configOptions"])[0] == ("mode", "_permissions", "read-only")
        with pytest.raises(RemoteError) as refused:
            await editor.request(
                methods.SESSION_SET_CONFIG_OPTION, {"sessionId": sid, "configId": "model", "value": "huge"}
            )
        assert refused.value.code == INVALID_PARAMS


async def test_an_agent_without_modes_leaves_acp_server_s_modes_as_they_are(tmp_path, runtimes):
    async with running(await fake(tmp_path, runtimes)) as editor:
        await editor.initialize()
        result = await editor.request(methods.SESSION_NEW, {"cwd": str(tmp_path), "mcpServers": []})
        assert [m["id"] for m in result["modes"]["availableModes"]] == ["ask", "accept-edits", "read-only", "yolo"]
        assert option_ids(result["configOptions"]) == [("mode", "mode", "ask"), ("haui", None, "on")]


async def test_the_agents_authentication_is_passed_to_the_editor(tmp_path, runtimes):
    journal = await Journal.open(tmp_path / "journal.db")
    async with journal, running(await fake(tmp_path, runtimes, "--auth", journal=journal)) as editor:
        init = await editor.initialize()
        assert init["authMethods"] == [{"id": "login", "name": "Log in", "description": "Opens a browser"}]
        with pytest.raises(RemoteError) as refused:
            await editor.new_session(tmp_path)
        assert refused.value.code == AUTH_REQUIRED
        assert refused.value.message == "Authentication required: log in first"
        assert await editor.request(methods.AUTHENTICATE, {"methodId": "login"}) == {}
        sid = await editor.new_session(tmp_path)
        assert (await editor.prompt(sid, "hi"))["stopReason"] == "end_turn"
        listed = await editor.request(methods.SESSION_LIST, {})
        assert [s["sessionId"] for s in listed["sessions"]] == [sid], "the refused session was not kept"
