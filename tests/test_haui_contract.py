"""The HAUI contract text agents add for the `vivid` response style: only there, with the rules
the issue names, and with an example the server's renderer draws."""

from __future__ import annotations

import re

from acp_server.haui import render_reply
from adapters.haui_contract import HAUI_CONTRACT, RESPONSE_STYLES, style_context


def test_only_vivid_adds_the_contract_and_rich_asks_for_markdown() -> None:
    assert RESPONSE_STYLES == ("plain", "rich", "vivid")
    assert [HAUI_CONTRACT in style_context(style) for style in RESPONSE_STYLES] == [False, False, True]
    assert "Markdown" in style_context("rich") and "hermes-ui" not in style_context("rich")
    assert style_context("plain") == style_context("unknown") == ""


def test_the_contract_asks_for_blocks_on_substantive_replies_without_invented_data_or_claimed_actions() -> None:
    assert "substantive" in HAUI_CONTRACT
    assert "Never invent data" in HAUI_CONTRACT
    assert "Never claim an action" in HAUI_CONTRACT


def test_the_contracts_example_is_drawn_by_the_renderer() -> None:
    example = re.search(r"```hermes-ui\n.*?\n```\n", HAUI_CONTRACT, re.DOTALL)
    assert example is not None
    assert render_reply(example.group(0)) == "**Tests passing** 412 ▲ +12\n"
