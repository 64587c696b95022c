"""Validates every frame the server writes against the vendored official ACP schema.

The whole message is checked against the schema's top-level `anyOf`, and its params or result
precisely against the `$defs` type its method selects (`x-method` / `x-side`).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schema" / "schema.json"


@cache
def _schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


@cache
def _validator(def_name: str | None) -> Draft202012Validator:
    schema = _schema()
    if def_name is None:
        return Draft202012Validator(schema)
    return Draft202012Validator({"$ref": f"#/$defs/{def_name}", "$defs": schema["$defs"]})


@cache
def _defs_by_method() -> dict[tuple[str, str, str], str]:
    """(method, side, Request|Response|Notification) -> def name."""
    table = {}
    for name, definition in _schema()["$defs"].items():
        method, side = definition.get("x-method"), definition.get("x-side")
        if method is None:
            continue
        for suffix in ("Request", "Response", "Notification"):
            if name.endswith(suffix):
                table[(method, side, suffix)] = name
    return table


def _check(def_name: str | None, value: Any, what: str) -> None:
    errors = sorted(_validator(def_name).iter_errors(value), key=lambda e: list(e.path))
    if errors:
        detail = "; ".join(f"{list(e.path)}: {e.message[:300]}" for e in errors[:5])
        raise AssertionError(f"{what} is not valid against the ACP schema ({def_name}): {detail}")


def check_agent_frame(frame: dict[str, Any], answered_method: str | None = None) -> None:
    """Validate one frame written by the agent. `answered_method` names the client request a
    response answers (None for requests and notifications)."""
    _check(None, frame, "frame")
    defs = _defs_by_method()
    if "method" in frame:
        method = frame["method"]
        kind = "Request" if "id" in frame else "Notification"
        name = defs.get((method, "client", kind)) or defs.get((method, "protocol", kind))
        assert name is not None, f"the agent sent {method!r}, which is not a client method"
        _check(name, frame.get("params"), f"{method} params")
    elif "error" in frame:
        _check("Error", frame["error"], "error")
    else:
        assert answered_method is not None, f"response to an unknown request: {frame}"
        name = defs.get((answered_method, "agent", "Response"))
        assert name is not None, f"no response type for {answered_method}"
        _check(name, frame["result"], f"{answered_method} result")
