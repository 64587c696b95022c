"""Replies with HAUI fences used by the renderer's golden tests: each name has its expected
Markdown in tests/golden/haui/<name>.md (reviewed by hand; never regenerate them blindly)."""

from __future__ import annotations

import json
from typing import Any

SCHEMA = "hermes.adaptive-ui"


def fence(body: object, tag: str = "hermes-ui") -> str:
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    return f"```{tag}\n{text}\n```\n"


def envelope(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"schema": SCHEMA, "version": 1, "blocks": list(blocks)}


NOTICE = {"type": "notice", "body": "Repaired."}
NOTICE_JSON = '{"type": "notice", "body": "Repaired."}'

# One reply per block type.
BLOCKS: dict[str, str] = {
    "stat": fence(
        envelope(
            {"type": "stat", "label": "Revenue", "value": "$1.2M", "delta": "+12%", "trend": "up"},
            {"type": "stat", "label": "Churn", "value": 0.5, "delta": "-0.1", "trend": "down"},
            {"type": "notice", "body": "Between."},
            {"type": "stat", "label": "NPS", "value": 41, "trend": "flat", "caption": "last 30 days"},
        )
    ),
    "comparison_table": fence(
        envelope(
            {
                "type": "comparison",
                "title": "Plans",
                "items": [
                    {"label": "Basic", "values": {"Price": "$5", "Seats": 1}},
                    {"label": "Pro", "values": {"Price": "$20", "Support": "24/7"}},
                ],
            }
        )
    ),
    "comparison_lists": fence(
        envelope(
            {
                "type": "comparison",
                "items": [
                    {"label": "SQLite", "points": ["one file", "no server"]},
                    {"label": "Postgres", "points": ["concurrent writers"]},
                ],
            }
        )
    ),
    "key_value": fence(
        envelope(
            {
                "type": "key_value",
                "title": "Build",
                "items": [
                    {"key": "Branch", "value": "main"},
                    {"key": "Tests", "value": 412},
                    {"key": "Status", "value": "green | passing"},
                ],
            }
        )
    ),
    "table": fence(
        envelope(
            {
                "type": "table",
                "title": "Sales",
                "columns": ["Region", "Units", "Note"],
                "rows": [["EU", 12, "a|b"], ["US", 7.5], ["*APAC*", None, "`x`"]],
            }
        )
    ),
    "chart": fence(
        envelope(
            {
                "type": "chart",
                "title": "Visits",
                "kind": "line",
                "labels": ["Mon", "Tue", "Wed", "Thu"],
                "series": [{"name": "Web", "values": [3, None, 9, 6]}, {"name": "App", "values": [1, 2, 3, 4]}],
            }
        )
    ),
    "list_ordered": fence(
        envelope(
            {
                "type": "list",
                "title": "Next steps",
                "ordered": True,
                "items": [
                    {"text": "Ship the fix", "meta": ["P1", "today"]},
                    {"text": "Write the notes", "detail": "for the release"},
                    "Tell the team",
                ],
            }
        )
    ),
    "list_bullets": fence(envelope({"type": "list", "items": ["one", "two"]})),
    "notice": fence(
        envelope(
            {
                "type": "notice",
                "tone": "warning",
                "title": "Key expires",
                "body": "Rotate the **API key** before Friday.\nSee the runbook.",
            }
        )
    ),
    "disclosure": fence(
        envelope(
            {
                "type": "disclosure",
                "title": "How it was measured",
                "body": "Median of *five* runs.",
                "blocks": [
                    {"type": "key_value", "items": [{"key": "Runs", "value": 5}]},
                    {"type": "disclosure", "title": "Raw data", "body": "1, 2, 3"},
                ],
            }
        )
    ),
    "actions": fence(
        envelope(
            {
                "type": "actions",
                "actions": [
                    {"type": "open_url", "label": "Runbook", "url": "https://example.com/runbook?a=1"},
                    {"type": "copy", "label": "Command", "value": "git push --force-with-lease"},
                    {"type": "copy", "label": "Tricky", "value": "a `b` c"},
                    {"type": "ask", "label": "Ask", "prompt": "Show March too"},
                ],
            }
        )
    ),
    "actions_documented": fence(
        envelope(
            {
                "type": "actions",
                "title": "Next",
                "items": [
                    {"label": "Runbook", "action": "open_url", "value": "https://example.com/runbook"},
                    {"label": "Script", "action": "open_url", "value": "javascript:alert(1)"},
                    {"label": "Login", "action": "open_url", "value": "https://user:pw@example.com/"},
                    {"label": "Command", "action": "copy", "value": "make test"},
                    {"label": "Nothing", "action": "copy"},
                    {"label": "March", "action": "ask", "value": "Show March too"},
                    {"label": "Retry", "action": "retry", "value": "now"},
                ],
            }
        )
    ),
    "vivid": fence(
        "\n".join(
            json.dumps(line)
            for line in [
                {"createSurface": {"surfaceId": "s1"}},
                {
                    "updateComponents": {
                        "surfaceId": "s1",
                        "components": [
                            {"id": "root", "component": "Column", "children": ["kpi", "tbl", "cmp", "more", "root"]},
                            {"id": "kpi", "component": "Row", "children": ["s1", "s2"]},
                            {"id": "s1", "component": "Stat", "label": "Revenue", "value": "1.2M", "trend": "up"},
                            {"id": "s2", "component": {"Stat": {"label": {"literalString": "Users"}, "value": 42}}},
                            {"id": "tbl", "component": "Table", "columns": ["A", "B"], "rows": [[1, 2]]},
                            {
                                "id": "cmp",
                                "component": "Compare",
                                "items": [{"label": "X", "points": ["x1"]}, {"label": "Y", "points": ["y1"]}],
                            },
                            {"id": "more", "component": "Column", "children": ["link", "ask", "note"]},
                            {"id": "link", "component": "Link", "label": "Docs", "url": "https://example.org/"},
                            {"id": "ask", "component": "Choices", "options": ["Yes", {"label": "No"}]},
                            {"id": "note", "component": "Text", "text": "not a HAUI block"},
                        ],
                    }
                },
            ]
        ),
        "vivid",
    ),
}

# One reply per repaired slip; each is drawn as the notice "Repaired." (golden: slip.md).
SLIPS: dict[str, str] = {
    "fence_hermes_ui": fence(envelope(NOTICE), "hermes_ui"),
    "fence_hermesui": fence(envelope(NOTICE), "hermesui"),
    "fence_haui": fence(envelope(NOTICE), "haui"),
    "fence_upper_case": fence(envelope(NOTICE), "Hermes-UI"),
    "json_fence_naming_schema": fence(envelope(NOTICE), "json"),
    "curly_quotes": fence(
        "{\u201cschema\u201d: \u201chermes.adaptive-ui\u201d, \u201cversion\u201d: 1, "
        "\u201cblocks\u201d: [{\u201ctype\u201d: \u201cnotice\u201d, \u201cbody\u201d: \u201cRepaired.\u201d}]}"
    ),
    "trailing_commas": fence('{"version": 1, "blocks": [' + NOTICE_JSON[:-1] + ", }, ], }"),
    "bare_array": fence("[" + NOTICE_JSON + "]"),
    "single_block": fence(NOTICE_JSON),
    "missing_version": fence({"schema": SCHEMA, "blocks": [NOTICE]}),
    "quoted_version": fence({"schema": SCHEMA, "version": "1", "blocks": [NOTICE]}),
    "missing_schema": fence({"version": 1, "blocks": [NOTICE]}),
    "tilde_fence": "~~~hermes-ui\n" + json.dumps(envelope(NOTICE)) + "\n~~~\n",
    "unclosed_json": fence('{"blocks": [{"type": "notice", "body": "Repaired.'),
}
