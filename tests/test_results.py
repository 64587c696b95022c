"""The results the server answers, compared whole: built from the result models, they carry
exactly the fields the protocol defines, leaving out optional ones that have nothing to say."""

from __future__ import annotations

from contextlib import asynccontextmanager

from harness import running

import acp_server
from acp_server.acp.handlers import AcpAgent
from adapters.base import AdapterCapabilities, ConfigChoice, ConfigOption, SlashCommand
from adapters.scripted import ScriptedAdapter
from journal.store import Journal

SCRIPT = {"scenarios": [{"match": "", "steps": [{"say": "ok"}]}]}

MODE_CHOICES = [
    {
        "value": "ask",
        "name": "Ask",
        "description": "Ask before edits, deletions and commands; reads and searches go ahead.",
    },
    {
        "value": "accept-edits",
        "name": "Accept edits",
        "description": "File edits go ahead; commands and deletions still ask.",
    },
    {
        "value": "read-only",
        "name": "Read only",
        "description": "No edits and no commands at all; reads and searches go ahead.",
    },
    {
        "value": "yolo",
        "name": "Yolo",
        "description": "Nothing asks: every tool runs (answers you gave with 'always reject' still hold).",
    },
]


class BareOptionsAdapter(ScriptedAdapter):
    """Declares an option, a choice and a command whose optional texts are empty."""

    def capabilities(self) -> AdapterCapabilities:
        return AdapterCapabilities(
            image=True,
            config_options=(
                ConfigOption(
                    "speed",
                    "Speed",
                    (ConfigChoice("fast", "Fast", description=""), ConfigChoice("slow", "Slow", description="Careful")),
                    "fast",
                    description="",
                    category="",
                ),
            ),
            commands=(SlashCommand("plain", "No hint", hint=""),),
        )


@asynccontextmanager
async def durable(db_path, adapter):
    journal = await Journal.open(db_path)
    try:
        async with running(AcpAgent(adapter, journal=journal)) as editor:
            yield editor
    finally:
        await journal.close()


def mode_option(current: str) -> dict:
    return {
        "id": "mode",
        "name": "Mode",
        "category": "mode",
        "type": "select",
        "description": "How cautious the agent is: what it may do without asking.",
        "currentValue": current,
        "options": MODE_CHOICES,
    }


def haui_option(current: str) -> dict:
    return {
        "id": "haui",
        "name": "Rich replies",
        "type": "select",
        "description": "Draw the agent's HAUI blocks (stats, tables, charts) as Markdown; off shows them as written.",
        "currentValue": current,
        "options": [
            {"value": "on", "name": "On", "description": "Blocks drawn as tables, lists and quotes"},
            {"value": "off", "name": "Off", "description": "Fences passed through untouched"},
        ],
    }


async def test_initialize_answers_the_whole_capability_object_with_a_journal(tmp_path):
    async with durable(tmp_path / "j.db", ScriptedAdapter.from_data(SCRIPT)) as editor:
        assert await editor.initialize() == {
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
                "mcpCapabilities": {"http": False, "sse": False},
                "sessionCapabilities": {
                    "list": {},
                    "resume": {},
                    "close": {},
                    "delete": {},
                    "additionalDirectories": {},
                },
            },
            "authMethods": [],
            "agentInfo": {"name": "acp-server", "title": "acp-server (scripted)", "version": acp_server.__version__},
        }


async def test_initialize_without_a_journal_offers_no_durable_session_methods():
    async with running(AcpAgent(ScriptedAdapter.from_data(SCRIPT))) as editor:
        caps = (await editor.initialize())["agentCapabilities"]
        assert caps["loadSession"] is False
        assert caps["sessionCapabilities"] == {"additionalDirectories": {}}


async def test_empty_descriptions_categories_and_hints_are_left_out_of_options_and_commands(tmp_path):
    async with running(AcpAgent(BareOptionsAdapter.from_data(SCRIPT))) as editor:
        await editor.initialize()
        created = await editor.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        assert created == {
            "sessionId": created["sessionId"],
            "modes": {
                "currentModeId": "ask",
                "availableModes": [
                    {"id": c["value"], "name": c["name"], "description": c["description"]} for c in MODE_CHOICES
                ],
            },
            "configOptions": [
                mode_option("ask"),
                {
                    "id": "speed",
                    "name": "Speed",
                    "type": "select",
                    "currentValue": "fast",
                    "options": [
                        {"value": "fast", "name": "Fast"},
                        {"value": "slow", "name": "Slow", "description": "Careful"},
                    ],
                },
                haui_option("on"),  # the server's own switch, after the agent's options
            ],
        }
        sid = created["sessionId"]
        await editor.wait_for(lambda: editor.updates[sid])
        (announced,) = editor.updates[sid]
        assert announced["availableCommands"][-1] == {"name": "plain", "description": "No hint"}


async def test_session_list_leaves_out_a_missing_title_and_empty_additional_directories(tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    async with durable(tmp_path / "j.db", ScriptedAdapter.from_data(SCRIPT)) as editor:
        await editor.initialize()
        bare = await editor.new_session(tmp_path)
        titled = (
            await editor.request(
                "session/new", {"cwd": str(tmp_path), "mcpServers": [], "additionalDirectories": [str(extra)]}
            )
        )["sessionId"]
        await editor.prompt(titled, "hello there")
        listed = await editor.request("session/list", {})
        assert set(listed) == {"sessions"}
        by_id = {info["sessionId"]: info for info in listed["sessions"]}
        assert set(by_id[bare]) == {"sessionId", "cwd", "updatedAt"}
        assert by_id[titled]["title"] == "hello there"
        assert by_id[titled]["additionalDirectories"] == [str(extra)]


async def test_set_mode_and_set_config_option_answer_their_result_objects(tmp_path):
    async with running(AcpAgent(BareOptionsAdapter.from_data(SCRIPT))) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        assert await editor.request("session/set_mode", {"sessionId": sid, "modeId": "yolo"}) == {}
        result = await editor.request(
            "session/set_config_option", {"sessionId": sid, "configId": "speed", "value": "slow"}
        )
        assert result["configOptions"][0] == mode_option("yolo")
        assert result["configOptions"][1]["currentValue"] == "slow"
