"""Secrets out of what is stored, shown and logged: `redact(value)` returns a copy with secrets as
"[REDACTED]"; `StreamRedactor` does the same for text that arrives in pieces, holding back a
possible secret's start until it is whole; `RunRedactor` redacts a run's events with them, once,
for the journal and the editor alike; `redact_record` cleans a log record. The patterns are
listed in docs/security.md (Secrets). Redacting twice changes nothing.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from functools import lru_cache
from typing import Any, TypeVar, cast

from adapters.events import (
    CompactionChunk,
    Envelope,
    RuntimeEvent,
    StateSaved,
    TextDelta,
    ThoughtDelta,
    TranscriptSaved,
    UsageReported,
)
from journal.codec import decode_event, encode_event

AnyEvent = TypeVar("AnyEvent", bound=RuntimeEvent)

REDACTED = "[REDACTED]"

_KEY_NAMES = (
    r"password|passwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key"
    r"|(?:secret|signing|encryption|master)[_-]?key|credentials?|auth"
)
# A key naming a secret, in `key=value`, `key: value` and `"key": "value"` forms: the names
# above as a whole word or a suffix, and `pass` / `pat` as a word or after `_`/`-` (`DB_PASS`,
# `GH_PAT`; not `bypass`, `path`).
_KEY = rf"(?<![A-Za-z0-9])(?:[\w.-]*?(?:{_KEY_NAMES})|(?:[\w.-]*[_-])?pass|[\w.-]*[_-]pat)"
_CRED_CHARS = r"[A-Za-z0-9._~+/-]"
_PEM_HEADER = r"-----BEGIN [A-Z ]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_FOOTER = r"-----END [A-Z ]*PRIVATE KEY(?: BLOCK)?-----"
# A `KEY = value` at the end of a line takes a bare token, not code: no call, brackets or quotes, not a
# dotted name (`self.token`), not a literal or a type (`token: str`, `password = None`).
_EOL = r"[ \t]*(?:#[^\r\n]*)?(?=\r?\n|\Z)"
_NOT_VALUES = r"none|null|nil|true|false|undefined|str|string|int|bytes|bool|boolean|float|number|any|object"
_BARE = (
    rf"(?!(?i:{_NOT_VALUES}|required|optional){_EOL})(?![A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+{_EOL})"
    r"[^\s\"'`(){}\[\]<>|,;=#][^\s(){}\[\],;]*"
)
# Inside a line (prose: `the key = wJalr... please keep it`), a bare value counts when it looks like
# a credential: 6+ characters with a digit, or 16+; not a dotted name, not followed by a call or an
# index. So `token = tok3n_map[x] + 1` and `password: hashedPassword,` stay code.
_VALUE_CHARS = r"[^\s\"'`(){}\[\]<>|,;=#]"
_INLINE = (
    rf"(?![A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?![\w.]))(?=\S*\d|{_VALUE_CHARS}{{16}})"
    rf"{_VALUE_CHARS}{{6,}}(?=[ \t,;!?)]|\Z)"
)


@lru_cache(maxsize=1)
def _pattern() -> re.Pattern[str]:
    """One alternation, so a string is scanned once; `*_head` groups are kept, `*_val` quotes
    too. Compiled on first use (a few ms): most text has no trigger and never needs it."""
    return re.compile(
        "|".join(
            [
                # A private key runs to its END line, or to the end of the text when that never came.
                rf"(?P<pem>{_PEM_HEADER}(?s:.*?)(?:{_PEM_FOOTER}|\Z))",
                r"(?P<header_head>(?i:\b(?:proxy-)?authorization)[\"']?\s*[:=]\s*[\"']?)"
                r"(?:(?i:basic|bearer|token|digest|negotiate)\s+(?!\[REDACTED\])[^\s\"']+"
                r"|(?=[^\s\"']*\d)[^\s\"']{8,}|[^\s\"']{24,})",
                # A word after "bearer" is a token only if it looks like one: a digit or 24+ chars.
                rf"(?P<bearer_head>(?i:\bbearer)\s+)(?:{_CRED_CHARS}{{24,}}|(?={_CRED_CHARS}*\d){_CRED_CHARS}{{8,}})=*",
                r"(?P<openai>\bsk-(?:(?:ant|proj|svcacct|admin)-[A-Za-z0-9_-]{16,}|[A-Za-z0-9]{20,}))",
                r"(?P<stripe>\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,})",
                r"(?P<github>\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}))",
                r"(?P<gitlab>\bglpat-[A-Za-z0-9_-]{20,})",
                r"(?P<huggingface>\bhf_[A-Za-z0-9]{30,})",
                r"(?P<google>\bAIza[0-9A-Za-z_-]{35})",
                r"(?P<npm>\bnpm_[A-Za-z0-9]{36})",
                r"(?P<aws>\b(?:AKIA|ASIA)[0-9A-Z]{16}\b)",
                r"(?P<slack>\bxox[abprse](?:\.xox[abprs])?-[A-Za-z0-9-]{10,})",
                # A JWT cut off by the end of the text too (a streamed one, held back as long as allowed).
                r"(?P<jwt>\beyJ[\w-]{8,}\.eyJ[\w-]{8,}(?:\.[\w-]{8,}|\Z))",
                # The scheme may be missing: streamed text can be cut between "postgresql" and "://".
                r"(?P<url_head>(?:\b[A-Za-z][A-Za-z0-9+.-]*)?://[^/\s:@]*:)[^/\s@]+(?=@)",
                # `token=x` (command lines, URLs, env files) takes any value.
                rf"(?P<assign_head>(?i:{_KEY})=(?!=))(?P<assign_val>\"[^\"\r\n]+\"|'[^'\r\n]+'|[^\s&;,\"'<>()\[\]{{}}]+)",
                # With spaces or a colon, a bare value that ends its line (.env, INI, YAML, headers) ...
                rf"(?P<line_head>(?i:{_KEY})[ \t]*[:=][ \t]*)(?P<line_val>{_BARE})(?={_EOL})",
                # ... or a quoted literal, so that `token = get_token()` is code, not a secret ...
                rf"(?P<quoted_head>(?i:{_KEY})[\"']?\s*[:=]\s*)(?P<quoted_val>\"[^\"\r\n]+\"|'[^'\r\n]+')",
                # ... or, inside a line, a bare value that looks like a credential.
                rf"(?P<inline_head>(?i:{_KEY})[ \t]*[:=][ \t]*)(?P<inline_val>{_INLINE})",
            ]
        )
    )


# Every pattern above needs one of these (lowercased); most text has none and skips the regex.
# Those in _WORD_TRIGGERS only count at the start of a word.
_ANY_TRIGGERS = ("-----begin", "auth", "bearer", "://", "pass", "secret", "token", "key", "credential", "_pat", "-pat")
_WORD_TRIGGERS = (
    "sk-", "sk_", "rk_", "ghp_", "gho_", "ghs_", "ghu_", "ghr_", "github_pat_", "glpat-", "hf_", "aiza", "npm_",
    "akia", "asia", "xox", "eyj",
)  # fmt: skip
_TRIGGERS = _ANY_TRIGGERS + _WORD_TRIGGERS

_SECRET_KEY = re.compile(
    r"(?:^|_)(?:api_?key|(?:access|secret|private)_key|token|secret|password|passwd|"
    r"authorization|auth|credentials?|cookie)$"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def redact(value: Any) -> Any:
    """A copy of `value` (str, dict, list or tuple, nested) with secrets replaced."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {_redact_key(key): _redact_item(key, item) for key, item in cast("dict[object, object]", value).items()}
    if isinstance(value, list):
        return [redact(item) for item in cast("list[object]", value)]
    if isinstance(value, tuple):
        return tuple(redact(item) for item in cast("tuple[object, ...]", value))
    return value


def redact_text(text: str) -> str:
    if len(text) < 8 or not _has_trigger(text):
        return text
    return _pattern().sub(_replace, text)


def is_secret_key(key: object) -> bool:
    """Whether a dict key names a secret; keys that are not str (ints, ...) never do."""
    return _is_secret_key(key) if isinstance(key, str) else False


def redact_record(record: logging.LogRecord) -> None:
    """A log record's message (its arguments filled in), traceback and stack, redacted in place."""
    try:
        message = record.getMessage()
    except (TypeError, ValueError):
        return  # arguments that do not fit: the handler reports the record as broken
    record.msg, record.args = redact_text(message), None
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redact_text(record.exc_text)
    if record.stack_info:
        record.stack_info = redact_text(record.stack_info)


def _has_trigger(text: str) -> bool:
    lowered = text.lower()
    for trigger in _TRIGGERS:  # noqa: SIM110 (a loop is 20% faster than any(); it runs per delta)
        if trigger in lowered:
            return True
    return False


def _redact_key(key: object) -> object:
    return redact_text(key) if isinstance(key, str) else key


def _redact_item(key: object, item: object) -> Any:
    if item is None or isinstance(item, bool) or item == "" or not is_secret_key(key):
        return redact(item)
    return REDACTED


@lru_cache(maxsize=1024)
def _is_secret_key(key: str) -> bool:
    normalized = _CAMEL.sub("_", key).lower().replace("-", "_")
    return _SECRET_KEY.search(normalized) is not None


def _replace(match: re.Match[str]) -> str:
    group = match.lastgroup or ""
    if group.endswith("_val"):
        value = match[group]
        quote = value[0] if value[0] in "\"'" else ""
        return f"{match[group[:-4] + '_head']}{quote}{REDACTED}{quote}"
    if group.endswith("_head"):
        return match[group] + REDACTED
    return REDACTED


# --- streamed text ----------------------------------------------------------------------------

HOLD_CAP = 2048  # characters held back at most: a longer possible secret is shown, redacted
_HEAD_WINDOW = 512  # how far back from the end an unfinished `password = ...` head is looked for
# Streamed text may end in a trigger's first letters. Those of a secret that is one token
# (`sk-pr`, `AKI`, at a word's start) or of a private key's BEGIN line are held back, as the
# secret would be replaced whole; those of a key name (`pas`, `Bear`, `https:`) are let out and
# the next delta is redacted after them, as their secrets replace only what follows the name.
_HELD_PREFIXES = frozenset("-----begin"[:n] for n in range(1, len("-----begin")))
_WORD_PREFIXES = frozenset(t[:n] for t in _WORD_TRIGGERS for n in range(1, len(t)))
_NAME_PREFIXES = tuple({t[:n] for t in _ANY_TRIGGERS if t != "-----begin" for n in range(1, len(t))})
_HELD_TUPLE, _WORD_TUPLE = tuple(_HELD_PREFIXES), tuple(_WORD_PREFIXES)
_LONGEST_PREFIX = max(len(t) for t in _TRIGGERS) - 1
# Text at the end of a stream that may still become a secret with what follows: a key and its
# separator and a value in progress (bare, or an open quote), `Bearer ...`, `Authorization: ...`,
# and a private key's BEGIN line.
_OPEN = re.compile(
    "|".join(
        [
            rf"(?i:{_KEY_NAMES}|pass|[_-]pat)[\"']?[ \t]*"
            r"(?:[:=][ \t]*(?:\"[^\"\r\n]*|'[^'\r\n]*|[^\s\"']+[ \t]*)?)?\Z",
            r"(?i:bearer)[ \t]+\S*\Z",
            r"(?i:authorization)[\"']?[ \t]*(?:[:=][ \t]*[\"']?(?:\w+[ \t]+)?\S*)?\Z",
            r"-----BEGIN[A-Z ]*-{0,4}\Z",
        ]
    )
)
_PEM_BEGIN = re.compile(_PEM_HEADER)
_PEM_END = re.compile(_PEM_FOOTER)
_LINE_CONTEXT = 256  # characters of the current line that streamed text is redacted after
_PEM_TAIL = 64  # characters of a redacted key kept to find an END line split over deltas
_TOKEN_END = re.compile(r"(?=[\s\"'`<>()\[\]{},;&])")
_NOT_WORD = re.compile(r"\W")


class StreamRedactor:
    """One stream of text (a run's reply, or its thoughts) redacted as it arrives: `feed` gives
    the pieces that can be shown now, `finish` the rest at the end of the stream. A possible
    secret's start (`sk-pr`, `ghp_12`, `password = `, `https://user:`, `-----BEGIN`) is held back
    until its token ends or HOLD_CAP is reached; a private key is one [REDACTED] up to its END
    line. Text is redacted after the line it continues, so the pieces add up to the text redacted
    whole; and each piece is left as it is by `redact_text` on its own (a second pass changes nothing)."""

    def __init__(self) -> None:
        self._held = ""
        self._line = ""  # the current line as shown so far (its last _LINE_CONTEXT characters)
        self._until: re.Pattern[str] | None = None  # a redacted secret goes on until this matches
        self._tail = ""  # the end of what was dropped so far, while `_until` is the END line
        self._named = False  # what was shown ends in a key name's first letters

    def feed(self, text: str) -> list[str]:
        if self._named and not _has_trigger(self._line[-_LONGEST_PREFIX:] + text[:_LONGEST_PREFIX]):
            self._named = False  # `pas` went on as `pasta`, not as `password`
        if not self._held and self._until is None and not self._named and _plain(text):
            self._line = _line_after(self._line, text)
            self._named = _ends_in_name(self._line)  # `b`, `ear`: the line ends in `bear`
            return [text]  # the hot path: nothing that could be (part of) a secret
        buf, self._held = self._held + text, ""
        shown: list[str] = []
        while buf:
            if self._until is not None:
                buf = self._drop(buf)
            elif (begin := _PEM_BEGIN.search(buf)) is not None:
                # Its BEGIN line (redacted whole) and the text before it, as one piece.
                shown += self._show(buf[: begin.end()])
                buf, self._until = buf[begin.end() :], _PEM_END
            else:
                cut = max(0, _hold_from(self._line + buf, len(self._line)) - len(self._line))
                # Held text starts a possible secret of its own; with none, the next delta may
                # be the rest of a secret that `buf` ends in.
                shown += self._show(buf[:cut]) if cut < len(buf) else self._release(buf)
                buf, self._held = "", buf[cut:]
                if len(self._held) > HOLD_CAP:
                    shown += self._release(self._held)
                    self._held = ""
        self._named = _ends_in_name(self._line)
        return shown

    def finish(self) -> list[str]:
        """What is still held, redacted (a private key without END is redacted to here)."""
        shown = self._show(self._held)
        self._held, self._line, self._until, self._tail, self._named = "", "", None, "", False
        return shown

    def _release(self, text: str) -> list[str]:
        shown = self._show(text)
        if shown and shown[-1].endswith(REDACTED) and not text.endswith(REDACTED):
            # The secret reached the end of the text: what comes next may be the rest of it.
            self._until = _TOKEN_END
        return shown

    def _show(self, text: str) -> list[str]:
        """`text` redacted after the line it continues (`api_` was shown, `key=...` is this)."""
        if not text:
            return []
        line = self._line
        redacted = redact_text(line + text)
        shown = redacted[len(line) :] if redacted.startswith(line) else redact_text(text)
        pieces = [shown]
        if redact_text(shown) != shown:  # the journal redacts each piece again, on its own
            if line and _is_word(line[-1]) and _is_word(shown[0]):
                # A piece that starts inside a word (`com|pass: north`) gives the rest of that
                # word a piece of its own, so that no pattern takes it for a word's start.
                end = _NOT_WORD.search(shown)
                pieces = [shown] if end is None else [shown[: end.start()], shown[end.start() :]]
            pieces = [redact_text(piece) for piece in pieces]  # a glued `xAKIA...` is redacted all the same
        self._line = _line_after(line, "".join(pieces))
        return pieces

    def _drop(self, text: str) -> str:
        """`text` after the end of the secret being dropped ("" while it goes on)."""
        seen = self._tail + text
        end = self._until.search(seen) if self._until is not None else None
        if end is None:
            self._tail = seen[-_PEM_TAIL:] if self._until is _PEM_END else ""
            return ""
        self._until, self._tail = None, ""
        return seen[end.end() :]


def _line_after(line: str, text: str) -> str:
    """The current line's last _LINE_CONTEXT characters once `text` is shown after `line`."""
    newline = max(text.rfind("\n"), text.rfind("\r"))
    line = text[newline + 1 :] if newline >= 0 else line + text
    return line[-_LINE_CONTEXT:]


def _plain(text: str) -> bool:
    return not _has_trigger(text) and _prefix_start(text) == len(text)


def _hold_from(text: str, new: int) -> int:
    """Where the possible secret that `text` ends in starts (len(text) if it ends in none): its
    last token if a trigger in it reaches past `new` (what was shown before), a trigger's first
    letters, or an unfinished head (`password = hunter2 ` may end its line next) before those."""
    token = _token_start(text, len(text))
    last = text[max(token, new - _LONGEST_PREFIX) :].lower()
    cut = token if any(trigger in last for trigger in _TRIGGERS) else _prefix_start(text)
    while _has_trigger(text[max(0, cut - _HEAD_WINDOW) : cut]):
        head = _OPEN.search(text, max(0, cut - _HEAD_WINDOW), cut)
        if head is None or head.start() == cut:
            break
        cut = _token_start(text, head.start())  # all of `DB_PASS`, not just `PASS`
    return cut


def _token_start(text: str, end: int) -> int:
    return max(text.rfind(space, 0, end) for space in " \n\t\r") + 1


def _prefix_start(text: str) -> int:
    """Where the first letters of a held trigger end `text` (`sk-pr`, `-----BEG`), or len(text)."""
    end = len(text)
    tail = text[-_LONGEST_PREFIX:].lower()
    # Cheap checks first: most text ends in no such letters, or in a long word.
    if not tail.endswith(_HELD_TUPLE) and (
        not tail.endswith(_WORD_TUPLE) or (end > _LONGEST_PREFIX and text[-_LONGEST_PREFIX - 1 :].isalnum())
    ):
        return end
    for size in range(len(tail), 0, -1):
        piece = tail[-size:]
        if piece in _HELD_PREFIXES or (piece in _WORD_PREFIXES and (size == end or not _is_word(text[end - size - 1]))):
            return end - size
    return end


def _ends_in_name(text: str) -> bool:
    """Whether `text` ends in a key name's first letters (`pas`, `Bear`, `https:`)."""
    return text[-_LONGEST_PREFIX:].lower().endswith(_NAME_PREFIXES)


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


# --- a run's events ---------------------------------------------------------------------------

_Delta = TextDelta | ThoughtDelta | CompactionChunk
_UNSEEN = (UsageReported, TranscriptSaved, StateSaved)  # never shown between deltas, so they end no stream


class RunRedactor:
    """One run's events as the journal stores them and the editor is shown them: every field
    redacted, streamed text through one StreamRedactor per stream. Held text is let out before
    any event that interrupts the streams (a tool call, the end of the turn)."""

    def __init__(self) -> None:
        self._streams: dict[tuple[str, str], tuple[StreamRedactor, _Delta]] = {}
        self._seq = 0

    def envelopes(self, envelope: Envelope) -> list[Envelope]:
        """The redacted events for `envelope`, numbered anew: a delta held back gives none, and
        the text let out before an event is one more."""
        shown: list[Envelope] = []
        for event in self.events(envelope.event):
            self._seq += 1
            shown.append(replace(envelope, seq=self._seq, event=event))
        return shown

    def events(self, event: RuntimeEvent) -> list[RuntimeEvent]:
        if isinstance(event, TextDelta | ThoughtDelta | CompactionChunk):
            key = (event.kind, event.compaction_id if isinstance(event, CompactionChunk) else "")
            ended = self._next_message(key, event)
            stream = self._streams.setdefault(key, (StreamRedactor(), event))[0]
            pieces = stream.feed(event.text)
            if ended:
                return [*ended, *(replace(event, text=text) for text in pieces if text)]
            if len(pieces) == 1 and pieces[0] is event.text:
                return [event]
            return [replace(event, text=text) for text in pieces if text]
        if isinstance(event, _UNSEEN):
            return [redact_event(event)]
        return [*self.finish(), redact_event(event)]

    def _next_message(self, key: tuple[str, str], event: _Delta) -> list[RuntimeEvent]:
        """What the stream still holds of its message when `event` starts another (an agent
        below's own message ids): let out with the message it belongs to, before the next."""
        held = self._streams.get(key)
        if held is None or isinstance(event, CompactionChunk) or isinstance(held[1], CompactionChunk):
            return []
        if held[1].message_id == event.message_id:
            return []
        del self._streams[key]
        return [replace(held[1], text=text) for text in held[0].finish() if text]

    def finish(self) -> list[RuntimeEvent]:
        """Whatever the streams still hold, as deltas."""
        held: list[RuntimeEvent] = []
        for stream, template in self._streams.values():
            held += [replace(template, text=text) for text in stream.finish() if text]
        self._streams.clear()
        return held


def redact_event(event: AnyEvent) -> AnyEvent:
    """The event with every field redacted as the journal stores it (itself if nothing was)."""
    kind, payload = encode_event(event)
    redacted = redact(payload)
    return event if redacted == payload else cast("AnyEvent", decode_event(kind, redacted))
