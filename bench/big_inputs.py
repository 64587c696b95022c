"""Benchmark: what big inputs cost the server in memory and journal (issue 25, item 4).

Each case runs a real `python -m acp_server` (or, for `read`, the server's file service in a
child process of its own) and prints the peak resident memory (VmHWM, Linux /proc) and, where
a journal is written, its size on disk (the database and its WAL) and what the editor was sent:

- `reply`: a scripted agent says SIZE MB in 64 KiB deltas;
- `tool`: a scripted tool reads a 15 MB file whole (under the read cap) as its result;
- `read`: lines 1-5 of a SIZE MB file, read by the local fallback (`Files.read`, no editor fs);
- `config`: `ACP_SERVER_CONFIG=/dev/zero`, how the server ends within 10 s.

A benchmark, not a test: nothing is asserted. Run it in another checkout (`--repo`) to compare.

    .venv/bin/python bench/big_inputs.py [--size MB] [--repo DIR] [--case reply|tool|read|config]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parent.parent
MB = 1 << 20
DELTA = 1 << 16


def peak_mb(pid: int) -> float:
    """The process's peak resident memory so far, in MB (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def disk_mb(db: Path) -> float:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*")) / MB


class Client:
    """Just enough of an ACP client: send a request, read frames until its answer, count text."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self._in: IO[bytes] = proc.stdin
        self._out: IO[bytes] = proc.stdout
        self._next = 0
        self.shown = 0  # characters of reply text and tool content the editor was sent

    def call(self, method: str, params: dict[str, Any]) -> Any:
        self._next += 1
        frame = {"jsonrpc": "2.0", "id": self._next, "method": method, "params": params}
        self._in.write(json.dumps(frame).encode() + b"\n")
        self._in.flush()
        while line := self._out.readline():
            message = json.loads(line)
            if message.get("id") == self._next and "method" not in message:
                return message.get("result", message.get("error"))
            update = message.get("params", {}).get("update", {})
            self.shown += (
                len(update.get("content", {}).get("text", "")) if isinstance(update.get("content"), dict) else 0
            )
            for item in update.get("content", []) if isinstance(update.get("content"), list) else []:
                self.shown += len(item.get("content", {}).get("text", ""))
        raise SystemExit(f"the server closed stdout before answering {method}")


def serve_turn(repo: Path, workdir: Path, steps: list[dict[str, Any]]) -> str:
    script = workdir / "script.json"
    script.write_text(json.dumps({"scenarios": [{"match": "", "steps": steps}]}))
    db = workdir / "journal" / "journal.db"
    db.parent.mkdir()
    command = [sys.executable, "-m", "acp_server", "--agent", "scripted", "--script", str(script), "--db", str(db)]
    proc = subprocess.Popen(command, cwd=repo, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        client = Client(proc)
        client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        session = client.call("session/new", {"cwd": str(workdir), "mcpServers": []})
        started = time.perf_counter()
        client.call("session/prompt", {"sessionId": session["sessionId"], "prompt": [{"type": "text", "text": "go"}]})
        took, peak = time.perf_counter() - started, peak_mb(proc.pid)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=120)
    return (
        f"server peak {peak:,.0f} MB, journal {disk_mb(db):,.1f} MB on disk, "
        f"{client.shown / MB:,.2f} MB shown to the editor, {took:.1f} s"
    )


def case_reply(repo: Path, workdir: Path, size: int) -> str:
    return serve_turn(repo, workdir, [{"say": "x" * DELTA, "repeat": size * MB // DELTA}])


def case_tool(repo: Path, workdir: Path, size: int) -> str:
    (workdir / "big.txt").write_bytes((b"y" * 99 + b"\n") * (15 * MB // 100))
    return serve_turn(repo, workdir, [{"tool": "Read big.txt", "kind": "read", "read_file": "big.txt"}])


READER = """
import asyncio, resource, sys
from acp_server.turns.client import ClientCapabilities
from acp_server.turns.files import Files
files = Files(channel=None, client=ClientCapabilities(), cwd=sys.argv[1], roots=(sys.argv[1],))
text = asyncio.run(files.read("big.txt", 1, 5))
print(len(text), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def case_read(repo: Path, workdir: Path, size: int) -> str:
    with (workdir / "big.txt").open("wb") as f:
        line = b"z" * 1023 + b"\n"
        for _ in range(size * 1024):
            f.write(line)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", READER, str(workdir)], cwd=repo, capture_output=True, text=True, check=True
    )
    chars, peak_kb = (int(word) for word in done.stdout.split())
    return f"{chars} characters read, peak {peak_kb / 1024:,.0f} MB, {time.perf_counter() - started:.1f} s"


def case_config(repo: Path, workdir: Path, size: int) -> str:
    env = {**os.environ, "ACP_SERVER_CONFIG": "/dev/zero"}
    command = [sys.executable, "-m", "acp_server", "--agent", "openai", "--db", str(workdir / "j.db")]
    proc = subprocess.Popen(command, cwd=repo, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    peak, deadline = 0.0, time.monotonic() + 10
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            peak = max(peak, peak_mb(proc.pid))
        except (OSError, ValueError):
            break
        time.sleep(0.1)
    status = proc.poll()
    if status is None:
        proc.kill()
        proc.wait()
        return f"still running after 10 s (killed), peak {peak:,.0f} MB"
    return f"exited with status {status}, peak {peak:,.0f} MB"


CASES = {"reply": case_reply, "tool": case_tool, "read": case_read, "config": case_config}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100, help="MB of the reply; the file read is 5 times that")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose server is measured")
    parser.add_argument("--case", choices=CASES, action="append", help="one case (repeatable); default all")
    args = parser.parse_args()
    for name in args.case or CASES:
        with tempfile.TemporaryDirectory(prefix="acp-big-") as workdir:
            size = args.size * 5 if name == "read" else args.size
            label = {"reply": f"a {size} MB reply", "tool": "a 15 MB tool result", "read": f"lines 1-5 of {size} MB"}
            shown = label.get(name, "ACP_SERVER_CONFIG=/dev/zero")
            print(f"{shown}: {CASES[name](args.repo.resolve(), Path(workdir), size)}", flush=True)


if __name__ == "__main__":
    main()
