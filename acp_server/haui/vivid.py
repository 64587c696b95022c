"""`vivid` fences: A2UI v0.9 message lines whose `Stat`, `Table`, `Chart`, `Compare`, `Link`
and `Choices` components become the same HAUI blocks. Components are walked from the root
through `child`/`children` with a visited set and a 200-node cap, so a cycle or a huge surface
cannot hang the renderer; any other component is passed through for its children only.
"""

from __future__ import annotations

from typing import Any

from acp_server.haui.envelope import MAX_BLOCKS, MAX_BODY_BYTES, Envelope, close_truncated, loads, number_blocks
from acp_server.haui.envelope import read_envelope as _read_haui
from acp_server.haui.text import as_dict, as_list

MAX_NODES = 200


def _unwrap(value: Any) -> Any:
    """A2UI literal wrappers (`{"literalString": "x"}`) as plain values."""
    if isinstance(value, dict) and len(value) == 1:  # pyright: ignore[reportUnknownArgumentType]
        (key, inner), *_ = value.items()  # pyright: ignore[reportUnknownVariableType]
        if isinstance(key, str) and key.startswith("literal"):
            return inner  # pyright: ignore[reportUnknownVariableType]
    return value  # pyright: ignore[reportUnknownVariableType]


def _components(body: str) -> list[dict[str, Any]] | None:
    """Every component of every message line, flattened to {"id", "component", **props}."""
    found: list[dict[str, Any]] = []
    parsed_any = False
    for line in body.splitlines():
        try:
            message = loads(line)
        except ValueError:
            try:  # a reply that ended inside the fence cuts its last line
                message = loads(close_truncated(line))
            except ValueError:
                continue
        parsed_any = True
        message = as_dict(message) or {}
        for key in ("updateComponents", "surfaceUpdate"):  # v0.9, and v0.8's name for it
            update = as_dict(message.get(key)) or {}
            found += [_flatten(item) for c in as_list(update.get("components")) if (item := as_dict(c)) is not None]
    return found if parsed_any else None


def _flatten(item: dict[str, Any]) -> dict[str, Any]:
    component = as_dict(item.get("component"))
    if component is not None and len(component) == 1:  # v0.8 shape: {"Stat": {...props}}
        (name, props), *_ = component.items()
        fields = as_dict(props) or {}
        return {**{k: _unwrap(v) for k, v in fields.items()}, "id": item.get("id"), "component": name}
    return {k: _unwrap(v) for k, v in item.items()}


def _children(component: dict[str, Any]) -> list[Any]:
    children = component.get("children")
    wrapped = as_dict(children)
    listed = as_list(wrapped.get("explicitList") if wrapped is not None else children)
    return ([component["child"]] if "child" in component else []) + listed


def _walk(components: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Components in document order from the root, each at most once, at most MAX_NODES."""
    by_id = {c["id"]: c for c in components if isinstance(c.get("id"), str)}
    referenced = {child for c in components for child in _children(c) if isinstance(child, str)}
    roots = [by_id["root"]] if "root" in by_id else [c for c in components if c.get("id") not in referenced]
    ordered: list[dict[str, Any]] = []
    visited: set[int] = set()
    stack = list(reversed(roots))
    while stack and len(visited) < MAX_NODES:
        node = stack.pop()
        if id(node) in visited:
            continue
        visited.add(id(node))
        ordered.append(node)
        kids = [by_id[k] for k in _children(node) if isinstance(k, str) and k in by_id]
        stack.extend(reversed(kids))
    return ordered


def _block(component: dict[str, Any]) -> dict[str, Any] | None:
    """The HAUI block for one component, or None for one that has none."""
    match component.get("component"):
        case "Stat":
            keys = ("label", "value", "delta", "trend", "caption")
            return {"type": "stat", **{k: component[k] for k in keys if k in component}}
        case "Table":
            return {"type": "table", **{k: component[k] for k in ("title", "columns", "rows") if k in component}}
        case "Chart":
            return {"type": "chart", **{k: component[k] for k in ("title", "labels", "series") if k in component}}
        case "Compare":
            return {"type": "comparison", **{k: component[k] for k in ("title", "items") if k in component}}
        case "Link":
            action = {
                "type": "open_url",
                "label": component.get("label", component.get("text")),
                "url": component.get("url", component.get("href")),
            }
            return {"type": "actions", "actions": [action]}
        case "Choices":
            options = component.get("options", component.get("choices"))
            asks = [
                {"type": "ask", "prompt": _unwrap(d.get("label", d.get("value")) if (d := as_dict(o)) else o)}
                for o in as_list(options)
            ]  # pyright: ignore[reportUnknownVariableType,reportUnknownMemberType]
            return {"type": "actions", "title": component.get("label"), "actions": asks}
        case _:
            return None


def read_vivid(body: str) -> Envelope:
    """The blocks of a vivid fence; a body that is a HAUI envelope itself is read as one."""
    if len(body.encode("utf-8", "replace")) > MAX_BODY_BYTES:
        return Envelope(rejected="too large")
    components = _components(body)
    if components is None or not components:
        return _read_haui(body)  # not A2UI lines: maybe an envelope in the wrong fence, else words
    blocks = [b for c in _walk(components) if (b := _block(c)) is not None]
    if not blocks:
        return Envelope(rejected="no blocks", words=[components])
    return Envelope(blocks=tuple(number_blocks(blocks[:MAX_BLOCKS])), dropped=max(0, len(blocks) - MAX_BLOCKS))
