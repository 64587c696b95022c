"""The adapter contract every agent passes, run against the openai agent and a fake endpoint."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_openai import ContractPrompts, FakeOpenAI, contract_answers

from adapters.contract import AdapterContract
from adapters.openai import OpenAIAdapter

pytest.importorskip("httpx", reason="the openai extra is not installed")


answer = contract_answers({"prompt_tokens": 10, "completion_tokens": 3, "cost": 0.001})


class TestOpenAIAdapterContract(ContractPrompts, AdapterContract):
    @pytest.fixture(autouse=True)
    def endpoint(self, tmp_path) -> Iterator[None]:
        with FakeOpenAI() as fake:
            fake.responder = answer
            self.fake, self.tmp_path = fake, tmp_path
            yield

    def make_adapter(self) -> OpenAIAdapter:
        return OpenAIAdapter(
            model="gpt-4o",
            base_url=self.fake.base_url,
            api_key="sk-test-0000000000",
            env={"XDG_CONFIG_HOME": str(self.tmp_path / "config")},
        )
