"""What an ACP agent below adds to its updates for its own clients (`_meta` keys, a vendor's
fields the schema allows) reaches the editor beside what acp-server shows, and a restart's
`session/load` replays it the same from the journal, redacted as the rest; a `_meta` the schema
forbids is left out."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from acp_child import Runtimes
from harness import running

from acp_server.acp.handlers import AcpAgent
from journal.store import Journal

FAKE_AGENT = str(Path(__file__).with_name("fake_acp_agent.py"))
META = {"vendor.example/trace": {"span": "abc", "depth": 2}}
ENTRY = {"content": "Index the repo", "status": "completed", "priority": "high"}


def shown(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    kinds = ("tool_call", "tool_call_update", "plan")
    return [{k: v for k, v in u.items() if k != "toolCallId"} for u in updates if u["sessionUpdate"] in kinds]


async def test_an_agents_meta_and_vendor_fields_reach_the_editor_and_a_reload(tmp_path: Path) -> None:
    argv = (sys.executable, FAKE_AGENT, "--store", str(tmp_path / "store.json"))
    runtimes = Runtimes()
    db = tmp_path / "journal.db"
    try:
        async with await Journal.open(db) as journal, running(AcpAgent(runtimes.make(argv), journal=journal)) as live:
            await live.initialize()
            sid = await live.new_session(tmp_path)
            await live.prompt(sid, "vendor fields")
        async with await Journal.open(db) as journal, running(AcpAgent(runtimes.make(argv), journal=journal)) as again:
            await again.initialize()
            await again.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
    finally:
        runtimes.close()
    expected = [
        {
            "sessionUpdate": "tool_call",
            "title": "Index",
            "kind": "search",
            "status": "pending",
            "_meta": META,
            "vendorHint": {"lane": "fast"},
        },
        {
            "sessionUpdate": "tool_call_update",
            "status": "completed",
            "_meta": {"vendor.example/ms": 12, "key": "[REDACTED]"},  # redacted like the rest
            "vendorNote": "cached",
        },
        {"sessionUpdate": "plan", "entries": [ENTRY], "_meta": META, "vendorHint": {"lane": "fast"}},
        {"sessionUpdate": "plan", "entries": [ENTRY]},  # its `_meta` was a string
    ]
    assert shown(live.updates[sid]) == expected
    assert shown(again.updates[sid]) == expected
