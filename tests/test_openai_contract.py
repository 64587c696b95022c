"""The adapter contract every agent passes, run against the openai agent and a fake endpoint.

The fake answers by prompt: "hello" streams text, "create hello.txt" asks to write a file
(then says it is done once it sees the tool result), "think forever" holds its stream open
until cancelled, "break" fails with HTTP 400.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fake_openai import Failure, FakeOpenAI, Stream, reply

from adapters.contract import AdapterContract
from adapters.openai import OpenAIAdapter

pytest.importorskip("httpx", reason="the openai extra is not installed")


def answer(body: dict[str, Any]) -> Stream | Failure:
    messages = body["messages"]
    prompt = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    if messages[-1]["role"] == "tool":
        return reply("Done.", usage={"prompt_tokens": 50, "completion_tokens": 2})
    if prompt == "create hello.txt":
        return reply(tools=[("write_file", {"path": "hello.txt", "content": "hello\n"})])
    if prompt == "think forever":
        return reply("Thinking", hold_open=True)
    if prompt == "break":
        return Failure(400, "this request is broken")
    return reply("Hello there!", usage={"prompt_tokens": 10, "completion_tokens": 3, "cost": 0.001})


class TestOpenAIAdapterContract(AdapterContract):
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

    def turn_fields(self) -> dict[str, Any]:
        return {"cwd": str(self.tmp_path)}

    def prompt_that_asks_permission(self) -> str:
        return "create hello.txt"

    def prompt_that_raises(self) -> str:
        return "break"

    def prompt_that_runs_long(self) -> str:
        return "think forever"
