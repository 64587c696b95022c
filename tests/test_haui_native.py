"""HAUI blocks for a client that draws them itself (the workbench page): a drawn fence's chunk
carries its blocks in `_meta["acp-server"]["haui"]` beside the Markdown every editor shows, a
fence opening is announced by an empty chunk, and a restart + `session/load` replays the very
same blocks. Every frame is checked against the ACP schema by the fake editor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from harness import FakeEditor, running
from test_reattach import asked, hub_serving, params

from acp_server.acp.handlers import AcpAgent
from acp_server.haui import render_reply
from acp_server.haui.native import draw_fence
from adapters.scripted import ScriptedAdapter
from journal import Journal
from tests.haui_cases import BLOCKS, envelope, fence

CHART = {
    "type": "chart",
    "title": "Visits",
    "labels": ["Mon", "Tue", "Wed"],
    "series": [{"name": "Web", "values": [3, None, 9]}, {"name": "App", "values": [1, 2.5, 3]}],
}
ACTIONS = {
    "type": "actions",
    "actions": [
        {"type": "open_url", "label": "Runbook", "url": "https://example.com/runbook"},
        {"type": "open_url", "label": "Evil", "url": "javascript:alert(1)"},
        {"type": "copy", "label": "Command", "value": "git push\r\n--force"},
        {"type": "ask", "prompt": "Show March too"},
    ],
}
STATS = [
    {"type": "stat", "label": "Tests", "value": 412, "delta": "+12", "trend": "up"},
    {"type": "stat", "label": "Failures", "value": 0},
]
ODD = {"type": "odd", "fallback": "An *odd* block"}
REPLY = "Numbers:\n" + fence(envelope(*STATS, CHART, ACTIONS, ODD)) + "Done.\n"


def agent(reply: str) -> ScriptedAdapter:
    pieces = [reply[i : i + 9] for i in range(0, len(reply), 9)]  # the fence arrives in many deltas
    return ScriptedAdapter.from_data({"scenarios": [{"match": "", "steps": [{"say": p} for p in pieces]}]})


async def live_then_reload(tmp_path: Path, reply: str) -> tuple[FakeEditor, FakeEditor, str]:
    db = tmp_path / "journal.db"
    async with await Journal.open(db) as journal, running(AcpAgent(agent(reply), journal=journal)) as live:
        await live.initialize()
        sid = await live.new_session(tmp_path)
        assert (await live.prompt(sid, "go"))["stopReason"] == "end_turn"
    async with await Journal.open(db) as journal, running(AcpAgent(agent(reply), journal=journal)) as later:
        await later.initialize()
        await later.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
    return live, later, sid


def haui(editor: FakeEditor, sid: str) -> list[dict[str, Any]]:
    return [
        u["_meta"]["acp-server"]["haui"]
        for u in editor.updates[sid]
        if u["sessionUpdate"] == "agent_message_chunk" and "haui" in u.get("_meta", {}).get("acp-server", {})
    ]


async def test_a_drawn_fence_carries_its_blocks_beside_the_markdown_and_a_reload_replays_the_same(
    tmp_path: Path,
) -> None:
    live, later, sid = await live_then_reload(tmp_path, REPLY)
    assert live.text(sid) == later.text(sid) == render_reply(REPLY)  # every other client: Markdown as before
    shown = haui(live, sid)
    assert shown == haui(later, sid)
    assert shown[0] == {"opened": True}
    blocks = shown[1]["blocks"]
    assert [b["type"] for b in blocks] == ["stat", "stat", "chart", "actions", "text"]
    assert blocks[0] == {"type": "stat", "id": "b0", "label": "Tests", "value": "412", "delta": "+12", "trend": "up"}
    assert blocks[2]["series"] == [{"name": "Web", "values": [3, None, 9]}, {"name": "App", "values": [1, 2.5, 3]}]
    assert blocks[2]["labels"] == ["Mon", "Tue", "Wed"]


async def test_an_action_the_link_rule_refuses_never_reaches_the_blocks(tmp_path: Path) -> None:
    live, _, sid = await live_then_reload(tmp_path, REPLY)
    actions = haui(live, sid)[1]["blocks"][3]["actions"]
    assert actions == [
        {"action": "open_url", "label": "Runbook", "url": "https://example.com/runbook"},
        {"action": "copy", "label": "Command", "value": "git push\n--force"},
        {"action": "ask", "label": "Show March too", "prompt": "Show March too"},
    ]
    assert "javascript" not in json.dumps(haui(live, sid))


async def test_a_block_that_cannot_be_drawn_is_the_markdown_shown_for_it(tmp_path: Path) -> None:
    live, _, sid = await live_then_reload(tmp_path, REPLY)
    assert haui(live, sid)[1]["blocks"][4] == {"type": "text", "id": "b4", "text": "An *odd* block"}


async def test_a_session_loaded_while_its_reply_is_inside_a_fence_shows_the_fence_once_when_it_closes(
    tmp_path: Path,
) -> None:
    body = json.dumps(envelope(*STATS))
    gate = {"tool": "Edit notes", "kind": "edit", "ask": True, "input": {"path": "notes"}, "result": "edited"}
    steps = [
        {"say": "Counting.\n```hermes-ui\n"},
        {"say": body[:30]},
        gate,
        {"say": body[30:]},
        {"say": "\n```\nDone."},
    ]
    script = {"scenarios": [{"match": "", "steps": steps}]}
    async with hub_serving(tmp_path, script) as hub, running(hub.agent()) as first, running(hub.agent()) as second:
        await first.initialize()
        sid = await first.new_session(tmp_path)
        first.never_answer("session/request_permission")
        turn = await first.start_prompt(sid, "count")
        await asked(first)  # the reply is inside its fence
        await second.initialize()
        await second.request("session/load", params(sid, tmp_path))
        assert haui(second, sid) == [{"opened": True}]  # the placeholder, never half the blocks
        first.handlers["session/request_permission"] = first.allow_once
        second.handlers["session/request_permission"] = second.allow_once
        await second.wait_for(lambda: "Done." in second.text(sid))
        with anyio.fail_after(10):
            await turn
    assert second.text(sid) == first.text(sid) == render_reply("Counting.\n```hermes-ui\n" + body + "\n```\nDone.")
    assert haui(second, sid) == haui(first, sid)
    assert [h.get("opened") or [b["label"] for b in h["blocks"]] for h in haui(second, sid)] == [
        True,
        ["Tests", "Failures"],
    ]


def test_every_block_type_is_drawn_natively_with_plain_text_and_nothing_of_the_models_own_keys() -> None:
    for name, reply in BLOCKS.items():
        opener, body = reply.split("\n", 1)
        drawn = draw_fence("vivid" if "vivid" in opener else "haui", body.rsplit("```", 1)[0])
        assert drawn is not None and drawn.blocks, name
        assert all(b["type"] != "text" for b in drawn.blocks if name != "stat"), (name, drawn.blocks)
        json.dumps(drawn.blocks, allow_nan=False)  # plain JSON: no NaN, nothing but JSON values


def test_a_tables_numeric_columns_and_caps_are_the_renderers() -> None:
    rows = [[f"r{i}", i, "x"] for i in range(60)]
    body = json.dumps(envelope({"type": "table", "columns": ["a", "b", "c"], "rows": rows}))
    drawn = draw_fence("haui", body)
    assert drawn is not None
    (table,) = drawn.blocks
    assert table["numeric"] == [False, True, False]
    assert len(table["rows"]) == 50 and table["note"] == "Showing 50 of 60 rows and 3 of 3 columns."


def test_a_fence_that_is_no_envelope_is_one_text_block_of_its_markdown() -> None:
    drawn = draw_fence("haui", '{"schema": "other", "blocks": [{"type": "stat", "label": "A", "value": 1}]}')
    assert drawn is not None and drawn.blocks == ({"type": "text", "id": "b0", "text": drawn.markdown},)
