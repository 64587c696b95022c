"""Text helpers for HAUI rendering: trimming to the contract's limits, escaping model text for
Markdown, and keeping HTML out. Pure string functions; the block renderers call them for
every value a model wrote, so nothing from the envelope reaches the editor unescaped.
"""

from __future__ import annotations

import re
from typing import Any, cast

TEXT_LIMIT = 300  # most text props
BODY_LIMIT = 4000  # Markdown bodies (notice, disclosure, fallback)
ELLIPSIS = "…"

# Characters that start Markdown (or HTML) constructs inside a line of plain text.
_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&#!])")
_SPACE = re.compile(r"\s+")
# Keys that label or configure a block (its kind, id, schema, tone), not words meant for the user.
_ENUM_KEYS = frozenset({"type", "id", "schema", "version", "tone", "trend", "kind", "action", "ordered", "component"})
_LINE_END = re.compile(r"\r\n?")  # CommonMark ends a line at \r too
# A fenced code block's opening line (any indent) and its info string, as the model wrote it.
_FENCE = re.compile(r"( *)(`{3,}|~{3,})(.*)")
_INFO = re.compile(r"[\w+#.-]{1,40}")
# A code span on one line: a run of backticks, then the next run of exactly as many.
_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
# What can start raw HTML in CommonMark (a tag, closing tag, comment, declaration, processing
# instruction or CDATA) or an autolink: a `<` and a letter, `/`, `!` or `?`.
_HTML_START = re.compile(r"<(?=[A-Za-z/!?])")
_PUNCTUATION = re.compile(r"[!-/:-@\[-`{-~]")
_ENTITIES = {"&": "&amp;", "<": "&lt;"}


def trim(value: str, limit: int = TEXT_LIMIT) -> str:
    """Whitespace stripped, and cut to `limit` characters (the cut marked with an ellipsis)."""
    value = value.strip()
    return value if len(value) <= limit else value[: limit - 1].rstrip() + ELLIPSIS


def plain(value: Any, limit: int = TEXT_LIMIT) -> str:
    """A scalar prop as one line of escaped Markdown text ('' for anything else)."""
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, int | float):
        return _SPECIAL.sub(r"\\\1", number(value))
    if not isinstance(value, str):
        return ""
    return _SPECIAL.sub(r"\\\1", trim(_SPACE.sub(" ", value), limit))


def number(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def body(value: Any, limit: int = BODY_LIMIT) -> str:
    """A Markdown body: kept as Markdown, trimmed, and made so no CommonMark renderer finds raw
    HTML in it (`no_html`)."""
    if not isinstance(value, str):
        return ""
    return no_html(trim(line_endings(value), limit))


def line_endings(text: str) -> str:
    """Each CR LF and each lone CR as one LF: CommonMark ends a line at a CR too, so what is
    drawn as code on one line must not hold one."""
    return _LINE_END.sub("\n", text)


def no_html(markdown: str) -> str:
    """Markdown in which no CommonMark renderer finds raw HTML, whatever it holds. A fenced code
    block is drawn again with a fence of our own at the start of the line, which opens a
    code block wherever it stands (list items and quotes end there), so its lines stay exact.
    Elsewhere every `<` and `&` is escaped, outside the code spans of a line; a code span that
    holds something HTML could start with is shown as plain text of the same characters, as a
    renderer may not read the span as ours (a `\\` before it, a link's destination around it)."""
    lines = markdown.split("\n")
    out: list[str] = []
    index = 0
    while index < len(lines):
        opener = _FENCE.fullmatch(lines[index])
        if opener is None or (opener.group(2)[0] == "`" and "`" in opener.group(3)):
            out.append(_inline(lines[index]))
            index += 1
        else:
            index = _fenced(lines, index, opener, out)
    return "\n".join(out)


def _fenced(lines: list[str], start: int, opener: re.Match[str], out: list[str]) -> int:
    """The fenced block opening at `lines[start]`, drawn into `out`; the index of the line after
    it (its closing line, or the end: a block never closed ends with the text)."""
    indent, marks = len(opener.group(1)), opener.group(2)
    closer = re.compile(rf" *{re.escape(marks[0])}{{{len(marks)},}}[ \t]*")
    code: list[str] = []
    index = start + 1
    while index < len(lines) and closer.fullmatch(lines[index]) is None:
        line = lines[index]
        code.append(line[min(indent, len(line) - len(line.lstrip(" "))) :])
        index += 1
    info = _INFO.match(opener.group(3).strip())
    out.append(code_block(code, info.group(0) if info else ""))
    return index + 1


def code_block(lines: list[str], info: str = "", indent: str = "") -> str:
    """`lines` as a fenced code block (each line after `indent`), exact to the character: its
    fence is longer than any run of backticks inside, so no line can close it."""
    longest = max((len(run) for line in lines for run in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    inner = [indent + line if line else "" for line in lines]
    return "\n".join([indent + fence + info, *inner, indent + fence])


def _inline(line: str) -> str:
    out: list[str] = []
    last = 0
    for span in _SPAN.finditer(line):
        out.append(_escape_html(line[last : span.start()]))
        code = span.group(2)
        out.append(span.group(0) if _HTML_START.search(code) is None else _literal(code.strip(" ")))
        last = span.end()
    out.append(_escape_html(line[last:]))
    return "".join(out)


def _literal(text: str) -> str:
    """Text that shows exactly these characters: `&` and `<` as entities (a backslash before
    `<` could pair with one before it), other ASCII punctuation after a backslash."""
    return _PUNCTUATION.sub(lambda char: _ENTITIES.get(char.group(0), "\\" + char.group(0)), text)


def _escape_html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;")


def code_span(value: str) -> str:
    """`value` as a code span showing exactly its characters (a fence longer than any run
    inside); its line ends are spaces, as a renderer shows them, so it stays on its line."""
    value = _LINE_END.sub(" ", value).replace("\n", " ")
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    # A renderer takes one space off each end of a span that starts and ends with one, unless
    # it is all spaces: a pad keeps a backtick off the fence, and such spaces shown.
    spaced = value[:1] == " " and value[-1:] == " " and value.strip(" ")
    pad = " " if value.startswith("`") or value.endswith("`") or spaced else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def cell(value: Any) -> str:
    """A table cell: one escaped line (`|` included), numbers as written."""
    return plain(value)


def words(value: Any, found: list[str] | None = None) -> list[str]:
    """Every string and number under `value`, in order: a block's own words, without its JSON."""
    found = [] if found is None else found
    if isinstance(value, str):
        if value.strip():
            found.append(value)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        found.append(number(value))
    elif isinstance(value, dict):
        for key, item in value.items():  # pyright: ignore[reportUnknownVariableType] -- model JSON
            if key not in _ENUM_KEYS:
                words(item, found)
    elif isinstance(value, list):
        for item in value:  # pyright: ignore[reportUnknownVariableType] -- model JSON
            words(item, found)
    return found


def as_dict(value: object) -> dict[str, Any] | None:
    """Model JSON narrowed to an object (keys are strings: it came from `json.loads`)."""
    return cast("dict[str, Any]", value) if isinstance(value, dict) else None


def as_list(value: object) -> list[Any]:
    """Model JSON narrowed to an array; anything else is an empty one."""
    return cast("list[Any]", value) if isinstance(value, list) else []
