"""What the server's cold start spends on imports: runs `python -X importtime -m acp_server` (serving,
answering one `initialize`, then stdin EOF) several times with a private bytecode cache, and
prints the median self time per top-level package and the heaviest import subtrees.

    .venv/bin/python bench/importtime.py [--runs 5] [--agent echo] [--top 25]
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import CHILD_ENV, PY, REPO

INIT = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}\n'


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
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(CHILD_ENV, PYTHONPYCACHEPREFIX=os.path.join(tmp, "pycache"))
        command = [PY, "-X", "importtime", "-m", "acp_server", "--agent", args.agent, "--db", str(Path(tmp, "j.db"))]
        runs = []
        for index in range(args.runs + 1):  # the first run fills the bytecode cache
            done = subprocess.run(command, cwd=REPO, input=INIT, capture_output=True, env=env, timeout=60)
            if b'"result"' not in done.stdout:
                sys.exit(f"no initialize result: {done.stdout[:300]!r} {done.stderr[-1000:]!r}")
            if index:
                runs.append(parse(done.stderr.decode()))
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
        f"median of {args.runs} runs, agent {args.agent}: {total / 1000:.1f} ms importing in all "
        f"(-X importtime inflates this somewhat)\n\nself time by top-level package:"
    )
    names = set().union(*by_package)
    for value, name in sorted(((statistics.median(p.get(n, 0) for p in by_package), n) for n in names), reverse=True)[
        : args.top
    ]:
        print(f"  {value / 1000:7.1f} ms  {name}")
    print("\nheaviest subtrees (cumulative; nested ones overlap, the first importer pays):")
    modules = set().union(*subtrees)
    for value, name in sorted(((statistics.median(s.get(m, 0) for s in subtrees), m) for m in modules), reverse=True)[
        : args.top
    ]:
        print(f"  {value / 1000:7.1f} ms  {name}")


if __name__ == "__main__":
    main()
