"""Reading a HAUI fence body into blocks, by the contract's rules: the envelope's schema and
version, at most 16 blocks, ids made valid and unique, a 32 KB cap on the body and 32 levels
of nesting; and, before any of that, the repair of the slips models commonly make (curly
quotes, trailing commas, a bare array or a single block, a missing or quoted version).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from acp_server.haui.text import as_dict, as_list

SCHEMA = "hermes.adaptive-ui"
VERSION = 1
MAX_BLOCKS = 16
MAX_BODY_BYTES = 32 * 1024
MAX_NESTING = 32  # arrays and objects: an envelope needs about 15; json.loads recurses per level
_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_CURLY = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2033": '"', "\u2018": "'", "\u2019": "'"})


@dataclass(frozen=True, slots=True)
class Block:
    """One block as the model wrote it: its type, a valid unique id, its props and fallback."""

    type: str
    id: str
    props: dict[str, Any]
    fallback: str | None = None


@dataclass(frozen=True, slots=True)
class Envelope:
    """A read fence body. `rejected` says why it cannot be drawn (then `words` are shown)."""

    blocks: tuple[Block, ...] = ()
    dropped: int = 0  # blocks past MAX_BLOCKS
    rejected: str | None = None
    words: list[Any] = field(default_factory=list[Any])  # what the model wrote, for text fallback


def names_schema(body: str) -> bool:
    """Whether a ```json fence's body is a HAUI envelope (it names the schema)."""
    return (
        re.search(r"[\"\u201c\u201d]schema[\"\u201c\u201d]\s*:\s*[\"\u201c\u201d]hermes\.adaptive-ui", body) is not None
    )


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_CLOSER_AHEAD = re.compile(r"\s*[\]}]")


def nesting(text: str) -> int:
    """How deep arrays and objects nest in JSON text, found by a scan that skips strings as the
    decoder does: up to a syntax error it counts as the decoder goes, and the decoder stops
    there, so it never says less than the decoder would recurse."""
    brackets = _NOT_BRACKETS.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def loads(text: str) -> Any:
    """`json.loads`, for text nested at most MAX_NESTING deep (the decoder recurses once per
    level: 10,000 levels raise RecursionError). Raises ValueError otherwise."""
    if nesting(text) > MAX_NESTING:
        raise ValueError(f"nested deeper than {MAX_NESTING} levels")
    return json.loads(text)


def loads_repaired(body: str) -> Any:
    """The JSON value of `body`, repairing curly quotes and trailing commas if it does not parse.
    Raises ValueError when even the repaired text is not JSON (or nests too deeply)."""
    try:
        return loads(body)
    except ValueError:
        pass
    return loads(_drop_trailing_commas(body.translate(_CURLY)))


def _drop_trailing_commas(text: str) -> str:
    """Commas directly before `}` or `]`, outside strings, removed."""
    out: list[str] = []
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            in_string = not (char == '"' and not escaped)
            escaped = char == "\\" and not escaped
        elif char == '"':
            in_string = True
        elif char == "," and _CLOSER_AHEAD.match(text, index + 1) is not None:
            continue
        out.append(char)
    return "".join(out)


def read_envelope(body: str) -> Envelope:
    """The envelope of a hermes-ui fence body, repaired and checked."""
    if len(body.encode("utf-8", "replace")) > MAX_BODY_BYTES:
        return Envelope(rejected="too large")
    if nesting(body) > MAX_NESTING and nesting(body.translate(_CURLY)) > MAX_NESTING:
        return Envelope(rejected="not JSON", words=string_literals(body))  # no repair nests less
    try:
        value = loads_repaired(body)
    except ValueError:
        try:
            value = loads_repaired(close_truncated(body.translate(_CURLY)))
        except ValueError:
            return Envelope(rejected="not JSON", words=string_literals(body))
    return envelope_of(value)


def envelope_of(value: Any) -> Envelope:
    """The envelope of a parsed value: a bare array of blocks or a single block is wrapped."""
    envelope = as_dict(value)
    if (listed := as_list(value)) or value == []:
        envelope = {"blocks": listed}
    elif envelope is not None and "blocks" not in envelope and "type" in envelope:
        envelope = {"blocks": [envelope]}
    if envelope is None:
        return Envelope(rejected="not an object", words=[value])
    blocks: Any = envelope.get("blocks")
    if envelope.get("schema", SCHEMA) != SCHEMA:
        return Envelope(rejected="unknown schema", words=[blocks])
    if envelope.get("version", VERSION) not in (VERSION, str(VERSION)) or envelope.get("version") is True:
        return Envelope(rejected="unsupported version", words=[blocks])
    if not isinstance(blocks, list):
        return Envelope(rejected="no blocks", words=[blocks])
    items: list[Any] = blocks  # pyright: ignore[reportUnknownVariableType] -- model JSON
    return Envelope(blocks=tuple(number_blocks(items[:MAX_BLOCKS])), dropped=max(0, len(items) - MAX_BLOCKS))


def number_blocks(items: list[Any]) -> list[Block]:
    """Blocks with valid ids: an invalid one becomes `b<index>`, a repeat gets `-<index>`."""
    seen: set[str] = set()
    blocks: list[Block] = []
    for index, item in enumerate(items):
        raw: dict[str, Any] = item if isinstance(item, dict) else {"text": item}  # pyright: ignore[reportUnknownVariableType]
        given = raw.get("id")
        block_id = given if isinstance(given, str) and _ID.fullmatch(given) else f"b{index}"
        if block_id in seen:
            block_id = f"{block_id}-{index}"[-64:]
        seen.add(block_id)
        props = raw.get("props")
        if not isinstance(props, dict):  # props may sit on the block itself
            props = {k: v for k, v in raw.items() if k not in ("type", "id", "fallback")}
        kind = raw.get("type")
        fallback = raw.get("fallback")
        blocks.append(
            Block(
                type=kind if isinstance(kind, str) else "",
                id=block_id,
                props=props,  # pyright: ignore[reportUnknownArgumentType] -- model JSON
                fallback=fallback if isinstance(fallback, str) and fallback.strip() else None,
            )
        )
    return blocks


_SKIPPED_KEYS = frozenset({"type", "id", "schema", "version", "tone", "trend", "kind", "ordered", "url"})
_TOKEN = re.compile(r'"((?:[^"\\\n]|\\.)*)("?)(\s*:)?')


def string_literals(body: str) -> list[Any]:
    """The string values of text that is not JSON (keys, and values of keys like `type`, left
    out), to show it as words; an unterminated last string counts."""
    values: list[Any] = []
    key = ""
    for text, closed, is_key in _TOKEN.findall(body.translate(_CURLY)):
        if is_key and closed:
            key = text
            continue
        if key not in _SKIPPED_KEYS:
            try:
                values.append(json.loads(f'"{text}"'))
            except ValueError:
                values.append(text)
        key = ""
    return values


def close_truncated(body: str) -> str:
    """JSON cut off mid-way (a reply that ended inside its fence) closed, as it stands: an open
    string ended, a dangling comma or key dropped, open arrays and objects closed."""
    body = body.rstrip()
    stack: list[str] = []
    in_string = escaped = False
    for char in body:
        if in_string:
            in_string = not (char == '"' and not escaped)
            escaped = char == "\\" and not escaped
        elif char == '"':
            in_string = True
        elif char in "[{":
            stack.append("]" if char == "[" else "}")
        elif char in "]}" and stack:
            stack.pop()
    text = body + ('"' if in_string else "")
    text = re.sub(r'(,\s*"(?:[^"\\]|\\.)*"\s*:?\s*|,\s*|:\s*)$', "", text.rstrip()) if stack else text
    if text.rstrip().endswith(":"):
        text += "null"
    return text + "".join(reversed(stack))
