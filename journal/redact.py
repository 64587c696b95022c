"""Secrets out of what the journal stores: `redact(value)` returns a copy with secrets as "[REDACTED]".

Dict values are redacted whole when their key names a secret: api_key/apikey, token, secret,
password/passwd, authorization/auth, credential(s), private_key, cookie, as a whole key or a
suffix after `_`/`-` or camelCase (`access_token`, `X-Api-Key`, `clientSecret`; not `max_tokens`).
Inside strings: `Bearer <token>`, `Authorization: <value>`, `sk-`/`sk-proj-`/`sk-ant-` keys,
GitHub `ghp_`/`gho_`/`ghs_`/`ghu_`/`ghr_`/`github_pat_` tokens, AWS `AKIA`/`ASIA` key ids, Slack
`xox[abprs]-` tokens, JWTs, PEM private keys, `user:pass@` in URLs (the password goes), and
`key=value` / `"key": "value"` where the key names a secret (the value goes, the key stays).
Dict keys are scanned like any text too (a remembered permission is keyed by a command).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, cast

REDACTED = "[REDACTED]"

_KEY_NAMES = r"password|passwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|credentials?|auth"
_CRED_CHARS = r"[A-Za-z0-9._~+/-]"

# One alternation, so a string is scanned once; `*_head` groups are kept, `*_val` quotes too.
_PATTERN = re.compile(
    "|".join(
        [
            r"(?P<pem>-----BEGIN [A-Z ]*PRIVATE KEY-----(?s:.*?)-----END [A-Z ]*PRIVATE KEY-----)",
            r"(?P<header_head>(?i:\b(?:proxy-)?authorization)[\"']?\s*[:=]\s*[\"']?)"
            r"(?:(?i:basic|bearer|token|digest|negotiate)\s+[^\s\"']+|(?=[^\s\"']*\d)[^\s\"']{8,}"
            r"|[^\s\"']{24,})",
            # A word after "bearer" is a token only if it looks like one: a digit or 24+ chars.
            rf"(?P<bearer_head>(?i:\bbearer)\s+)(?:{_CRED_CHARS}{{24,}}|(?={_CRED_CHARS}*\d){_CRED_CHARS}{{8,}})=*",
            r"(?P<openai>\bsk-(?:(?:ant|proj|svcacct|admin)-[A-Za-z0-9_-]{16,}|[A-Za-z0-9]{20,}))",
            r"(?P<github>\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}))",
            r"(?P<aws>\b(?:AKIA|ASIA)[0-9A-Z]{16}\b)",
            r"(?P<slack>\bxox[abprs]-[A-Za-z0-9-]{10,})",
            r"(?P<jwt>\beyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,})",
            r"(?P<url_head>\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+(?=@)",
            # `token=x` (command lines, URLs, env files) takes any value; with spaces or a colon
            # only a quoted literal counts, so `token = get_token()` is code, not a secret.
            rf"(?P<assign_head>(?i:(?<![A-Za-z0-9])[\w.-]*?(?:{_KEY_NAMES}))=(?!=))"
            r"(?P<assign_val>\"[^\"\r\n]+\"|'[^'\r\n]+'|[^\s&;,\"'<>()\[\]{}]+)",
            rf"(?P<quoted_head>(?i:(?<![A-Za-z0-9])[\w.-]*?(?:{_KEY_NAMES}))[\"']?\s*[:=]\s*)"
            r"(?P<quoted_val>\"[^\"\r\n]+\"|'[^'\r\n]+')",
        ]
    )
)

# Every pattern above needs one of these (lowercased); most text has none and skips the regex.
_TRIGGERS = (
    "private key", "authorization", "bearer", "sk-", "ghp_", "gho_", "ghs_", "ghu_", "ghr_",
    "github_pat_", "akia", "asia", "xox", "eyj", "://", "pass", "secret", "token", "key",
    "credential", "auth",
)  # fmt: skip

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
    if len(text) < 8:
        return text
    lowered = text.lower()
    if not any(trigger in lowered for trigger in _TRIGGERS):
        return text
    return _PATTERN.sub(_replace, text)


def is_secret_key(key: object) -> bool:
    """Whether a dict key names a secret; keys that are not str (ints, ...) never do."""
    return _is_secret_key(key) if isinstance(key, str) else False


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
