"""Text helpers for HAUI rendering: trimming to the contract's limits, escaping model text for
Markdown, and keeping HTML out. Pure string functions; the block renderers call them for
every value a model wrote, so nothing from the envelope reaches the editor unescaped.
"""

from __future__ import annotations

import re
from typing import Any, cast

TEXT_LIMIT = 300  # most text props
BODY_LIMIT = 4000  # Markdown bodies (notice, disclosure, fallback)
ELLIPSIS = "…"

# Characters that start Markdown (or HTML) constructs inside a line of plain text.
_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&#!])")
_SPACE = re.compile(r"\s+")
# Keys that label or configure a block (its kind, id, schema, tone), not words meant for the user.
_ENUM_KEYS = frozenset({"type", "id", "schema", "version", "tone", "trend", "kind", "action", "ordered", "component"})
# Inline code spans and fenced code: HTML is inert inside them, so `<` is left alone there.
_CODE = re.compile(r"(`+)(?:.|\n)*?\1|^ {0,3}(```|~~~)[^\n]*\n(?:.|\n)*?^ {0,3}\2[^\n]*$", re.MULTILINE)


def trim(value: str, limit: int = TEXT_LIMIT) -> str:
    """Whitespace stripped, and cut to `limit` characters (the cut marked with an ellipsis)."""
    value = value.strip()
    return value if len(value) <= limit else value[: limit - 1].rstrip() + ELLIPSIS


def plain(value: Any, limit: int = TEXT_LIMIT) -> str:
    """A scalar prop as one line of escaped Markdown text ('' for anything else)."""
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, int | float):
        return _SPECIAL.sub(r"\\\1", number(value))
    if not isinstance(value, str):
        return ""
    return _SPECIAL.sub(r"\\\1", trim(_SPACE.sub(" ", value), limit))


def number(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def body(value: Any, limit: int = BODY_LIMIT) -> str:
    """A Markdown body: kept as Markdown, trimmed, with every `<` outside code made literal."""
    if not isinstance(value, str):
        return ""
    return no_html(trim(value.replace("\r\n", "\n"), limit))


def no_html(markdown: str) -> str:
    """Markdown whose raw HTML (tags, comments) shows as text: `<` and `&` outside code are escaped."""
    out: list[str] = []
    last = 0
    for match in _CODE.finditer(markdown):
        out.append(_escape_html(markdown[last : match.start()]))
        out.append(match.group(0))
        last = match.end()
    out.append(_escape_html(markdown[last:]))
    return "".join(out)


def _escape_html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;")


def code_span(value: str) -> str:
    """`value` as a code span showing exactly its characters (a fence longer than any run inside)."""
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") or (value[:1] == " " and value[-1:] == " ") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def cell(value: Any) -> str:
    """A table cell: one escaped line (`|` included), numbers as written."""
    return plain(value)


def words(value: Any, found: list[str] | None = None) -> list[str]:
    """Every string and number under `value`, in order: a block's own words, without its JSON."""
    found = [] if found is None else found
    if isinstance(value, str):
        if value.strip():
            found.append(value)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        found.append(number(value))
    elif isinstance(value, dict):
        for key, item in value.items():  # pyright: ignore[reportUnknownVariableType] -- model JSON
            if key not in _ENUM_KEYS:
                words(item, found)
    elif isinstance(value, list):
        for item in value:  # pyright: ignore[reportUnknownVariableType] -- model JSON
            words(item, found)
    return found


def as_dict(value: object) -> dict[str, Any] | None:
    """Model JSON narrowed to an object (keys are strings: it came from `json.loads`)."""
    return cast("dict[str, Any]", value) if isinstance(value, dict) else None


def as_list(value: object) -> list[Any]:
    """Model JSON narrowed to an array; anything else is an empty one."""
    return cast("list[Any]", value) if isinstance(value, list) else []
