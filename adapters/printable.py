"""Untrusted text made printable before it reaches a terminal, as `less -R` and git's `remote:`
lines do: a model's reply, an agent's stderr, titles, plans and option labels carry no escape
sequence a terminal would act on (OSC 52 clipboard writes, window titles, cursor moves, concealed
text, `\\r` overwriting a line) and no bidi control reordering what is shown.

`printable` shows C0 controls in caret notation (ESC is `^[`), DEL as `^?` and C1 controls as
`cat -v` does (U+009B is `M-^[`), drops the bidi controls and turns lone surrogates into U+FFFD.
Text keeps its newlines and tabs (a `\\r\\n` ends a line as `\\n` does); a one-line field (a
title, a table row, an option label) keeps none. `printable_json` does it to every string of a
JSON value, so even `jq -r` prints nothing a terminal acts on. Used by the CLI's display, its
messages and its log lines; the server's own colours are added after, never before.
"""

from __future__ import annotations

import re
from typing import Any, cast

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_SURROGATES = "\ud800-\udfff"  # from JSON `\ud800` escapes; no encoder would print them
_IN_TEXT = re.compile(f"\r\n|[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}{_SURROGATES}]")
_IN_FIELD = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}{_SURROGATES}]")


def _shown(char: str) -> str:
    code = ord(char)
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    if code <= 0x9F:
        return "M-^" + chr(code - 0x40)
    if 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    return ""  # a bidi control: removed, as it shows nothing itself


_RANGES = (range(0x20), range(0x7F, 0xA0), (0x61C, 0x200E, 0x200F), range(0x202A, 0x202F), range(0x2066, 0x206A))
_SHOWN = {chr(code): _shown(chr(code)) for codes in (*_RANGES, range(0xD800, 0xE000)) for code in codes}
_SHOWN["\r\n"] = "\n"


def _replace(match: re.Match[str]) -> str:
    return _SHOWN[match.group()]


def printable(text: str, *, one_line: bool = False) -> str:
    """`text` with nothing a terminal would act on; newlines and tabs kept unless `one_line`.
    Printable text comes back unchanged, so making it printable twice changes nothing."""
    pattern = _IN_FIELD if one_line else _IN_TEXT
    return pattern.sub(_replace, text) if pattern.search(text) else text


def printable_json(value: Any) -> Any:
    """A copy of a decoded JSON value whose strings, keys included, are `printable` text."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        items = cast(dict[Any, Any], value).items()
        return {printable(str(key)): printable_json(item) for key, item in items}
    if isinstance(value, list):
        return [printable_json(item) for item in cast(list[Any], value)]
    return value
