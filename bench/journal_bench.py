"""Benchmark: how fast the journal appends and replays events on a real SQLite file.

Appends N text deltas to one run (non-durable then `flush`; again with every 50th append
durable; again yielding to the loop after each append, as a streaming turn does), then
replays the session. Prints events per second. A benchmark, not a test: nothing is asserted
about speed; only the replayed count is checked.

    .venv/bin/python bench/journal_bench.py [--events N] [--runs K]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from adapters.events import Envelope, TextDelta
from journal import Journal, SessionRecord

DELTA = "a streamed chunk of agent text, about this long. "


async def append_run(journal: Journal, run_id: str, events: int, *, durable_every: int, yield_each: bool) -> None:
    await journal.start_run(run_id=run_id, session_id="bench")
    for seq in range(events):
        durable = durable_every > 0 and seq % durable_every == durable_every - 1
        await journal.append(Envelope(run_id, "bench", seq, TextDelta(DELTA)), durable=durable)
        if yield_each:
            await asyncio.sleep(0)
    await journal.flush()


async def replay(journal: Journal, run_id: str) -> int:
    return sum([1 async for _ in journal.events(run_id=run_id)])


async def timed(action: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await action()
    return time.perf_counter() - start


async def measure(path: Path, events: int, run: int) -> dict[str, float]:
    rates: dict[str, float] = {}
    async with await Journal.open(path) as journal:
        if await journal.get_session("bench") is None:
            await journal.create_session(SessionRecord(id="bench", cwd="/bench"))
        modes = {
            "append, non-durable + flush": {"durable_every": 0, "yield_each": False},
            "append, durable every 50": {"durable_every": 50, "yield_each": False},
            "append, yielding each event": {"durable_every": 0, "yield_each": True},
        }
        for name, options in modes.items():
            run_id = f"{run}-{name}"
            seconds = await timed(lambda r=run_id, o=options: append_run(journal, r, events, **o))
            rates[name] = events / seconds
        last = f"{run}-append, non-durable + flush"
        start = time.perf_counter()
        count = await replay(journal, last)
        rates["replay"] = count / (time.perf_counter() - start)
        if count != events:
            raise SystemExit(f"replayed {count} events, expected {events}")
    return rates


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "journal.db"
        results = [await measure(path, args.events, run) for run in range(args.runs)]
    print(f"{args.events} text deltas per run, {args.runs} runs, median of runs (events/s):")
    for name in results[0]:
        values = [result[name] for result in results]
        print(f"  {name:<30} {statistics.median(values):>10,.0f}   (min {min(values):,.0f})")


if __name__ == "__main__":
    asyncio.run(main())
