"""The agent `bench/watchers.py` streams: `--agent python --script stamped:run` (with bench/ on
PYTHONPATH). The prompt "N GAP_US" makes N deltas, each the monotonic clock's nanoseconds (20 digits) when it
was made and a ";" (so a reader on the same machine can tell each delta's latency, even when the
runner merged several into one frame), GAP_US microseconds apart (0: as fast as it can)."""

from __future__ import annotations

import time
from collections.abc import Iterator


def run(prompt: str, session: object) -> Iterator[str]:
    count, gap_us = (int(word) for word in prompt.split())
    due = time.monotonic()
    for _ in range(count):
        if gap_us:
            due += gap_us / 1e6
            time.sleep(max(0.0, due - time.monotonic()))  # paced against the schedule, not the last delta
        yield f"{time.monotonic_ns():020d};"  # 21 characters a delta
