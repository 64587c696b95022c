"""The adapter contract, run against Hermes' real AIAgent and the fake model on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("run_agent", reason="the hermes extra is not installed")

from fake_openai import FakeOpenAI, contract_answers
from hermes_home import make_home

from adapters.contract import AdapterContract
from adapters.hermes import HermesAdapter

answer = contract_answers({"prompt_tokens": 10, "completion_tokens": 3})


class TestHermesAdapterContract(AdapterContract):
    turn_timeout = 30.0  # the first AIAgent of a process takes a second or two to build

    @pytest.fixture(autouse=True)
    def endpoint(self, tmp_path, monkeypatch) -> Iterator[None]:
        with FakeOpenAI() as fake:
            fake.responder = answer
            monkeypatch.setenv("HERMES_HOME", str(make_home(tmp_path, fake.base_url)))
            self.fake, self.tmp_path = fake, tmp_path
            yield

    def make_adapter(self) -> HermesAdapter:
        return HermesAdapter()

    def turn_fields(self) -> dict[str, Any]:
        return {"cwd": str(self.tmp_path)}

    def prompt_that_asks_permission(self) -> str:
        return "create hello.txt"

    def prompt_that_raises(self) -> str:
        return "break"

    def prompt_that_runs_long(self) -> str:
        return "think forever"
