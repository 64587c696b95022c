"""What the server's cold start spends on imports: runs `python -X importtime -m acp_server` (serving,
answering `initialize` and `session/new`, then stdin EOF) several times with a private bytecode
cache, and prints the median self time per top-level package with the module of ours (or the
first outside module) that pulls it in, so what cannot be cut is visible, and the heaviest
import subtrees. Imports made after the session/new response (at exit) are counted too.

    .venv/bin/python bench/importtime.py [--runs 5] [--agent echo] [--top 25] [--until initialize]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import CHILD_ENV, PY, REPO

INIT = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}\n'


def new_session(cwd: str) -> bytes:
    params = {"cwd": cwd, "mcpServers": []}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": params}).encode() + b"\n"


def importers(rows: list[tuple[str, int, int, int]]) -> dict[str, str]:
    """For each top-level package, the module that first imported it: the nearest enclosing
    module of ours (acp_server, adapters, journal), else its outermost importer."""
    ours = ("acp_server", "adapters", "journal")
    found: dict[str, str] = {}
    stack: list[str] = []
    # Lines come in post-order (a module after its imports); reversed, each line follows its
    # importers, so the stack holds its ancestors. The last one seen is the first one imported.
    for name, depth, _self, _cumulative in reversed(rows):
        del stack[depth:]
        package = name.split(".")[0]
        outer = [m for m in stack if m.split(".")[0] != package]
        mine = [m for m in outer if m.split(".")[0] in ours]
        found[package] = mine[-1] if mine else (outer[0] if outer else "(at run time: a function-level import)")
        stack.append(name)
    return found


def parse(stderr: str) -> list[tuple[str, int, int, int]]:
    """(module, depth, self us, cumulative us) per `import time:` line."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative, name = line[len("import time:") :].split("|", 2)
        depth = (len(name) - len(name.lstrip(" ")) - 1) // 2
        rows.append((name.strip(), depth, int(self_us), int(cumulative)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--agent", default="echo")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--until", choices=("initialize", "session/new"), default="session/new")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(CHILD_ENV, PYTHONPYCACHEPREFIX=os.path.join(tmp, "pycache"))
        command = [PY, "-X", "importtime", "-m", "acp_server", "--agent", args.agent, "--db", str(Path(tmp, "j.db"))]
        runs = []
        frames = INIT + (new_session(tmp) if args.until == "session/new" else b"")
        for index in range(args.runs + 1):  # the first run fills the bytecode cache
            done = subprocess.run(command, cwd=REPO, input=frames, capture_output=True, env=env, timeout=60)
            if done.stdout.count(b'"result"') != frames.count(b"\n"):
                sys.exit(f"no initialize result: {done.stdout[:300]!r} {done.stderr[-1000:]!r}")
            if index:
                runs.append(parse(done.stderr.decode()))
    first_importer = importers(runs[-1])
    by_package: list[collections.Counter[str]] = []
    subtrees: list[dict[str, int]] = []
    for rows in runs:
        packages: collections.Counter[str] = collections.Counter()
        for name, _depth, self_us, _cumulative in rows:
            packages[name.split(".")[0]] += self_us
        by_package.append(packages)
        subtrees.append({name: cumulative for name, _d, _s, cumulative in reversed(rows)})
    total = statistics.median(sum(p.values()) for p in by_package)
    print(
        f"median of {args.runs} runs, agent {args.agent}, to the {args.until} response: {total / 1000:.1f} ms "
        f"importing in all (-X importtime inflates this somewhat)\n\nself time by top-level package "
        "(imported first by):"
    )
    names = set().union(*by_package)
    for value, name in sorted(((statistics.median(p.get(n, 0) for p in by_package), n) for n in names), reverse=True)[
        : args.top
    ]:
        print(f"  {value / 1000:7.1f} ms  {name:<28} {first_importer.get(name, '')}")
    print("\nheaviest subtrees (cumulative; nested ones overlap, the first importer pays):")
    modules = set().union(*subtrees)
    for value, name in sorted(((statistics.median(s.get(m, 0) for s in subtrees), m) for m in modules), reverse=True)[
        : args.top
    ]:
        print(f"  {value / 1000:7.1f} ms  {name}")


if __name__ == "__main__":
    main()
