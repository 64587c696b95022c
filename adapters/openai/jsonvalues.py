"""Type guards for the JSON (and TOML) the openai agent reads: endpoint answers, streamed
chunks, tool arguments, MCP schemas and its config file. They narrow, never convert: a JSON
object's keys are always str, so an object is a `dict[str, Any]` once it is known to be a dict.
"""

from __future__ import annotations

from typing import Any, TypeGuard

# TypeGuard rather than TypeIs: a value that fails the check keeps its declared type.


def is_object(value: object) -> TypeGuard[dict[str, Any]]:
    return isinstance(value, dict)


def is_array(value: object) -> TypeGuard[list[Any]]:
    return isinstance(value, list)


def objects(value: object) -> list[dict[str, Any]]:
    """The objects in a JSON array (other items skipped); [] when `value` is no array."""
    return [item for item in value if is_object(item)] if is_array(value) else []
