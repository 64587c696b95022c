"""The openai agent's Terminal Auth: the `authMethods` entry an editor runs in a terminal
(`acp-server setup`, which `acp_server.cli.setup` asks through), and the edit of the config
file's text that setup saves: the `[openai]` keys it sets, every other line kept as it was.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping

from adapters.base import AuthMethod
from adapters.openai.config import SECTION
from adapters.openai.jsonvalues import is_object

SETUP_COMMAND = "setup"
SETUP_METHOD = AuthMethod(
    id="acp-server-setup",
    name="Set up the model endpoint",
    description="Asks in a terminal for an OpenAI-compatible endpoint, its API key and a model, "
    "and saves them in acp-server's config file (readable by you alone)",
    kind="terminal",
    args=(SETUP_COMMAND,),
)

_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")  # a table header; [[arrays]] never match


class ConfigEditError(ValueError):
    """The config file's text cannot be edited safely (not TOML, or [openai] not a plain table)."""


def updated_config(text: str, values: Mapping[str, str | None]) -> str:
    """`text` (a config file, maybe empty) with each key of `values` set in its `[openai]` table
    (None removes the key): a key's line is replaced where it is, a new one goes right after the
    header, a missing table is appended. Comments and other tables stay as they are."""
    try:
        before = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigEditError(f"it is not valid TOML ({exc}); fix or remove it first") from None
    lines = text.splitlines()
    start, end = _table_lines(lines, before)
    if start is None:
        block = [f"[{SECTION}]", *(_line(key, value) for key, value in values.items() if value is not None)]
        lines = [*lines, *([""] if lines and lines[-1].strip() else []), *block]
    else:
        lines = _edit_table(lines, start, end, values)
    result = "\n".join(lines) + "\n"
    _check(result, before, values)
    return result


def _table_lines(lines: list[str], parsed: Mapping[str, object]) -> tuple[int | None, int]:
    """The index of the `[openai]` header and of the line that ends its table."""
    headers = [(index, match.group(1)) for index, line in enumerate(lines) if (match := _HEADER.match(line))]
    found = [index for index, name in headers if name == SECTION]
    if not found:
        if SECTION in parsed:  # `openai.key = ...` dotted keys, or an inline table
            raise ConfigEditError(f"its {SECTION} settings are not written as an [{SECTION}] table")
        return None, len(lines)
    start = found[0]
    later = [index for index, _name in headers if index > start]
    return start, later[0] if later else len(lines)


def _edit_table(lines: list[str], start: int, end: int, values: Mapping[str, str | None]) -> list[str]:
    table = lines[start + 1 : end]
    for key, value in values.items():
        pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
        at = next((index for index, line in enumerate(table) if pattern.match(line)), None)
        if at is not None and value is None:
            del table[at]
        elif at is not None:
            table[at] = _line(key, value)
        elif value is not None:
            table.insert(0, _line(key, value))
    return [*lines[: start + 1], *table, *lines[end:]]


def _line(key: str, value: str | None) -> str:
    return f"{key} = {json.dumps(value, ensure_ascii=False)}"  # a JSON string is a TOML basic string


def _check(result: str, before: Mapping[str, object], values: Mapping[str, str | None]) -> None:
    """The edit changed exactly what it should (a multi-line value it could not see would not)."""
    try:
        after = tomllib.loads(result)
    except tomllib.TOMLDecodeError:
        after = {}
    old = before.get(SECTION)
    wanted: dict[str, object] = {**(old if is_object(old) else {}), **values}
    wanted = {key: value for key, value in wanted.items() if value is not None}
    rest_before = {key: value for key, value in before.items() if key != SECTION}
    rest_after = {key: value for key, value in after.items() if key != SECTION}
    if after.get(SECTION) != wanted or rest_before != rest_after:
        raise ConfigEditError(f"its [{SECTION}] table is written in a way setup cannot edit safely")
