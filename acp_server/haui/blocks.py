"""Each HAUI block type drawn as Markdown. A renderer takes a block's props and returns its
Markdown, or raises `InvalidProps` so the caller shows the block's fallback instead. Every
model value goes through `text` (escaped, trimmed); links are kept only when safe.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from acp_server.haui.text import (
    BODY_LIMIT,
    as_dict,
    as_list,
    body,
    cell,
    code_block,
    code_span,
    line_endings,
    number,
    plain,
    trim,
)

MAX_COLUMNS = 8
MAX_ROWS = 50
MAX_COPY = 4000
MAX_DEPTH = 2  # disclosures nested at most two levels
TRENDS = {"up": "▲", "down": "▼", "flat": "▶", "neutral": "▶"}
TONES = {"info": "Note", "success": "Success", "warning": "Warning", "error": "Error", "danger": "Error"}
SPARKS = "▁▂▃▄▅▆▇█"


class InvalidProps(ValueError):
    """The props do not make a drawable block of this type."""


def _list(props: dict[str, Any], *keys: str) -> list[Any]:
    for key in keys:
        if found := as_list(props.get(key)):
            return found
    return []


def _dicts(items: list[Any]) -> list[dict[str, Any]]:
    return [found for item in items if (found := as_dict(item)) is not None]


def _required(value: str, what: str) -> str:
    if not value:
        raise InvalidProps(f"{what} is missing")
    return value


def _title(props: dict[str, Any]) -> list[str]:
    title = plain(props.get("title"))
    return [f"**{title}**", ""] if title else []


def stat(props: dict[str, Any]) -> str:
    """One stat: **label** value, then its delta and trend arrow."""
    label = _required(plain(props.get("label")), "label")
    value = _required(plain(props.get("value")), "value")
    parts = [f"**{label}** {value}"]
    delta = plain(props.get("delta"))
    arrow = TRENDS.get(str(props.get("trend", "")).lower(), "")
    if delta or arrow:
        parts.append(" ".join(p for p in (arrow, delta) if p))
    caption = plain(props.get("caption"))
    return " ".join(parts) + (f" _{caption}_" if caption else "")


def _table(header: list[str], rows: list[list[str]], right: list[bool]) -> list[str]:
    width = len(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if r else "---" for r in right) + "|"]
    for row in rows:
        padded = (row + [""] * width)[:width]
        lines.append("| " + " | ".join(padded) + " |")
    return lines


def numeric(value: Any) -> bool:
    """A number a sparkline can scale: finite as a float (json.loads also reads NaN, Infinity
    and integers of hundreds of digits)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def table(props: dict[str, Any]) -> str:
    """At most 8 columns and 50 rows; short rows padded; all-number columns right-aligned."""
    columns = _list(props, "columns", "headers")
    rows = [found for row in _list(props, "rows") if (found := as_list(row))]
    if not columns or not rows:
        raise InvalidProps("a table needs columns and rows")
    header = [
        cell(c["label"] if (c := as_dict(column)) and "label" in c else column) for column in columns[:MAX_COLUMNS]
    ]
    shown = [row[: len(header)] for row in rows[:MAX_ROWS]]
    right = [
        all(numeric(row[i]) for row in shown if i < len(row) and row[i] not in (None, ""))
        and any(i < len(row) and numeric(row[i]) for row in shown)
        for i in range(len(header))
    ]
    lines = _title(props) + _table(header, [[cell(v) for v in row] for row in shown], right)
    cut = [
        f"{len(rows)} rows" if len(rows) > MAX_ROWS else "",
        f"{len(columns)} columns" if len(columns) > MAX_COLUMNS else "",
    ]
    if any(cut):
        lines += [
            "",
            f"_Showing the first {min(len(rows), MAX_ROWS)} rows and {len(header)} columns of "
            f"{' and '.join(c for c in cut if c)}._",
        ]
    return "\n".join(lines)


def key_value(props: dict[str, Any]) -> str:
    """A two-column table of keys and values."""
    items = _list(props, "items", "pairs")
    pairs = [(i.get("key", i.get("label")), i.get("value")) for i in _dicts(items)]
    if not pairs and isinstance(props.get("values"), dict):
        pairs = list(props["values"].items())
    pairs = [(k, v) for k, v in pairs if plain(k)][:MAX_ROWS]
    if not pairs:
        raise InvalidProps("no pairs")
    return "\n".join(_title(props) + _table(["Field", "Value"], [[cell(k), cell(v)] for k, v in pairs], [False, False]))


def comparison(props: dict[str, Any]) -> str:
    """Options side by side: a table when they have values, else one list per option."""
    items = [i for i in _dicts(_list(props, "items", "options")) if plain(i.get("label", i.get("title")))]
    if len(items) < 2:
        raise InvalidProps("a comparison needs two items")
    items = items[: MAX_COLUMNS - 1]
    labels = [plain(i.get("label", i.get("title"))) for i in items]
    values = [as_dict(i.get("values")) or {} for i in items]
    keys = list(dict.fromkeys(k for v in values for k in v))[:MAX_ROWS]
    if keys:
        rows = [[cell(k), *(cell(v.get(k)) for v in values)] for k in keys]
        return "\n".join(_title(props) + _table(["", *labels], rows, [False] * (len(labels) + 1)))
    lines = _title(props)
    for label, item in zip(labels, items, strict=True):
        lines += [f"**{label}**", *(f"- {plain(p)}" for p in _list(item, "points", "items") if plain(p)), ""]
    return "\n".join(lines).rstrip()


def _spark(values: list[float | None]) -> str:
    present = [v for v in values if v is not None]
    if not present:
        return ""
    low, high = min(present), max(present)
    span = high / 2 - low / 2  # in halves: the span of two large floats does not overflow
    steps = len(SPARKS) - 1
    return "".join(" " if v is None else SPARKS[round((v / 2 - low / 2) / span * steps) if span else 0] for v in values)


def chart(props: dict[str, Any]) -> str:
    """The chart's numbers as a table (labels by series; null empty), and a sparkline per series."""
    labels = _list(props, "labels", "x")[:MAX_ROWS]
    series = [s for s in _dicts(_list(props, "series")) if isinstance(s.get("values"), list)][: MAX_COLUMNS - 1]
    if not labels or not series:
        raise InvalidProps("a chart needs labels and series")
    names = [plain(s.get("name", s.get("label"))) or f"Series {n + 1}" for n, s in enumerate(series)]
    columns: list[list[float | None]] = []
    for s in series:
        raw = (list(s["values"]) + [None] * len(labels))[: len(labels)]
        if not all(v is None or numeric(v) for v in raw):
            raise InvalidProps("chart values must be numbers or null")
        columns.append(raw)
    rows = [
        [cell(label), *("" if c[r] is None else number(c[r] or 0) for c in columns)] for r, label in enumerate(labels)
    ]
    lines = _title(props) + _table(["", *names], rows, [False] + [True] * len(names)) + [""]
    lines += [f"- {name}: {code_span(spark)}" for name, c in zip(names, columns, strict=True) if (spark := _spark(c))]
    return "\n".join(lines)


def list_block(props: dict[str, Any]) -> str:
    """An ordered or bulleted list; an item's `meta` tags follow it as code spans."""
    items = _list(props, "items")[:MAX_ROWS]
    ordered = props.get("ordered") is True
    lines: list[str] = []
    for item in items:
        fields = as_dict(item) or {"text": item}
        text = plain(fields.get("text", fields.get("title", fields.get("label"))))
        if not text:
            continue
        meta = fields.get("meta")
        tags = [code_span(trim(m, 40)) for m in (as_list(meta) or [meta]) if isinstance(m, str) and m.strip()]
        detail = plain(fields.get("detail", fields.get("description")))
        marker = f"{len(lines) + 1}." if ordered else "-"
        lines.append(f"{marker} {text}" + (f" — {detail}" if detail else "") + "".join(f" {t}" for t in tags))
    if not lines:
        raise InvalidProps("no items")
    return "\n".join(_title(props) + lines)


def notice(props: dict[str, Any]) -> str:
    """A quote that starts with its tone."""
    text = body(props.get("body", props.get("text", props.get("message"))))
    title = plain(props.get("title"))
    if not text and not title:
        raise InvalidProps("an empty notice")
    tone = TONES.get(str(props.get("tone", "info")).lower(), "Note")
    head = f"**{tone}:** {title}" if title else f"**{tone}:**"
    lines = [head, *(["", *text.split("\n")] if text else [])]
    return "\n".join(f"> {line}".rstrip() for line in lines)


def safe_url(value: Any) -> str | None:
    """An http(s) URL without credentials, or None: the link rule."""
    if not isinstance(value, str) or len(value) > 2000 or any(c in value for c in " <>\"'`\n\r\t()"):
        return None
    try:
        parts = urlsplit(value)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
        return None
    return value


# A word is a URL when it names a host (`scheme://`, `//`) or starts with a scheme that acts
# without one; other `word:word` text ("Status:ok", "C:") stays words.
_URL_WORD = re.compile(r"(?:[a-z][a-z0-9+.-]*:)?//|(?:javascript|vbscript|data|file|mailto|tel):", re.IGNORECASE)
_URL_EDGES = "()[]{}<>.,;:!?'\""
_ACTION_KINDS = ("open_url", "copy", "ask")


def without_refused_urls(text: str) -> str:
    """`text` less its words that are URLs the link rule refuses (what "shown as text" may print)."""
    return re.sub(r"\S+", lambda word: "" if _refused(word.group(0).strip(_URL_EDGES)) else word.group(0), text)


def _refused(word: str) -> bool:
    return _URL_WORD.match(word) is not None and safe_url(word) is None


def _first(item: dict[str, Any], *keys: str) -> Any:
    return next((item[key] for key in keys if item.get(key) not in (None, "")), None)


def _action(item: dict[str, Any]) -> str | None:
    """One item as a list line, or None when it is no usable action (then it is dropped, never
    printed). The documented form is `{label, action, value}`; `{type|kind, url|prompt}` also reads."""
    kind = next((k for k in (item.get("action"), item.get("type"), item.get("kind")) if k in _ACTION_KINDS), None)
    label = plain(item.get("label"))
    if kind == "open_url" and (url := safe_url(_first(item, "url", "value"))) is not None:
        return f"- [{label or plain(url)}]({url})"
    if kind == "copy" and isinstance(value := item.get("value"), str) and 0 < len(value) <= MAX_COPY:
        lines = line_endings(value).split("\n")
        shown = f"\n\n{code_block(lines, indent='  ')}" if len(lines) > 1 else code_span(value)
        return f"- {label or 'Copy'}: {shown}"
    if kind == "ask" and (prompt := plain(_first(item, "prompt", "value", "text", "label"))):
        return f"- Suggested reply: “{prompt}”"
    return None


def actions(props: dict[str, Any]) -> str:
    """Links (safe ones only), values to copy as exact code spans, and suggested replies."""
    lines = [line for item in _dicts(_list(props, "actions", "items")) if (line := _action(item)) is not None]
    if not lines:
        raise InvalidProps("no usable action")
    return "\n".join(_title(props) + lines)


Render = Callable[[dict[str, Any]], str]

RENDERERS: dict[str, Render] = {
    "stat": stat,
    "comparison": comparison,
    "key_value": key_value,
    "table": table,
    "chart": chart,
    "list": list_block,
    "notice": notice,
    "actions": actions,
}

__all__ = ["BODY_LIMIT", "MAX_DEPTH", "RENDERERS", "InvalidProps", "safe_url", "without_refused_urls"]
