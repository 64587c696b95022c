"""The ACP runtime passes the adapter contract, with acp-server itself as the agent below."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp_child import Runtimes, child_argv
from scripted_contract import SCENARIOS, ScriptedPrompts

from acp_server.downstream.runtime import AcpRuntime
from adapters.contract import AdapterContract


class TestAcpRuntime(ScriptedPrompts, AdapterContract):
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
