"""The latency probe of bench/compare.py: an adapter whose text deltas carry the wall-clock time
(`time.time_ns()`) at which the agent handed them to its sink.

A prompt `latency N INTERVAL_MS` emits N deltas `<ns>;`, one every INTERVAL_MS milliseconds
(paced against a fixed schedule, so the worker does not drift or saturate anything). The
client reads the same clock when a frame arrives; a frame that carries several merged deltas
carries several stamps, and each is measured. Any other prompt is echoed.

Loaded with `--agent bench.latency_agent:make_agent` where the registry takes module:factory,
else through bench/_latency_server.py.
"""

from __future__ import annotations

import time

from adapters.base import AdapterCapabilities, Health, Sink, TurnInput
from adapters.events import StopReason


class LatencyAdapter:
    name = "latency-probe"

    def capabilities(self) -> AdapterCapabilities:
        return AdapterCapabilities()

    def health(self) -> Health:
        return Health(True, "benchmark probe")

    def run_turn(self, turn: TurnInput, sink: Sink) -> StopReason:
        words = turn.text.split()
        if len(words) != 3 or words[0] != "latency":
            sink.text(turn.text or "(empty)")
            return "end_turn"
        count, interval = int(words[1]), float(words[2]) / 1000
        start = time.monotonic()
        for index in range(count):
            delay = start + index * interval - time.monotonic()
            if delay > 0:
                sink.sleep(delay)
            sink.text(f"{time.time_ns()};")
        return "end_turn"

    def cancel(self, session_id: str) -> None:
        return None


def make_agent() -> LatencyAdapter:
    return LatencyAdapter()
