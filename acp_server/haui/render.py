"""A HAUI fence as Markdown: the envelope's blocks drawn in order (neighbouring stats on one
line, disclosures as titled sections), a block that cannot be drawn shown by its fallback or
its own words under a "shown as text" note, and a fence that is no envelope shown as text.
Drawing never fails: whatever a block or a fence raises, it is shown as text (and logged), so
one reply can neither fail its turn nor a later `session/load` that replays it.
"""

from __future__ import annotations

import logging
from typing import Any

from acp_server.haui.blocks import MAX_DEPTH, RENDERERS, InvalidProps, without_refused_urls
from acp_server.haui.envelope import Block, Envelope, names_schema, number_blocks, read_envelope, string_literals
from acp_server.haui.text import BODY_LIMIT, TEXT_LIMIT, body, plain, trim, words
from acp_server.haui.vivid import read_vivid

HAUI_FENCES = frozenset({"hermes-ui", "hermes_ui", "hermesui", "haui"})
VIVID_FENCE = "vivid"
SHOWN_AS_TEXT = "_(shown as text)_"

log = logging.getLogger(__name__)


def fence_kind(info: str) -> str | None:
    """'haui', 'vivid' or 'json' (a fence that may hold an envelope), from a fence's info string."""
    name = info.strip().split(maxsplit=1)[0].lower() if info.strip() else ""
    if name in HAUI_FENCES:
        return "haui"
    if name in (VIVID_FENCE, "json"):
        return name
    return None


def render_fence(kind: str, fence_body: str, *, cut: bool = False) -> str | None:
    """The Markdown for a held fence, or None when it is an ordinary ```json fence (kept as is).
    A `cut` fence (the reply ended inside it) that may still have been naming the schema counts."""
    if not holds_envelope(kind, fence_body, cut=cut):
        return None
    try:
        return render_envelope(read_fence(kind, fence_body))
    except Exception:  # a bug, or input no rule foresaw: the fence's words, never an error
        log.warning("a rich reply block could not be drawn; it is shown as text", exc_info=True)
    try:
        return as_text(string_literals(fence_body))
    except Exception:
        log.warning("a rich reply block could not be shown as text either", exc_info=True)
        return ""


def read_fence(kind: str, fence_body: str) -> Envelope:
    """The envelope a held fence's body makes (may raise: callers show its words then)."""
    return read_vivid(fence_body) if kind == VIVID_FENCE else read_envelope(fence_body)


def holds_envelope(kind: str, fence_body: str, *, cut: bool = False) -> bool:
    """Whether a held fence is drawn: any HAUI or vivid fence, a ```json one naming the schema."""
    return kind != "json" or names_schema(fence_body) or (cut and _starts_naming_schema(fence_body))


def _starts_naming_schema(fence_body: str) -> bool:
    compact = "".join(fence_body.split()).translate(_QUOTES)
    return bool(compact) and (_NAMED.startswith(compact) or compact.startswith(_NAMED))


_NAMED = '{"schema":"hermes.adaptive-ui'
_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"'})


def render_envelope(envelope: Envelope) -> str:
    if envelope.rejected == "too large":
        return "_(a rich reply block was too large to show)_"
    if envelope.rejected is not None:
        return as_text(envelope.words)
    drawn = [draw_block(block, depth=0) for block in envelope.blocks]
    if not any(markdown is not None for markdown, _ in drawn):
        return _whole_as_text(envelope.blocks)
    parts = _join_stats(list(zip(envelope.blocks, drawn, strict=True)))
    if envelope.dropped:
        parts.append(f"_({envelope.dropped} more block{'s' if envelope.dropped > 1 else ''} not shown)_")
    return "\n\n".join(part for part in parts if part)


def draw_block(block: Block, *, depth: int) -> tuple[str | None, str]:
    """(the block's Markdown or None when it cannot be drawn, what to show instead)."""
    try:
        if block.type == "disclosure":
            return _disclosure(block.props, depth=depth), ""
        render = RENDERERS.get(block.type)
        if render is not None:
            return render(block.props), ""
    except InvalidProps:
        pass
    except Exception:  # a renderer's bug, or a value no rule foresaw: this block as text, never an error
        log.warning("a rich reply %r block could not be drawn; it is shown as text", block.type[:40], exc_info=True)
    return None, _fallback(block)


def _fallback(block: Block) -> str:
    if block.fallback is not None:
        return body(block.fallback)
    return as_text(words(block.props))


def as_text(found: list[Any]) -> str:
    """Words of model JSON under the note, never the JSON itself nor a URL the link rule refuses;
    empty when there are none."""
    text = " · ".join(p for w in words(found) if (p := plain(without_refused_urls(w))))
    return f"{SHOWN_AS_TEXT} {trim(text, BODY_LIMIT)}" if text else ""


def _whole_as_text(blocks: tuple[Block, ...]) -> str:
    """No block could be drawn: their fallbacks, or all their words under one note."""
    if any(block.fallback for block in blocks):
        return "\n\n".join(_fallback(block) for block in blocks if (block.fallback or words(block.props)))
    return as_text([block.props for block in blocks])


def _join_stats(parts: list[tuple[Block, tuple[str | None, str]]]) -> list[str]:
    """Each block's Markdown (its fallback when it was not drawn); neighbouring drawn stats
    share one line."""
    joined: list[str] = []
    previous_stat = False
    for block, (markdown, fallback) in parts:
        is_stat = block.type == "stat" and markdown is not None
        if is_stat and previous_stat:
            joined[-1] += " · " + (markdown or "")
        else:
            joined.append(markdown if markdown is not None else fallback)
        previous_stat = is_stat
    return joined


def _disclosure(props: dict[str, Any], *, depth: int) -> str:
    """A titled section; its body and nested blocks under it (nested at most two levels)."""
    if depth >= MAX_DEPTH:
        raise InvalidProps("disclosures nest at most two levels")
    title = plain(props.get("title", props.get("summary")), TEXT_LIMIT)
    if not title:
        raise InvalidProps("a disclosure needs a title")
    parts = [f"{'#' * (4 + depth)} {title}"]
    if text := body(props.get("body", props.get("text"))):
        parts.append(text)
    nested = props.get("blocks")
    if isinstance(nested, list):
        for block in number_blocks(nested[:16]):  # pyright: ignore[reportUnknownArgumentType] -- model JSON
            markdown, fallback = draw_block(block, depth=depth + 1)
            parts.append(markdown if markdown is not None else fallback)
    if len(parts) == 1:
        raise InvalidProps("an empty disclosure")
    return "\n\n".join(part for part in parts if part)
