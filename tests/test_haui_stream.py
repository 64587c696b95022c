"""HAUI on a streamed reply: however a reply is cut into deltas, the filter emits what the
whole reply renders to, text goes out as it comes, and no chunk ever carries the model's JSON."""

from __future__ import annotations

import itertools
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_server.haui import ReplyFilter, render_reply
from acp_server.haui.stream import joined
from tests.haui_cases import BLOCKS, SLIPS, envelope, fence

PROSE = st.lists(
    st.sampled_from(["Revenue grew.", "See `x` and *y*.", "", "  - a point", "1. first", "Done!", "  ", "ünïcode ✓"]),
    min_size=1,
    max_size=4,
).map(lambda lines: "\n".join(lines) + "\n")
PLAIN_FENCES = st.sampled_from(
    ["```python\nprint('hi')\n```\n", '```json\n{"a": [1, 2]}\n```\n', "~~~\nraw ``` text\n~~~\n"]
)
HAUI_FENCES = st.sampled_from([*BLOCKS.values(), *SLIPS.values()])
SEGMENTS = st.lists(st.one_of(PROSE, PLAIN_FENCES, HAUI_FENCES), min_size=1, max_size=6).map("".join)
MODEL_JSON = ("hermes.adaptive-ui", '"schema"', '"type"', '"blocks"', "updateComponents", "\u201cblocks")


@st.composite
def replies_and_cuts(draw: st.DrawFn) -> tuple[str, list[str]]:
    reply = draw(SEGMENTS)
    if draw(st.booleans()):  # some replies end mid-way: inside a fence, a line or a string
        reply = reply[: draw(st.integers(0, len(reply)))]
    cuts = sorted(draw(st.lists(st.integers(0, len(reply)), max_size=40)))
    bounds = [0, *cuts, len(reply)]
    return reply, [reply[start:end] for start, end in itertools.pairwise(bounds)]


def _stream(deltas: list[str]) -> list[str]:
    reply = ReplyFilter()
    return [reply.feed(delta) for delta in deltas] + [reply.finish()]


@settings(max_examples=400, deadline=None)
@given(replies_and_cuts())
def test_any_cut_into_deltas_emits_the_whole_replys_rendering_and_never_its_json(case: tuple[str, list[str]]) -> None:
    reply, deltas = case
    chunks = _stream(deltas)
    assert "".join(chunks) == render_reply(reply)
    for chunk in chunks:
        assert not any(marker in chunk for marker in MODEL_JSON), chunk


def test_text_streams_as_it_comes_and_a_fence_is_emitted_once_on_its_closing_line() -> None:
    body = json.dumps(envelope({"type": "stat", "label": "Users", "value": 42}))
    deltas = ["Hello", " there.\nNumbers", ":\n``", "`hermes-ui\n", body[:10], body[10:] + "\n", "``", "`\n", "Bye"]
    assert _stream(deltas) == ["Hello", " there.\nNumbers", ":\n", "", "", "", "", "\n**Users** 42\n", "\nBye", ""]


def test_a_reply_that_ends_inside_a_fence_is_drawn_as_it_stands() -> None:
    cut = fence(envelope({"type": "notice", "body": "Almost"}, {"type": "stat", "label": "Cut", "value": 1}))[:-30]
    assert _stream(["Intro\n", cut]) == ["Intro\n", "", "\n> **Note:**\n>\n> Almost"]


class LineByLine(ReplyFilter):
    """The filter without its shortcut for the rest of a line already let through."""

    def feed(self, delta: str) -> str:
        return joined(self._lines(delta))


@settings(max_examples=400, deadline=None)
@given(replies_and_cuts())
def test_the_rest_of_a_line_let_through_goes_out_delta_by_delta_as_the_line_machinery_sends_it(
    case: tuple[str, list[str]],
) -> None:
    _, deltas = case
    slow = LineByLine()
    assert _stream(deltas) == [slow.feed(delta) for delta in deltas] + [slow.finish()]
