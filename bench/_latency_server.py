"""Fallback launcher for the latency probe, for a registry that cannot load `module:factory`:
serves `bench.latency_agent.make_agent()` on stdio with a journal, as `acp-server` would.

    .venv/bin/python bench/_latency_server.py --db FILE
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    args = parser.parse_args()

    import anyio

    from acp_server.acp.handlers import AcpAgent
    from acp_server.acp.server import serve_stdio
    from bench.latency_agent import make_agent
    from journal.store import Journal

    async def serve() -> None:
        journal = await Journal.open(args.db)
        try:
            await serve_stdio(AcpAgent(make_agent(), journal=journal))
        finally:
            await journal.close()

    anyio.run(serve)


if __name__ == "__main__":
    main()
