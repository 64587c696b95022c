"""Validates every frame the server writes against the vendored official ACP schema.

The whole message is checked against the schema's top-level `anyOf`, and its params or result
precisely against the `$defs` type its method selects (`x-method` / `x-side`).

Every test validates every frame, so validation is made cheaper without changing its outcome: an
`anyOf` tries first the branch that matched last time (any valid branch makes it valid, in any
order; a frame valid under none gets the same errors), and a value already found valid against a
type is not validated again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, ValidationError
from jsonschema.validators import extend

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schema" / "schema.json"
# By schema: "1" (v1 stable), "1-unstable" (a server run with --unstable), "2" (a v2 connection).
SCHEMA_PATHS = {
    "1": SCHEMA_PATH,
    "1-unstable": SCHEMA_PATH.with_name("schema.unstable.json"),
    "2": SCHEMA_PATH.parent / "v2" / "schema.json",
}


@cache
def _schema(version: str = "1") -> dict[str, Any]:
    return json.loads(SCHEMA_PATHS[version].read_text())


_matched_last: dict[int, int] = {}  # id of an anyOf list -> the index of its branch that matched last


def _any_of(validator: Any, any_of: list[Any], instance: Any, schema: Any) -> Iterator[ValidationError]:
    """jsonschema's `anyOf`, trying the branch that matched last time first."""
    first = _matched_last.get(id(any_of), 0)
    errors: list[ValidationError] = []
    for index in (first, *(i for i in range(len(any_of)) if i != first)):
        branch = list(validator.descend(instance, any_of[index], schema_path=index))
        if not branch:
            _matched_last[id(any_of)] = index
            return
        errors.extend(branch)
    yield ValidationError(f"{instance!r} is not valid under any of the given schemas", context=errors)


_Validator = extend(Draft202012Validator, {"anyOf": _any_of})


@cache
def _validator(def_name: str | None, version: str = "1") -> Any:
    schema = _schema(version)
    if def_name is None:
        return _Validator(schema)
    return _Validator({"$ref": f"#/$defs/{def_name}", "$defs": schema["$defs"]})


@lru_cache(maxsize=4096)
def _valid(def_name: str | None, encoded: str, version: str = "1") -> bool:
    """Whether the value `encoded` is valid against `def_name` (None: the whole schema)."""
    return _validator(def_name, version).is_valid(json.loads(encoded))


@cache
def _defs_by_method(version: str = "1") -> dict[tuple[str, str, str], str]:
    """(method, side, Request|Response|Notification) -> def name."""
    table = {}
    for name, definition in _schema(version)["$defs"].items():
        method, side = definition.get("x-method"), definition.get("x-side")
        if method is None:
            continue
        for suffix in ("Request", "Response", "Notification"):
            if name.endswith(suffix):
                table[(method, side, suffix)] = name
    return table


def _check(def_name: str | None, value: Any, what: str, version: str = "1") -> None:
    if _valid(def_name, json.dumps(value, sort_keys=True), version):
        return
    errors = sorted(_validator(def_name, version).iter_errors(value), key=lambda e: list(e.path))
    if errors:
        detail = "; ".join(f"{list(e.path)}: {e.message[:300]}" for e in errors[:5])
        raise AssertionError(f"{what} is not valid against the ACP v{version} schema ({def_name}): {detail}")


NOTIFICATIONS_AS_REQUESTS = frozenset({"session/cancel"})  # answered `{}` when sent with an id


def check_agent_frame(
    frame: dict[str, Any], answered_method: str | None = None, *, version: int = 1, unstable: bool = False
) -> None:
    """Validate one frame written by the agent. `answered_method` names the client request a
    response answers (None for requests and notifications); `version`: the protocol's schema;
    `unstable` (a server run with `--unstable`): v1's schema.unstable.json."""
    schema = f"{version}-unstable" if unstable and version == 1 else str(version)
    _check(None, frame, "frame", schema)
    defs = _defs_by_method(schema)
    if "method" in frame:
        method = frame["method"]
        kind = "Request" if "id" in frame else "Notification"
        name = defs.get((method, "client", kind)) or defs.get((method, "protocol", kind))
        assert name is not None, f"the agent sent {method!r}, which is not a client method"
        _check(name, frame.get("params"), f"{method} params", schema)
    elif "error" in frame:
        _check("Error", frame["error"], "error", schema)
    else:
        assert answered_method is not None, f"response to an unknown request: {frame}"
        name = defs.get((answered_method, "agent", "Response"))
        if name is None:  # a notification sent as a request: any response the schema allows
            assert answered_method in NOTIFICATIONS_AS_REQUESTS, f"no response type for {answered_method}"
            _check("AgentResponse", frame, f"{answered_method} answer", schema)
        else:
            _check(name, frame["result"], f"{answered_method} result", schema)
