"""Runtime events to and from JSON-able payloads: the journal's only view of `adapters.events`.

`encode_event` gives `(kind, payload)`; `decode_event` is its exact inverse for every event
type, driven by the dataclasses' own type hints, so a new event type needs no change here.
Tuples are stored as lists; nested content keeps its `kind`. `raw_input`/`raw_output` are
free-form JSON: values JSON cannot hold are stored as their `str()`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from adapters import events as ev

EVENT_TYPES: dict[str, type[Any]] = {
    cls.__dataclass_fields__["kind"].default: cls for cls in typing.get_args(ev.RuntimeEvent)
}


def encode_event(event: ev.RuntimeEvent) -> tuple[str, dict[str, Any]]:
    """The event's `kind` and its fields as a JSON-able dict (the kind itself is left out)."""
    if type(event) is ev.TextDelta and event.message_id is None:  # the hot path: one per streamed chunk
        return "text", {"text": event.text}
    payload = {name: _jsonable(getattr(event, name)) for name in _field_names(type(event)) if name != "kind"}
    return event.kind, payload


def decode_event(type_: str, payload: dict[str, Any]) -> ev.RuntimeEvent:
    """The event `encode_event` turned into `(type_, payload)`; unknown types raise ValueError."""
    cls = EVENT_TYPES.get(type_)
    if cls is None:
        raise ValueError(f"unknown event type {type_!r}")
    if cls is ev.TextDelta and len(payload) == 1:
        return ev.TextDelta(text=payload["text"])
    return typing.cast(ev.RuntimeEvent, _build(cls, payload))


def _jsonable(value: object) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in typing.cast("list[object] | tuple[object, ...]", value)]
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in typing.cast("dict[object, object]", value).items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {name: _jsonable(getattr(value, name)) for name in _field_names(type(value))}
    # Agents put anything in raw_input; the journal must never fail a turn over it.
    return str(value)


def _build(cls: type[Any], payload: dict[str, Any]) -> Any:
    hints = _hints(cls)
    # Keys a newer writer added are ignored; missing ones take their defaults.
    kwargs = {name: _decode(hints[name], payload[name]) for name in hints if name in payload}
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ValueError(f"payload does not fit {cls.__name__}: {exc}") from None


def _decode(hint: Any, value: object) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return _decode_union(typing.get_args(hint), value)
    if origin is tuple and _is_array(value):
        item_hint = typing.get_args(hint)[0]
        return tuple(_decode(item_hint, item) for item in value)
    if dataclasses.is_dataclass(hint) and _is_object(value):
        return _build(typing.cast(type[Any], hint), value)
    return value


def _decode_union(arms: tuple[Any, ...], value: object) -> Any:
    if _is_object(value) and "kind" in value:
        for arm in arms:
            if isinstance(arm, type) and dataclasses.is_dataclass(arm) and _kind_of(arm) == value["kind"]:
                return _build(arm, value)
    for arm in arms:
        if arm is not type(None) and (typing.get_origin(arm) is tuple or dataclasses.is_dataclass(arm)):
            return _decode(arm, value)
    return value


# TypeGuard, not TypeIs: a value that is not an array or object stays `object`, as it was.
def _is_object(value: object) -> typing.TypeGuard[dict[str, Any]]:
    return isinstance(value, dict)  # from json.loads, so its keys are str


def _is_array(value: object) -> typing.TypeGuard[list[object]]:
    return isinstance(value, list)


_FIELD_NAMES: dict[type[Any], tuple[str, ...]] = {}
_HINTS: dict[type[Any], dict[str, Any]] = {}


def _field_names(cls: type[Any]) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def _hints(cls: type[Any]) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        names = set(_field_names(cls))
        resolved = typing.get_type_hints(cls).items()
        hints = _HINTS[cls] = {name: hint for name, hint in resolved if name in names}
    return hints


def _kind_of(cls: type[Any]) -> str | None:
    kind = cls.__dataclass_fields__.get("kind")
    return None if kind is None else typing.cast(str, kind.default)
