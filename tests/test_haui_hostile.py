"""Replies built to break HAUI: JSON nested ten thousand deep, numbers no sparkline can scale, a
block whose drawing raises, a reply of thousands of deltas on one line. Each is shown (as text
when it cannot be drawn), its turn ends normally, the session loads again after a restart and
`show` prints it; and live and replayed, the editor is shown the same updates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harness import FakeEditor, running

from acp_server.acp.handlers import AcpAgent
from acp_server.haui import render as haui_render
from acp_server.haui import render_fence, render_reply
from acp_server.haui.blocks import RENDERERS
from acp_server.haui.envelope import MAX_NESTING, read_envelope
from adapters.scripted import ScriptedAdapter
from journal import Journal
from tests.haui_cases import envelope, fence

DEEP = fence("[" * 10_000 + "]" * 10_000)  # 20 KB, under the 32 KB cap
STAT = {"type": "stat", "label": "Tests", "value": 412, "delta": "+12"}


def agent_saying(*pieces: str, repeat: int = 1) -> ScriptedAdapter:
    steps = [{"say": piece, "repeat": repeat} for piece in pieces]
    return ScriptedAdapter.from_data({"scenarios": [{"match": "", "steps": steps}]})


async def live_then_reload(tmp_path: Path, agent: ScriptedAdapter) -> tuple[FakeEditor, FakeEditor, str]:
    """A turn of `agent`, then a new server on the same journal loading the session."""
    db = tmp_path / "journal.db"
    async with await Journal.open(db) as journal, running(AcpAgent(agent, journal=journal)) as live:
        await live.initialize()
        sid = await live.new_session(tmp_path)
        assert (await live.prompt(sid, "go"))["stopReason"] == "end_turn"
    async with await Journal.open(db) as journal, running(AcpAgent(agent, journal=journal)) as later:
        await later.initialize()
        await later.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
    return live, later, sid


TURN_UPDATES = ("agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan")


def merged(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turn's updates with neighbouring message chunks joined (replay merges deltas): what
    an editor draws of the turn."""
    shown: list[dict[str, Any]] = []
    for update in updates:
        if update["sessionUpdate"] not in TURN_UPDATES:
            continue
        if (
            update["sessionUpdate"] == "agent_message_chunk"
            and shown
            and shown[-1]["sessionUpdate"] == update["sessionUpdate"]
        ):
            text = shown[-1]["content"]["text"] + update["content"]["text"]
            shown[-1] = {**shown[-1], "content": {"type": "text", "text": text}}
        else:
            shown.append(update)
    return shown


def test_json_nested_deeper_than_the_limit_is_not_parsed_and_is_shown_as_its_words() -> None:
    def nested(depth: int) -> str:
        return json.dumps(envelope({"type": "notice", "body": "Deep", "x": json.loads("[" * depth + "]" * depth)}))

    assert read_envelope(nested(MAX_NESTING - 3)).blocks  # the envelope, its blocks and the block: 3 levels
    assert read_envelope(nested(MAX_NESTING - 2)).rejected == "not JSON"
    assert render_fence("haui", nested(MAX_NESTING - 2)) == "_(shown as text)_ Deep"
    assert render_reply("Look:\n" + DEEP + "Done.") == "Look:\nDone."
    assert render_reply(fence("[" * 10_000, "vivid")) == ""
    brackets_in_strings = envelope({"type": "notice", "body": "[" * 5_000 + "{" * 5_000})
    assert render_fence("haui", json.dumps(brackets_in_strings)).endswith("[" * 3_998 + "…")  # strings don't nest


@pytest.mark.parametrize(
    "values", ["[NaN, 1]", "[Infinity, 1]", "[-Infinity, 1]", f"[1{'0' * 400}, 1]", "[1e308, -1e308]"]
)
def test_a_chart_with_numbers_no_sparkline_can_scale_is_shown_without_an_error(values: str) -> None:
    body = '{"type": "chart", "labels": ["a", "b"], "series": [{"name": "s", "values": ' + values + "}]}"
    shown = render_fence("haui", body)
    assert shown is not None and ("_(shown as text)_ a · b · s" in shown or "- s: `█▁`" in shown)


async def test_a_fence_nested_ten_thousand_deep_ends_its_turn_normally_and_the_session_loads_again(
    tmp_path: Path,
) -> None:
    live, later, sid = await live_then_reload(tmp_path, agent_saying("Look:\n", DEEP, "Done."))
    assert live.text(sid) == later.text(sid) == "Look:\nDone."


def test_show_prints_a_session_with_that_fence_and_no_traceback(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"scenarios": [{"match": "", "steps": [{"say": "Look:\n" + DEEP + "Done."}]}]}))
    db = str(tmp_path / "journal.db")

    def acp(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "acp_server", *args, "--db", db]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=tmp_path, env=os.environ)

    prompted = acp("prompt", "--agent", "scripted", "--script", str(script), "go")
    assert prompted.returncode == 0 and prompted.stdout.startswith("Look:\nDone."), prompted.stderr
    sid = json.loads(acp("sessions", "--json").stdout)["sessionId"]
    shown = acp("show", sid)
    assert (shown.returncode, "Traceback" in shown.stderr) == (0, False), shown.stderr
    assert "Look:\nDone." in shown.stdout


def _raise(props: dict[str, Any]) -> str:
    raise RuntimeError("a renderer with a bug")


async def test_a_block_whose_drawing_raises_is_shown_as_text_live_and_on_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(RENDERERS, "stat", _raise)
    reply = "Numbers:\n" + fence(envelope(STAT, {"type": "notice", "body": "Fine."})) + "End."
    live, later, sid = await live_then_reload(tmp_path, agent_saying(reply))
    drawn = "Numbers:\n\n_(shown as text)_ Tests · 412 · +12\n\n> **Note:**\n>\n> Fine.\n\nEnd."
    assert live.text(sid) == later.text(sid) == drawn


async def test_a_fence_whose_reading_raises_is_shown_as_its_words_live_and_on_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(body: str) -> Any:
        raise RecursionError("an envelope reader with a bug")

    monkeypatch.setattr(haui_render, "read_envelope", broken)
    live, later, sid = await live_then_reload(tmp_path, agent_saying("Numbers:\n" + fence(envelope(STAT))))
    assert live.text(sid) == later.text(sid) == "Numbers:\n\n_(shown as text)_ Tests · +12\n"


async def test_a_long_one_line_reply_is_shown_the_same_live_and_replayed(tmp_path: Path) -> None:
    agent = ScriptedAdapter.from_data(
        {
            "scenarios": [
                {
                    "match": "",
                    "steps": [
                        {"say": "word ", "repeat": 5_000},
                        {"say": "\n"},
                        {"say": "`", "repeat": 3},
                        {"say": "hermes-ui\n"},
                        {"say": json.dumps(envelope(STAT))[:20]},
                        {"tool": "Look", "kind": "other", "result": "seen"},  # inside the fence
                        *({"say": piece} for piece in json.dumps(envelope(STAT))[20:]),
                        {"say": "\n```\n"},
                        {"say": " ", "repeat": 2_000},
                        {"say": "tail ", "repeat": 2_000},
                    ],
                }
            ]
        }
    )
    live, later, sid = await live_then_reload(tmp_path, agent)
    assert merged(live.updates[sid]) == merged(later.updates[sid])
    assert "tool_call" in [update["sessionUpdate"] for update in merged(later.updates[sid])]
    assert live.text(sid) == "word " * 5_000 + "\n\n**Tests** 412 +12\n\n" + " " * 2_000 + "tail " * 2_000
