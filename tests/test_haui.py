"""The HAUI renderer: every block type and every repaired slip against golden Markdown, the
contract's limits and fallbacks, unsafe links dropped, no HTML and no model JSON shown."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from acp_server.haui import render_reply
from acp_server.haui.envelope import read_envelope
from tests.haui_cases import BLOCKS, SLIPS, envelope, fence

GOLDEN = Path(__file__).parent / "golden" / "haui"


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_each_block_type_is_drawn_as_its_golden_markdown(name: str) -> None:
    assert render_reply(BLOCKS[name]) == (GOLDEN / f"{name}.md").read_text()


@pytest.mark.parametrize("name", sorted(SLIPS))
def test_each_common_slip_is_repaired_before_drawing(name: str) -> None:
    assert render_reply(SLIPS[name]) == (GOLDEN / "slip.md").read_text()


def test_text_around_a_fence_streams_unchanged_and_the_block_gets_blank_lines() -> None:
    reply = "Here are the numbers:\n" + fence(envelope({"type": "stat", "label": "Up", "value": 3})) + "That is all."
    assert render_reply(reply) == "Here are the numbers:\n\n**Up** 3\n\nThat is all."


def test_an_ordinary_json_fence_and_other_code_stay_as_written() -> None:
    reply = '```json\n{"a": 1}\n```\n```python\n```hermes-ui\nprint(1)\n```\n'
    assert render_reply(reply) == reply


def test_a_table_keeps_at_most_eight_columns_and_fifty_rows() -> None:
    columns = [f"c{i}" for i in range(10)]
    rows = [list(range(10)) for _ in range(60)]
    markdown = render_reply(fence(envelope({"type": "table", "columns": columns, "rows": rows})))
    lines = markdown.splitlines()
    assert lines[0] == "| c0 | c1 | c2 | c3 | c4 | c5 | c6 | c7 |"
    assert lines[1] == "|---:|---:|---:|---:|---:|---:|---:|---:|"
    assert lines[2:52] == ["| 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 |"] * 50
    assert lines[52:] == ["", "_Showing the first 50 rows and 8 columns of 60 rows and 10 columns._"]


def test_at_most_sixteen_blocks_are_drawn() -> None:
    blocks = [{"type": "stat", "label": f"s{i}", "value": i} for i in range(18)]
    markdown = render_reply(fence(envelope(*blocks)))
    assert markdown == " · ".join(f"**s{i}** {i}" for i in range(16)) + "\n\n_(2 more blocks not shown)_\n"


def test_invalid_ids_are_renamed_and_repeats_made_unique() -> None:
    read = read_envelope(
        json.dumps(envelope(*({"type": "notice", "id": i, "body": "x"} for i in ["ok", "ok", "bad id!", "x" * 65, 7])))
    )
    assert [block.id for block in read.blocks] == ["ok", "ok-1", "b2", "b3", "b4"]


def test_text_props_are_trimmed_to_300_characters_and_bodies_to_4000() -> None:
    markdown = render_reply(fence(envelope({"type": "notice", "title": "t" * 400, "body": "b" * 5000})))
    assert markdown == f"> **Note:** {'t' * 299}…\n>\n> {'b' * 3999}…\n"


def test_a_fence_body_over_32_kb_is_rejected() -> None:
    markdown = render_reply(fence(envelope({"type": "notice", "body": "x" * 33_000})))
    assert markdown == "_(a rich reply block was too large to show)_\n"


def test_another_schema_or_version_is_rejected_and_shown_as_text() -> None:
    other = {"schema": "acme.ui", "version": 1, "blocks": [{"type": "notice", "body": "Hello"}]}
    assert render_reply(fence(other)) == "_(shown as text)_ Hello\n"
    later = {"version": 2, "blocks": [{"type": "notice", "body": "Hello"}]}
    assert render_reply(fence(later)) == "_(shown as text)_ Hello\n"


def test_an_unknown_type_shows_its_fallback_else_its_words_as_text() -> None:
    markdown = render_reply(
        fence(
            envelope(
                {"type": "stat", "label": "Fine", "value": 1},
                {"type": "gauge", "value": 70, "fallback": "Load is **70%**."},
                {"type": "gauge", "label": "Disk", "value": 12},
                {"type": "table", "columns": ["A"], "rows": "not rows", "title": "Broken"},
            )
        )
    )
    assert (
        markdown
        == "**Fine** 1\n\nLoad is **70%**.\n\n_(shown as text)_ Disk · 12\n\n_(shown as text)_ A · not rows · Broken\n"
    )


def test_an_envelope_with_no_usable_block_is_shown_as_text_as_a_whole() -> None:
    markdown = render_reply(fence(envelope({"type": "gauge", "label": "Disk"}, {"type": "chart", "title": "Empty"})))
    assert markdown == "_(shown as text)_ Disk · Empty\n"


def test_text_that_is_not_json_is_shown_as_its_words() -> None:
    assert render_reply(fence('{"type": "notice" "body": "Hi" ]]')) == "_(shown as text)_ Hi\n"


def test_disclosures_nest_at_most_two_levels() -> None:
    third = {"type": "disclosure", "title": "L3", "body": "deep"}
    second = {"type": "disclosure", "title": "L2", "blocks": [third]}
    markdown = render_reply(fence(envelope({"type": "disclosure", "title": "L1", "blocks": [second]})))
    assert markdown == "#### L1\n\n##### L2\n\n_(shown as text)_ L3 · deep\n"


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "data:text/html,<b>x</b>",
        "file:///etc/passwd",
        "https://user:secret@example.com/",
        "https://token@example.com/",
        "ftp://example.com/",
        "https://exa mple.com/",
        "https://example.com/a)b",
        "//example.com/",
    ],
)
def test_unsafe_links_are_dropped(url: str) -> None:
    actions = [
        {"type": "open_url", "label": "Bad", "url": url},
        {"type": "open_url", "label": "Good", "url": "http://example.com/"},
    ]
    assert render_reply(fence(envelope({"type": "actions", "actions": actions}))) == "- [Good](http://example.com/)\n"


def test_an_actions_block_with_no_usable_item_shows_its_labels_as_text_never_the_refused_urls() -> None:
    items = [
        {"label": "Script", "action": "open_url", "value": "javascript:alert(1)"},
        {"label": "Login", "action": "open_url", "value": "https://user:pw@example.com/"},
        {"label": "Old form", "type": "open_url", "url": "https://token@example.com/"},
    ]
    markdown = render_reply(fence(envelope({"type": "actions", "items": items})))
    assert markdown == "_(shown as text)_ Script · Login · Old form\n"


def test_shown_as_text_drops_the_urls_the_link_rule_refuses_and_keeps_other_words() -> None:
    label = "See (JavaScript:alert(1)), https://ok.example/a or https://u:p@x.example/. Status:ok data:x //evil"
    markdown = render_reply(fence(envelope({"type": "gauge", "label": label, "note": "mailto:a@b.example"})))
    assert markdown == "_(shown as text)_ See https://ok.example/a or Status:ok\n"


def test_copy_shows_the_exact_value_up_to_4000_characters() -> None:
    value = "line one\n  ``` two"
    actions = [{"type": "copy", "label": "Script", "value": value}, {"type": "copy", "value": "x" * 4001}]
    markdown = render_reply(fence(envelope({"type": "actions", "actions": actions})))
    assert markdown == "- Script: \n\n  ````\n  line one\n    ``` two\n  ````\n"


def test_no_html_from_the_model_passes_through() -> None:
    markdown = render_reply(
        fence(
            envelope(
                {"type": "notice", "title": "<img src=x onerror=alert(1)>", "body": "<script>x()</script> `<kept>`"},
                {"type": "table", "columns": ["<b>c</b>"], "rows": [["<i>v</i>"]]},
            )
        )
    )
    assert re.findall(r"(?<![\\`])<[A-Za-z/!]", markdown) == []  # every `<` is escaped
    assert "&lt;kept\\>" in markdown  # a code span HTML could start in: the same characters, as text


def test_a_vivid_surface_with_a_cycle_and_thousands_of_nodes_is_walked_once_up_to_200() -> None:
    components = [{"id": "root", "component": "Column", "children": [f"n{i}" for i in range(5000)] + ["root"]}]
    components += [
        {"id": f"n{i}", "component": "Stat", "label": f"s{i}", "value": i, "children": ["root"]} for i in range(5000)
    ]
    cut = json.dumps({"updateComponents": {"surfaceId": "s", "components": components}})[:32_000]
    shown = render_reply(fence(cut, "vivid"))  # cut inside the root's children: no stat arrived
    assert shown.startswith("_(shown as text)_ n0 · n1 · ") and "{" not in shown
    root = {"id": "root", "component": "Column", "children": [f"n{i}" for i in range(299)] + ["root"]}
    small = json.dumps({"updateComponents": {"surfaceId": "s", "components": [root, *components[1:300]]}})
    drawn = render_reply(fence(small, "vivid"))
    assert drawn.startswith("**s0** 0 · **s1** 1") and "**s15** 15" in drawn and "**s16**" not in drawn
    assert drawn.endswith("_(183 more blocks not shown)_\n")  # 200 nodes: the root and 199 stats


def test_the_docs_before_and_after_example_is_what_the_renderer_draws() -> None:
    section = (Path(__file__).parent.parent / "docs" / "haui.md").read_text()
    before = re.search(r"````text\n(.*?)````\n", section, re.DOTALL)
    after = re.search(r"```markdown\n(.*?)```\n", section, re.DOTALL)
    assert before is not None and after is not None
    assert render_reply(before.group(1)) == after.group(1)
