"""The HAUI contract as an agent asks a model for it: the text an agent that builds a system
prompt adds, for the `vivid` response style, to each turn's context tier (never to the stored
system prompt, so earlier replies keep the style they were made with). The server draws the
blocks (acp_server.haui); agents only ask for them, so this lives where adapters can import it.
"""

from __future__ import annotations

from typing import Literal, get_args

from adapters.base import ConfigChoice, ConfigOption

ResponseStyle = Literal["plain", "rich", "vivid"]
RESPONSE_STYLES: tuple[str, ...] = get_args(ResponseStyle)
RESPONSE_STYLE_OPTION = "response_style"  # the config option id an agent declares

HAUI_CONTRACT = """\
Rich reply blocks (Hermes Adaptive UI v1). On a substantive reply - numbers, comparisons, \
steps, findings - you may add fenced blocks the client draws natively:

```hermes-ui
{"schema": "hermes.adaptive-ui", "version": 1, "blocks": [
  {"type": "stat", "id": "tests", "label": "Tests passing", "value": 412, "delta": "+12", "trend": "up"}
]}
```

Block types and their props:
- stat: label, value, delta, trend (up|down|flat), caption
- comparison: title, items [{label, values {name: value}} or {label, points [text]}] (2 or more)
- key_value: title, items [{key, value}]
- table: title, columns [text], rows [[cell]] (at most 8 columns, 50 rows)
- chart: title, kind, labels [text], series [{name, values [number or null]}]
- list: title, ordered (true|false), items [text or {text, detail, meta [tag]}]
- notice: tone (info|success|warning|error), title, body (Markdown)
- disclosure: title, body (Markdown), blocks [nested blocks] (two levels at most)
- actions: actions [{type: open_url, label, url (https)} | {type: copy, label, value} | \
{type: ask, label, prompt}]
Any block may carry "fallback": the Markdown shown if it cannot be drawn.

Rules:
- The reply must read well without the blocks: say the point in prose first; blocks support it.
- Use blocks only on substantive replies; never for a greeting, a one-line answer or a question.
- Never invent data: every number, name and value in a block comes from this conversation, a \
file you read or a tool result. If you do not have the data, write prose instead.
- Never claim an action in a block (that something was sent, saved, deployed or run) unless a \
tool in this turn did it; actions are suggestions for the user to take.
- At most 16 blocks in a fence; valid JSON, no comments, no HTML.
"""


RICH_GUIDANCE = """\
Format substantive replies in Markdown the editor renders: short headings, lists for steps, \
tables for comparisons, code fences for code. Keep one-line answers plain."""


def style_context(style: str) -> str:
    """What to add to a turn's context tier for `style`: Markdown guidance for `rich`, the HAUI
    contract for `vivid`, nothing for `plain` (or an unknown style).

    An agent declares a `response_style` ConfigOption (choices RESPONSE_STYLES, default
    "plain"), reads `turn.config.get(RESPONSE_STYLE_OPTION)` each turn, and appends
    `style_context(...)` to that turn's context (not to the stored system prompt).
    """
    return {"rich": RICH_GUIDANCE, "vivid": HAUI_CONTRACT}.get(style, "")


def response_style_option() -> ConfigOption:
    """The `response_style` option as an agent declares it (default `plain`)."""
    return ConfigOption(
        id=RESPONSE_STYLE_OPTION,
        name="Response style",
        default="plain",
        choices=tuple(ConfigChoice(style, style.capitalize()) for style in RESPONSE_STYLES),
        description="Plain text, Markdown (rich), or Markdown with drawn blocks (vivid)",
    )
