"""The adapter contract, run against Hermes' real AIAgent and the fake model on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("run_agent", reason="the hermes extra is not installed")

from fake_openai import ContractPrompts, contract_answers
from hermes_home import hermes_model

from adapters.contract import AdapterContract
from adapters.hermes import HermesAdapter

answer = contract_answers({"prompt_tokens": 10, "completion_tokens": 3})


class TestHermesAdapterContract(ContractPrompts, AdapterContract):
    turn_timeout = 30.0  # the first AIAgent of a process takes a second or two to build

    @pytest.fixture(autouse=True)
    def endpoint(self, tmp_path, monkeypatch) -> Iterator[None]:
        with hermes_model(tmp_path, monkeypatch) as fake:
            fake.responder = answer
            self.fake, self.tmp_path = fake, tmp_path
            yield

    def make_adapter(self) -> HermesAdapter:
        return HermesAdapter()
