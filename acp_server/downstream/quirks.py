"""Known misbehaviours of ACP agents, and what the runtime does differently for each.

`QUIRKS` is the one table, matched against the words of the agent's command and the name it
gives in `initialize` (`agentInfo.name`); tests/test_acp_runtime_quirks.py says where each is tested.
"""

from __future__ import annotations

import os
import re
import subprocess
from typing import Literal

import anyio

from adapters.frozen import frozen

Quirk = Literal[
    "lingers_after_eof",
    "replay_after_load",
    "fails_after_cancel",
    "acp_flag_renamed",
    "stale_end_after_cancel",
    "leaves_calls_unfinished",
]
ACP_FLAG_SINCE = (0, 33, 0)  # the Gemini CLI version that named its flag --acp (--experimental-acp before)
VERSION_TIMEOUT = 10.0  # seconds for `gemini --version` (node starts slowly on a busy machine)


@frozen(kw_only=True)
class AgentQuirk:
    quirk: Quirk
    names: frozenset[str]  # command words (basenames, npm package names) or agentInfo names
    why: str  # what the agent does, for the log and docs/agents/acp.md


QUIRKS: tuple[AgentQuirk, ...] = (
    AgentQuirk(
        quirk="lingers_after_eof",
        names=frozenset(
            {"claude-agent-acp", "@zed-industries/claude-agent-acp", "codex-acp", "@zed-industries/codex-acp"}
        ),
        why="keeps running after its stdin closes: its process group is ended at once",
    ),
    AgentQuirk(
        quirk="stale_end_after_cancel",
        names=frozenset({"claude-agent-acp", "@zed-industries/claude-agent-acp"}),
        why="answers the first prompt after a cancel with end_turn at once (the end the cancelled turn left"
        " behind) and that prompt's reply in the next turn: the session is closed and resumed after a cancel",
    ),
    AgentQuirk(
        quirk="replay_after_load",
        names=frozenset({"gemini", "gemini-cli"}),
        why="sends most of a session/load replay after its answer: the session waits until it is quiet",
    ),
    AgentQuirk(
        quirk="acp_flag_renamed",
        names=frozenset({"gemini"}),
        why="before 0.33 takes --experimental-acp, not --acp: `gemini --version` decides which it gets",
    ),
    AgentQuirk(
        quirk="leaves_calls_unfinished",
        names=frozenset({"hermes-agent"}),
        why="never ends a call it asked about (write_file: announced as tc-..., asked as edit-approval-N):"
        " at a normal end of its turn, the calls the user allowed are completed, not shown failed",
    ),
    AgentQuirk(
        quirk="fails_after_cancel",
        names=frozenset({"hermes-agent"}),
        why="answers the first prompt after a cancel with -32603: that prompt is sent again, once",
    ),
)


@frozen
class AgentQuirks:
    applied: tuple[AgentQuirk, ...] = ()

    def has(self, quirk: Quirk) -> bool:
        return any(entry.quirk == quirk for entry in self.applied)


def quirks_for(argv: tuple[str, ...], agent_name: str | None = None) -> AgentQuirks:
    """The quirks of the agent `argv` starts (and that calls itself `agent_name`)."""
    words = {os.path.basename(word).split("@", 1)[0] if not word.startswith("@") else _package(word) for word in argv}
    if agent_name:
        words.add(agent_name)
    return AgentQuirks(tuple(entry for entry in QUIRKS if entry.names & words))


async def as_installed(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The command as the installed agent takes it (a renamed flag under its old name)."""
    if "--acp" not in argv or not quirks_for(argv).has("acp_flag_renamed"):
        return argv
    try:
        with anyio.fail_after(VERSION_TIMEOUT):
            done = await anyio.run_process([argv[0], "--version"], check=False, stderr=subprocess.DEVNULL)
    except (OSError, TimeoutError):
        return argv
    version = parse_version(done.stdout.decode(errors="replace"))
    if version is None or version >= ACP_FLAG_SINCE:
        return argv
    return tuple("--experimental-acp" if word == "--acp" else word for word in argv)


def parse_version(text: str) -> tuple[int, ...] | None:
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(part) for part in found.groups()) if found else None


def _package(word: str) -> str:
    """`@scope/name@1.2` -> `@scope/name`."""
    scope, _, rest = word[1:].partition("/")
    return f"@{scope}/{rest.split('@', 1)[0]}"
