"""How warm the openai agent keeps a provider's prefix cache, and how big its requests get.

Runs a session of `--turns` turns (each: the model reads a file, then answers) through the real
server stack (in memory), the thread bridge and httpx, against the fake model on 127.0.0.1
(tests/fake_openai.py), which records every request's bytes. Prints, per model request, its
size and the share of its bytes equal to the previous request's start; then the same for a
model whose context window is small (`--window`), where compaction keeps requests bounded.

    .venv/bin/python bench/prefix_reuse.py [--turns 20] [--window 8000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import anyio  # noqa: E402
from fake_openai import Failure, FakeOpenAI, Stream, reply  # noqa: E402
from harness import running  # noqa: E402

from acp_server.acp.handlers import AcpAgent  # noqa: E402
from adapters.openai import OpenAIAdapter  # noqa: E402

NOTES = "".join(f"line {i}: some notes the agent reads every turn, {'and more ' * 6}\n" for i in range(40))


def respond(body: dict[str, Any]) -> Stream | Failure:
    if "tools" not in body:
        return reply("Summary: the user had the agent read notes.txt in every turn; nothing changed.")
    if body["messages"][-1]["role"] == "tool":
        return reply("I read the notes; they list forty lines.")
    return reply(tools=[("read_file", {"path": "notes.txt"})])


def shared_prefix(first: bytes, second: bytes) -> int:
    limit = min(len(first), len(second))
    low, high = 0, limit
    while low < high:  # binary search on equal prefixes: fast for megabyte bodies
        middle = (low + high + 1) // 2
        if first[:middle] == second[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


Row = tuple[int, float, float, bool]


async def session(turns: int, window: int | None, workdir: Path) -> list[Row]:
    """Per request: its bytes, the share of them equal to the previous agent request's start,
    the share of the previous request found at its start, and whether it is a summary request."""
    with FakeOpenAI(models=["gpt-4o"]) as fake:
        if window is not None:
            fake.models = [{"id": "gpt-4o", "object": "model", "context_window": window}]
            fake.context_limit = window
        fake.responder = respond
        env = {"XDG_CONFIG_HOME": str(workdir / "config")}
        adapter = OpenAIAdapter(model="gpt-4o", base_url=fake.base_url, api_key="sk-bench-000000000000", env=env)
        try:
            async with running(AcpAgent(adapter)) as editor:
                await editor.initialize()
                sid = await editor.new_session(workdir)
                for n in range(turns):
                    await editor.prompt(sid, f"turn {n + 1}: read notes.txt and tell me what it says")
        finally:
            adapter.close()
        bodies = [r for r in fake.requests if r.path.endswith("/chat/completions")]
        rows: list[Row] = []
        previous = b""
        for record in bodies:
            summary = "tools" not in record.body
            shared = shared_prefix(previous, record.raw)
            rows.append((len(record.raw), shared / len(record.raw), shared / max(len(previous), 1), summary))
            if not summary:
                previous = record.raw
        return rows


def report(title: str, rows: list[Row]) -> None:
    print(f"\n{title}")
    print(f"{'request':>7} {'bytes':>8} {'reused':>7} {'of prev':>8}")
    for index, (size, share, kept, summary) in enumerate(rows, 1):
        note = "  (summary request)" if summary else ""
        print(f"{index:>7} {size:>8} {share:>7.1%} {kept:>8.1%}{note}")
    agent = [row for row in rows[1:] if not row[3]]
    mean = sum(row[1] for row in agent) / max(len(agent), 1)
    whole = sum(row[2] > 0.99 for row in agent)
    print(
        f"{len(agent)} agent requests after the first: mean {mean:.1%} of their bytes reused; "
        f"{whole} start with (>99% of) the previous request; largest {max(r[0] for r in rows)} bytes"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--window", type=int, default=8000, help="tokens of the small-window run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        (workdir / "notes.txt").write_text(NOTES)
        report(f"{args.turns} turns, window large enough", anyio.run(session, args.turns, None, workdir))
        report(f"{args.turns} turns, window {args.window} tokens", anyio.run(session, args.turns, args.window, workdir))


if __name__ == "__main__":
    main()
