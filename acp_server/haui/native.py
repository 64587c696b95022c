"""HAUI blocks as data a client draws natively (the workbench page): each block the Markdown
renderer drew, read again into a plain shape of its own (text as text, not Markdown; numbers
as numbers; the same caps and link rule), and each block it could not draw as the Markdown it
showed instead (`{"type": "text"}`). Carried beside the Markdown, never instead of it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from acp_server.haui.blocks import MAX_COLUMNS, MAX_COPY, MAX_ROWS, TONES, numeric, safe_url
from acp_server.haui.envelope import Block, Envelope, number_blocks, string_literals
from acp_server.haui.render import as_text, draw_block, holds_envelope, read_fence, render_envelope
from acp_server.haui.text import BODY_LIMIT, as_dict, as_list, body, line_endings, number, trim

log = logging.getLogger(__name__)

Native = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Drawn:
    """A fence as drawn: its Markdown (for every client) and its blocks (for native drawing)."""

    markdown: str
    blocks: tuple[Native, ...]


def draw_fence(kind: str, fence_body: str, *, cut: bool = False) -> Drawn | None:
    """`render_fence`'s Markdown with the blocks it drew; None for an ordinary ```json fence."""
    if not holds_envelope(kind, fence_body, cut=cut):
        return None
    try:
        envelope = read_fence(kind, fence_body)
        markdown = render_envelope(envelope)
    except Exception:  # as render_fence: the fence's words, never an error
        log.warning("a rich reply block could not be drawn; it is shown as text", exc_info=True)
        markdown = _words(fence_body)
        return Drawn(markdown, _text(markdown))
    try:
        return Drawn(markdown, tuple(native_blocks(envelope, markdown)))
    except Exception:  # the Markdown stands; the page draws it as text
        log.warning("a rich reply block could not be read for native drawing", exc_info=True)
        return Drawn(markdown, _text(markdown))


def _words(fence_body: str) -> str:
    try:
        return as_text(string_literals(fence_body))
    except Exception:
        return ""


def _text(markdown: str, block_id: str = "b0") -> tuple[Native, ...]:
    return ({"type": "text", "id": block_id, "text": markdown},) if markdown else ()


def native_blocks(envelope: Envelope, markdown: str) -> list[Native]:
    """The envelope's blocks, each drawn natively when the Markdown renderer drew it."""
    if envelope.rejected is not None:
        return list(_text(markdown))
    drawn = [_native(block, depth=0) for block in envelope.blocks]
    if not any(block["type"] != "text" for block in drawn):
        return list(_text(markdown))  # no block drawn: the whole fence as the renderer showed it
    found = [block for block in drawn if block["type"] != "text" or block["text"]]
    if envelope.dropped:
        more = f"_({envelope.dropped} more block{'s' if envelope.dropped > 1 else ''} not shown)_"
        found.append({"type": "text", "id": "dropped", "text": more})
    return found


def _native(block: Block, *, depth: int) -> Native:
    markdown, fallback = draw_block(block, depth=depth)
    if markdown is None:
        return {"type": "text", "id": block.id, "text": fallback}
    shape = SHAPES[block.type](block.props, depth)
    return {"type": block.type, "id": block.id, **shape}


def _s(value: Any, limit: int = 300) -> str:
    """A scalar prop as one line of plain text ('' for anything else): drawn with textContent."""
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, int | float):
        return number(value)
    return trim(" ".join(value.split()), limit) if isinstance(value, str) else ""


def _titled(props: dict[str, Any], shape: Native) -> Native:
    title = _s(props.get("title"))
    return {"title": title, **shape} if title else shape


def _list(props: dict[str, Any], *keys: str) -> list[Any]:
    for key in keys:
        if found := as_list(props.get(key)):
            return found
    return []


def _dicts(items: list[Any]) -> list[dict[str, Any]]:
    return [found for item in items if (found := as_dict(item)) is not None]


def stat(props: dict[str, Any], depth: int) -> Native:
    shape: Native = {"label": _s(props.get("label")), "value": _s(props.get("value"))}
    trend = str(props.get("trend", "")).lower()
    for key, value in (("delta", _s(props.get("delta"))), ("caption", _s(props.get("caption")))):
        if value:
            shape[key] = value
    if trend in ("up", "down", "flat", "neutral"):
        shape["trend"] = "flat" if trend == "neutral" else trend
    return shape


def table(props: dict[str, Any], depth: int) -> Native:
    columns = _list(props, "columns", "headers")
    rows = [found for row in _list(props, "rows") if (found := as_list(row))]
    header = [_s(c["label"] if (c := as_dict(col)) and "label" in c else col) for col in columns[:MAX_COLUMNS]]
    shown = [row[: len(header)] for row in rows[:MAX_ROWS]]
    right = [
        all(numeric(row[i]) for row in shown if i < len(row) and row[i] not in (None, ""))
        and any(i < len(row) and numeric(row[i]) for row in shown)
        for i in range(len(header))
    ]
    cells = [[_s(row[i]) if i < len(row) else "" for i in range(len(header))] for row in shown]
    shape: Native = {"columns": header, "rows": cells, "numeric": right}
    if len(rows) > MAX_ROWS or len(columns) > MAX_COLUMNS:
        shape["note"] = f"Showing {len(shown)} of {len(rows)} rows and {len(header)} of {len(columns)} columns."
    return _titled(props, shape)


def key_value(props: dict[str, Any], depth: int) -> Native:
    items = _list(props, "items", "pairs")
    pairs = [(i.get("key", i.get("label")), i.get("value")) for i in _dicts(items)]
    if not pairs and isinstance(props.get("values"), dict):
        pairs = list(props["values"].items())
    return _titled(props, {"items": [[_s(k), _s(v)] for k, v in pairs if _s(k)][:MAX_ROWS]})


def comparison(props: dict[str, Any], depth: int) -> Native:
    items = [i for i in _dicts(_list(props, "items", "options")) if _s(i.get("label", i.get("title")))]
    items = items[: MAX_COLUMNS - 1]
    labels = [_s(i.get("label", i.get("title"))) for i in items]
    values = [as_dict(i.get("values")) or {} for i in items]
    keys = list(dict.fromkeys(k for v in values for k in v))[:MAX_ROWS]
    if keys:
        rows = [[_s(k), *(_s(v.get(k)) for v in values)] for k in keys]
        return _titled(props, {"labels": labels, "rows": rows})
    points = [[p for p in map(_s, _list(item, "points", "items")) if p][:MAX_ROWS] for item in items]
    return _titled(props, {"labels": labels, "points": points})


def chart(props: dict[str, Any], depth: int) -> Native:
    labels = [_s(label) for label in _list(props, "labels", "x")[:MAX_ROWS]]
    series = [s for s in _dicts(_list(props, "series")) if isinstance(s.get("values"), list)][: MAX_COLUMNS - 1]
    drawn = [
        {
            "name": _s(s.get("name", s.get("label"))) or f"Series {n + 1}",
            "values": [
                None if v is None else float(v) for v in (list(s["values"]) + [None] * len(labels))[: len(labels)]
            ],
        }
        for n, s in enumerate(series)
    ]
    kind = props.get("kind", props.get("chartType"))
    return _titled(props, {"kind": "line" if kind == "line" else "bar", "labels": labels, "series": drawn})


def list_block(props: dict[str, Any], depth: int) -> Native:
    items: list[Native] = []
    for item in _list(props, "items")[:MAX_ROWS]:
        fields = as_dict(item) or {"text": item}
        text = _s(fields.get("text", fields.get("title", fields.get("label"))))
        if not text:
            continue
        meta = fields.get("meta")
        tags = [trim(m, 40) for m in (as_list(meta) or [meta]) if isinstance(m, str) and m.strip()]
        entry: Native = {"text": text}
        if detail := _s(fields.get("detail", fields.get("description"))):
            entry["detail"] = detail
        if tags:
            entry["meta"] = tags
        items.append(entry)
    return _titled(props, {"ordered": props.get("ordered") is True, "items": items})


def notice(props: dict[str, Any], depth: int) -> Native:
    tone = str(props.get("tone", "info")).lower()
    shape: Native = {"tone": tone if tone in TONES else "info", "label": TONES.get(tone, "Note")}
    if text := body(props.get("body", props.get("text", props.get("message")))):
        shape["body"] = text  # Markdown, as the renderer made it safe
    return _titled(props, shape)


def disclosure(props: dict[str, Any], depth: int) -> Native:
    shape: Native = {"title": _s(props.get("title", props.get("summary"))), "blocks": []}
    if text := body(props.get("body", props.get("text")), BODY_LIMIT):
        shape["body"] = text
    nested = props.get("blocks")
    if isinstance(nested, list):
        for block in number_blocks(nested[:16]):  # pyright: ignore[reportUnknownArgumentType] -- model JSON
            drawn = _native(block, depth=depth + 1)
            if drawn["type"] != "text" or drawn["text"]:
                shape["blocks"].append(drawn)
    return shape


def _action(item: dict[str, Any]) -> Native | None:
    """As blocks._action: only a safe link, a copy of at most MAX_COPY characters, an ask."""
    kinds = (item.get("action"), item.get("type"), item.get("kind"))
    kind = next((k for k in kinds if k in ("open_url", "copy", "ask")), None)
    label = _s(item.get("label"))
    first = next((item[k] for k in ("url", "value") if item.get(k) not in (None, "")), None)
    if kind == "open_url" and (url := safe_url(first)) is not None:
        return {"action": "open_url", "label": label or url, "url": url}
    if kind == "copy" and isinstance(value := item.get("value"), str) and 0 < len(value) <= MAX_COPY:
        return {"action": "copy", "label": label or "Copy", "value": line_endings(value)}
    prompt = next((item[k] for k in ("prompt", "value", "text", "label") if item.get(k) not in (None, "")), None)
    if kind == "ask" and (text := _s(prompt)):
        return {"action": "ask", "label": label or text, "prompt": text}
    return None


def actions(props: dict[str, Any], depth: int) -> Native:
    found = [a for item in _dicts(_list(props, "actions", "items")) if (a := _action(item)) is not None]
    return _titled(props, {"actions": found})


SHAPES = {
    "stat": stat,
    "comparison": comparison,
    "key_value": key_value,
    "table": table,
    "chart": chart,
    "list": list_block,
    "notice": notice,
    "disclosure": disclosure,
    "actions": actions,
}
