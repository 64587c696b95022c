"""The reference agent of bench/compare.py, written on the official Python SDK
(`agent-client-protocol` from PyPI, module `acp`), the way a typical SDK agent streams: one
`session/update` notification (`session_update(...)`) per text delta, awaited in turn.

A prompt whose text is `stream N TEXT` says TEXT N times; `latency N INTERVAL_MS` says N deltas
`<time.time_ns()>;`, one every INTERVAL_MS ms on a fixed schedule, as bench/latency_agent.py does
for acp-server (bench/latency.py compares the two); any other prompt is echoed once.
Sessions live in memory only (the SDK has no journal).

    .venv/bin/python bench/sdk_agent.py
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    Agent,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    run_agent,
    update_agent_message_text,
)
from acp.interfaces import Client
from acp.schema import AgentCapabilities, Implementation


class StreamingAgent(Agent):
    _conn: Client

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any
    ) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(name="sdk-reference-agent", version="0"),
        )

    async def new_session(
        self, cwd: str, additional_directories: Any = None, mcp_servers: Any = None, **kwargs: Any
    ) -> NewSessionResponse:
        return NewSessionResponse(session_id=f"sess_{uuid.uuid4().hex}")

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        text = "\n".join(getattr(block, "text", "") for block in prompt)
        words = text.split(" ", 2)
        if len(words) == 3 and words[0] == "latency" and words[1].isdigit():
            await self._latency(session_id, int(words[1]), float(words[2]) / 1000)
        elif len(words) == 3 and words[0] == "stream" and words[1].isdigit():
            delta = words[2]
            for _ in range(int(words[1])):
                await self._conn.session_update(session_id=session_id, update=update_agent_message_text(delta))
        elif text:
            await self._conn.session_update(session_id=session_id, update=update_agent_message_text(text))
        return PromptResponse(stop_reason="end_turn")

    async def _latency(self, session_id: str, count: int, interval: float) -> None:
        start = time.monotonic()
        for index in range(count):
            delay = start + index * interval - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            stamp = update_agent_message_text(f"{time.time_ns()};")
            await self._conn.session_update(session_id=session_id, update=stamp)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


def main() -> None:
    asyncio.run(run_agent(StreamingAgent()))


if __name__ == "__main__":
    main()
