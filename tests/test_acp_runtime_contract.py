"""The ACP runtime passes the adapter contract, with acp-server itself as the agent below."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp_child import Runtimes, child_argv

from acp_server.downstream.runtime import AcpRuntime
from adapters.contract import AdapterContract

SCENARIOS = [
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


class TestAcpRuntime(AdapterContract):
    turn_timeout = 30.0  # the first turn of each test starts the agent below

    @pytest.fixture(autouse=True)
    def _agents(self, tmp_path: Path) -> Iterator[None]:
        self.root = tmp_path
        self.runtimes = Runtimes()
        yield
        self.runtimes.close()

    def make_adapter(self) -> AcpRuntime:
        return self.runtimes.make(child_argv(self.root, SCENARIOS))

    def turn_fields(self) -> dict[str, Any]:
        return {"cwd": str(self.root)}

    def prompt_that_streams(self) -> str:
        return "stream"

    def prompt_that_asks_permission(self) -> str:
        return "write"

    def prompt_that_raises(self) -> str:
        return "boom"

    def prompt_that_runs_long(self) -> str:
        return "long"
