"""Hermes alone, the ceiling row of bench/hermes_bench.py: one AIAgent built as acp-server builds
it (adapters/hermes/setup.py), with a no-op stream callback, in its own process, so no ACP work
competes with Hermes' own parsing. Prints `ready` once built; then each line read from stdin
runs one turn on the conversation so far (as a session's prompts do) and prints a JSON line:
seconds from the line to the first delta, seconds from the first delta to the end of the turn,
and how many deltas came.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapters.hermes import setup


def main() -> None:
    runtime = setup.resolve()
    agent: Any = setup.hermes("run_agent").AIAgent(**setup.agent_kwargs(runtime, session_id="alone", mcp_names=()))
    setup.detach_state_db(agent, runtime.home)
    agent._print_fn = lambda *_args, **_kwargs: None
    firsts: list[float] = []
    count = 0

    def on_delta(text: str | None) -> None:
        nonlocal count
        if text:
            if not firsts:
                firsts.append(time.monotonic())
            count += 1

    agent.stream_delta_callback = on_delta
    print("ready", flush=True)
    history: list[Any] = []
    for _line in sys.stdin:
        firsts.clear()
        count = 0
        received = time.monotonic()
        result = agent.run_conversation(user_message="go", conversation_history=history, task_id="alone")
        ended = time.monotonic()
        history = result["messages"]
        first = firsts[0] if firsts else ended
        print(json.dumps({"first": first - received, "stream": ended - first, "deltas": count}), flush=True)


if __name__ == "__main__":
    main()
