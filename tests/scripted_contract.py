"""The scenarios behind every contract run of the scripted agent (directly, or as the ACP agent
below `--agent acp`), and the prompts that play them as an `AdapterContract`'s hooks."""

from __future__ import annotations

from typing import Any

SCENARIOS: list[dict[str, Any]] = [
    {
        "match": "stream",
        "steps": [{"think": "hmm"}, {"say": "one ", "repeat": 3}, {"usage": {"inputTokens": 5, "outputTokens": 3}}],
    },
    {
        "match": "write",
        "steps": [
            {"say": "writing"},
            {"tool": "Write a.txt", "kind": "edit", "ask": True, "write_file": {"path": "a.txt", "content": "A"}},
        ],
    },
    {"match": "boom", "steps": [{"say": "about to fail"}, {"error": "the scenario failed"}]},
    {"match": "long", "steps": [{"say": "working"}, {"sleep": 30}, {"say": "never"}]},
]


class ScriptedPrompts:
    """The prompts of `SCENARIOS` (list it before AdapterContract among the bases)."""

    def prompt_that_streams(self) -> str:
        return "stream"

    def prompt_that_asks_permission(self) -> str:
        return "write"

    def prompt_that_raises(self) -> str:
        return "boom"

    def prompt_that_runs_long(self) -> str:
        return "long"
