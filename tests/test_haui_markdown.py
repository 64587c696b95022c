"""HAUI text never becomes HTML: what the renderer draws is read by a real CommonMark parser
(markdown-it-py, tables on as in editors), and no text a model puts in any field of any block
yields raw HTML, nor leaves the code span or code block a value to copy is shown in."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from acp_server.haui import render_fence
from tests.haui_cases import envelope

MARKDOWN = MarkdownIt("commonmark").enable("table")
IMG = "<img src=x onerror=alert(1)>"
IFRAME = "<iframe src=https://evil.example/></iframe>"


def tokens(markdown: str) -> Iterator[Token]:
    for token in MARKDOWN.parse(markdown):
        yield token
        yield from token.children or ()


def html_in(markdown: str) -> list[str]:
    return [token.content for token in tokens(markdown) if token.type in ("html_inline", "html_block")]


def drawn(*blocks: dict[str, Any]) -> str:
    markdown = render_fence("haui", json.dumps(envelope(*blocks)))
    assert markdown is not None
    return markdown


def code_shown(markdown: str) -> list[str]:
    """The text of every code span and code block, as a renderer shows it."""
    return [token.content for token in tokens(markdown) if token.type in ("code_inline", "fence", "code_block")]


def copy(value: str) -> dict[str, Any]:
    return {"type": "actions", "items": [{"label": "Copy", "action": "copy", "value": value}]}


@pytest.mark.parametrize(
    "block",
    [
        {"type": "notice", "body": f"`a\n\n{IMG}`"},  # a code span across a blank line
        {"type": "disclosure", "title": "t", "body": f"`a\n\n{IFRAME}`"},
        {"type": "notice", "body": f"\\`{IMG}`"},  # a backtick escaped by a backslash opens nothing
        {"type": "notice", "body": f"[a](`){IMG}`"},  # the backtick is a link's destination
        {"type": "notice", "body": f"``` a`b\n\n{IMG}\n\n```"},  # no fence: its info string has a backtick
        {"type": "notice", "body": f"- a\n  ```\n\nx\n```\ny\n```\n{IMG}\n```"},  # a list item ends a fence
        {"type": "disclosure", "title": "t", "body": f"  ```\n```\n{IFRAME}\n```"},
        {"type": "notice", "body": f"x\r\r{IMG}"},
        copy(f"x\r{IFRAME}"),  # a lone CR ends a line for CommonMark
        copy(f"x\r\r{IMG}"),
        {"type": "list", "items": [{"text": "a", "meta": [f"x\n\n{IMG}"]}]},
    ],
)
def test_the_html_a_model_smuggled_into_block_text_stays_text(block: dict[str, Any]) -> None:
    assert html_in(drawn(block)) == []


def test_code_in_a_body_is_shown_exactly_and_a_code_span_html_could_start_in_as_its_characters() -> None:
    markdown = drawn({"type": "notice", "body": f"Run `a && b < c`:\n\n```sh\n{IMG}\n  x\n```\nthen `{IMG}`."})
    assert code_shown(markdown) == ["a && b < c", f"{IMG}\n  x\n"]
    assert html_in(markdown) == []
    assert f"then {IMG}." in "".join(token.content for token in tokens(markdown) if token.type == "text")


@pytest.mark.parametrize("value", [f"x\r{IFRAME}", "a\r\nb\rc\nd", "` ``", "   ", " a ", "\tb\t", "``` \n ```x"])
def test_a_copy_value_is_shown_exactly_in_its_code(value: str) -> None:
    assert code_shown(drawn(copy(value))) == [expected_copy(value)]


def expected_copy(value: str) -> str:
    """What a renderer shows of a value to copy: a code block's lines (a CR ends a line), or a
    code span's text."""
    lines = value.replace("\r\n", "\n").replace("\r", "\n")
    return lines + "\n" if "\n" in lines else value


# Text built from the pieces Markdown and HTML are made of, and any characters at all.
PIECES = st.sampled_from(
    [
        *("`", "``", "```", "~~~", "\\", "\n", "\r", "\r\n", "\n\n", "  ", "    ", "\t", "- ", "1. ", "> ", "# "),
        *("|", "---", "[a](", "[a]: ", ")", '"', "'", "]", "&", "&lt;", "*", "_", "$", "<", ">", "<!--", "-->"),
        *(IMG, IFRAME, "<a href=x>", "</p>", "<?php", "<!DOCTYPE html>", "<![CDATA[", "<https://x.example>"),
    ]
)
TEXT = st.lists(st.one_of(PIECES, PIECES, PIECES, st.text(max_size=6)), max_size=16).map("".join)


def _fields(text: str) -> list[dict[str, Any]]:
    """Every text field of every block type, holding `text`."""
    return [
        {"type": "stat", "label": text, "value": text, "delta": text, "caption": text},
        {"type": "table", "title": text, "columns": [text, "b"], "rows": [[text, 1], ["x", text]]},
        {"type": "key_value", "title": text, "items": [{"key": text, "value": text}]},
        {"type": "comparison", "items": [{"label": text, "values": {text: text}}, {"label": "b", "values": {}}]},
        {"type": "comparison", "items": [{"label": text, "points": [text]}, {"label": "b", "points": ["c"]}]},
        {"type": "chart", "title": text, "labels": [text], "series": [{"name": text, "values": [1]}]},
        {"type": "list", "title": text, "items": [{"text": text, "detail": text, "meta": [text]}, text]},
        {"type": "notice", "title": text, "body": text, "tone": text},
        {"type": "disclosure", "title": text, "body": text, "blocks": [{"type": "notice", "body": text}]},
        {"type": "actions", "title": text, "items": [{"label": text, "action": "ask", "value": text}]},
        {"type": "actions", "items": [{"label": text, "action": "open_url", "value": f"https://example.com/{text}"}]},
        {"type": "actions", "items": [{"label": text, "action": "copy", "value": text}]},
        {"type": "gauge", "label": text, "fallback": text},
        {"type": "gauge", "label": text},
    ]


DRAWERS: list[Callable[[str], str]] = [lambda text, n=n: drawn(_fields(text)[n]) for n in range(len(_fields("")))]


@settings(max_examples=1000, deadline=None)
@given(text=TEXT, index=st.integers(0, len(DRAWERS) - 1))
def test_no_text_in_any_field_of_any_block_becomes_html(text: str, index: int) -> None:
    markdown = DRAWERS[index](text)
    assert html_in(markdown) == [], markdown
    assert html_in(f"Before.\n\n{markdown}\n\nAfter.") == [], markdown


@settings(max_examples=300, deadline=None)
@given(value=TEXT.filter(lambda value: 0 < len(value) <= 4000 and "\0" not in value))
def test_any_value_to_copy_is_shown_exactly_in_its_code_and_nothing_else_is_code(value: str) -> None:
    assert code_shown(drawn(copy(value))) == [expected_copy(value)]
