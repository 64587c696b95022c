"""acp-server itself as the ACP agent below acp-server, for the tests of `--agent acp`.

`child_argv` starts the scripted agent on a scenario file with a journal of its own (the
parent's `ACP_SERVER_*` settings are not passed down); `Runtimes` makes runtimes and stops
their agents when the test ends.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from acp_server.downstream.agent import AgentCommand
from acp_server.downstream.runtime import AcpRuntime


def child_argv(root: Path, scenarios: list[dict[str, Any]], *, name: str = "child") -> tuple[str, ...]:
    """The command of a scripted acp-server playing `scenarios` (echoing other prompts)."""
    script = root / f"{name}-script.json"
    script.write_text(json.dumps({"scenarios": scenarios}))
    db = root / f"{name}-journal.db"
    return (sys.executable, "-m", "acp_server", "--agent", "scripted", "--script", str(script), "--db", str(db))


class Runtimes:
    def __init__(self) -> None:
        self.made: list[AcpRuntime] = []

    def make(self, argv: tuple[str, ...], *, name: str = "acp") -> AcpRuntime:
        runtime = AcpRuntime(AgentCommand(name, argv))
        self.made.append(runtime)
        return runtime

    def close(self) -> None:
        for runtime in self.made:
            runtime.close()


def alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def descendants(pid: int) -> set[int]:
    """Every process below `pid`, by /proc's child lists."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        current = todo.pop()
        for task in _tasks(current):
            try:
                with open(f"/proc/{current}/task/{task}/children") as f:
                    children = {int(child) for child in f.read().split()}
            except OSError:
                continue
            todo.extend(children - found)
            found |= children
    return found


def _tasks(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
