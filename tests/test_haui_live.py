"""HAUI between the agent and the editor: a scripted agent streams a reply whose hermes-ui fence
is cut into many deltas; the editor is shown Markdown, never the JSON; the journal keeps the
agent's raw text; a restart and `session/load` replays the same Markdown; `off` (the server's
`--haui` or the session's config option) passes fences through untouched, live and on replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness import FakeEditor, RemoteError, running

from acp_server.acp.handlers import AcpAgent
from acp_server.acp.prompting import AgentOptions
from acp_server.haui import render_reply
from acp_server.rpc.errors import INVALID_PARAMS
from adapters.events import TextDelta
from adapters.scripted import ScriptedAdapter
from journal import Journal

ENVELOPE = {
    "schema": "hermes.adaptive-ui",
    "version": 1,
    "blocks": [
        {"type": "stat", "label": "Tests", "value": 412, "delta": "+12", "trend": "up"},
        {"type": "table", "columns": ["Suite", "Time"], "rows": [["unit", 1.5], ["e2e", 40]]},
    ],
}
REPLY = "The run is green.\n```hermes-ui\n" + json.dumps(ENVELOPE, indent=1) + "\n```\nAnything else?"
DRAWN = (
    "The run is green.\n\n**Tests** 412 ▲ +12\n\n| Suite | Time |\n|---|---:|\n| unit | 1.5 |\n| e2e | 40 |\n"
    "\nAnything else?"
)
DELTAS = [REPLY[i : i + 7] for i in range(0, len(REPLY), 7)]  # the fence arrives in dozens of pieces
AGENT = ScriptedAdapter.from_data({"scenarios": [{"match": "", "steps": [{"say": piece} for piece in DELTAS]}]})


async def load(editor: FakeEditor, sid: str, cwd: Path) -> None:
    await editor.initialize()
    await editor.request("session/load", {"sessionId": sid, "cwd": str(cwd), "mcpServers": []})


async def run_then_reload(
    tmp_path: Path, *, options: AgentOptions | None = None, haui: str | None = None
) -> tuple[FakeEditor, FakeEditor, str, list[str]]:
    db = tmp_path / "journal.db"
    async with await Journal.open(db) as journal, running(AcpAgent(AGENT, options, journal=journal)) as live:
        await live.initialize()
        sid = await live.new_session(tmp_path)
        if haui is not None:
            await live.request("session/set_config_option", {"sessionId": sid, "configId": "haui", "value": haui})
        assert (await live.prompt(sid, "how are the tests?"))["stopReason"] == "end_turn"
    async with await Journal.open(db) as journal, running(AcpAgent(AGENT, options, journal=journal)) as later:
        await load(later, sid, tmp_path)
        raw = [record.event.text async for record in journal.events(sid) if isinstance(record.event, TextDelta)]
    return live, later, sid, raw


def chunks(editor: FakeEditor, sid: str) -> list[str]:
    return [u["content"]["text"] for u in editor.updates[sid] if u["sessionUpdate"] == "agent_message_chunk"]


async def test_the_editor_is_shown_markdown_and_never_the_models_json(tmp_path: Path) -> None:
    live, _, sid, _ = await run_then_reload(tmp_path)
    assert live.text(sid) == DRAWN == render_reply(REPLY)
    assert not any('"schema"' in chunk or '"type"' in chunk or "hermes-ui" in chunk for chunk in chunks(live, sid))


async def test_the_journal_keeps_the_agents_raw_text(tmp_path: Path) -> None:
    _, _, _, raw = await run_then_reload(tmp_path)
    assert "".join(raw) == REPLY  # (the journal may store neighbouring deltas as one)


async def test_a_reload_after_a_restart_draws_the_same_markdown(tmp_path: Path) -> None:
    live, later, sid, _ = await run_then_reload(tmp_path)
    assert later.text(sid) == live.text(sid) == DRAWN


async def test_haui_off_on_the_server_passes_fences_through_live_and_on_replay(tmp_path: Path) -> None:
    live, later, sid, _ = await run_then_reload(tmp_path, options=AgentOptions(haui=False))
    assert live.text(sid) == later.text(sid) == REPLY


async def test_a_session_can_turn_haui_off_and_its_replay_follows(tmp_path: Path) -> None:
    live, later, sid, _ = await run_then_reload(tmp_path, haui="off")
    assert live.text(sid) == later.text(sid) == REPLY


async def test_the_haui_option_is_offered_and_checked(tmp_path: Path) -> None:
    async with running(AcpAgent(AGENT, AgentOptions(haui=False))) as editor:
        await editor.initialize()
        answer = await editor.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        option: dict[str, Any] = next(o for o in answer["configOptions"] if o["id"] == "haui")
        assert (option["currentValue"], [c["value"] for c in option["options"]]) == ("off", ["on", "off"])
        params = {"sessionId": answer["sessionId"], "configId": "haui", "value": "maybe"}
        with pytest.raises(RemoteError) as error:
            await editor.request("session/set_config_option", params)
        assert error.value.code == INVALID_PARAMS
