"""How big and how deep a JSON-like value is, found without recursion (a value nested 10,000
levels deep breaks every recursive walk: the journal's codec, the redactor, the JSON encoder).
Used to refuse such tool arguments (the openai agent) and to keep them out of the journal
(`journal/caps.py`).
"""

from __future__ import annotations

from typing import cast

MAX_DEPTH = 64  # levels of nesting of a tool's input or output: real ones use a handful


def _mib(chars: int) -> str:
    return f"{chars / (1 << 20):g} MiB"


def unfit(value: object, *, max_chars: int | None = None, max_depth: int = MAX_DEPTH) -> str | None:
    """Why a JSON-like value may not be kept: larger than `max_chars` as JSON (roughly; None: any
    size) or nested deeper than `max_depth`; None when it fits. Stops as soon as it is known."""
    stack: list[tuple[object, int]] = [(value, 1)]
    size = 0
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            return f"nested deeper than {max_depth} levels"
        children: list[object] = []
        if isinstance(item, str):
            size += len(item) + 2
        elif isinstance(item, dict):
            pairs = cast("dict[object, object]", item)
            size += 2 + sum(len(str(key)) + 4 for key in pairs)
            children = list(pairs.values())
        elif isinstance(item, list | tuple):
            children = list(cast("list[object] | tuple[object, ...]", item))
            size += 2 + len(children)
        else:
            size += 8  # a number, a boolean, null (or what the journal will store as its str())
        if max_chars is not None and size > max_chars:
            return f"larger than {_mib(max_chars)}"
        stack += [(child, depth + 1) for child in children]
    return None
