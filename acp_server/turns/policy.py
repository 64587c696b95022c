"""The permission policy: for each tool call, allow, deny or ask the user.

One decision from three inputs: the session's mode, the "always" answers the user gave in this
session, and the tool's kind. Tool kinds come from one classification table here, so runtimes
that report only a tool's name still get the right kind. "Always" answers are keyed by kind and
tool name, and for commands by the command's program, so "always allow `git`" never allows `rm`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from adapters.base import ToolRefused
from adapters.events import TOOL_KINDS, ToolCallStarted

Verdict = Literal["allow", "deny", "ask"]


@dataclass(frozen=True, slots=True)
class Mode:
    id: str
    name: str
    description: str


MODES = (
    Mode("ask", "Ask", "Ask before edits, deletions and commands; reads and searches go ahead."),
    Mode("accept-edits", "Accept edits", "File edits go ahead; commands and deletions still ask."),
    Mode("read-only", "Read only", "No edits and no commands at all; reads and searches go ahead."),
    Mode("yolo", "Yolo", "Nothing asks: every tool runs (answers you gave with 'always reject' still hold)."),
)
MODE_IDS = frozenset(mode.id for mode in MODES)
DEFAULT_MODE = "ask"

SAFE_KINDS = frozenset({"read", "search", "think"})
CHANGING_KINDS = frozenset({"edit", "delete", "move", "execute"})

# Mode -> kind -> verdict; kinds not listed ask.
_TABLE: dict[str, dict[str, Verdict]] = {
    "ask": dict.fromkeys(SAFE_KINDS, "allow"),
    "accept-edits": {**dict.fromkeys(SAFE_KINDS, "allow"), "edit": "allow", "move": "allow"},
    "read-only": {**dict.fromkeys(SAFE_KINDS, "allow"), **dict.fromkeys(CHANGING_KINDS, "deny")},
    "yolo": dict.fromkeys(TOOL_KINDS, "allow"),
}

# Tool names that runtimes commonly report, mapped to ACP kinds; the prefix rules below cover
# the rest ("read_file", "grep_search", "run_terminal_cmd", ...).
_NAMED_KINDS = {
    "cat": "read",
    "view": "read",
    "open": "read",
    "ls": "search",
    "find": "search",
    "glob": "search",
    "grep": "search",
    "rg": "search",
    "bash": "execute",
    "shell": "execute",
    "sh": "execute",
    "exec": "execute",
    "terminal": "execute",
    "patch": "edit",
    "apply_patch": "edit",
    "rm": "delete",
    "mv": "move",
    "rename": "move",
    "fetch": "fetch",
    "http": "fetch",
    "web_search": "fetch",
    "think": "think",
    "plan": "think",
}
_PREFIX_KINDS = (
    ("read", "read"),
    ("get", "read"),
    ("list", "search"),
    ("search", "search"),
    ("find", "search"),
    ("write", "edit"),
    ("edit", "edit"),
    ("create", "edit"),
    ("replace", "edit"),
    ("update", "edit"),
    ("insert", "edit"),
    ("delete", "delete"),
    ("remove", "delete"),
    ("move", "move"),
    ("run", "execute"),
    ("execute", "execute"),
    ("fetch", "fetch"),
    ("download", "fetch"),
)


@dataclass(slots=True)
class PermissionMemory:
    """ "Always" answers of one session: `always_key` -> allowed; persisted with the session."""

    decisions: dict[str, bool] = field(default_factory=dict[str, bool])


def classify(name: str | None, declared: str | None = None) -> str:
    """The ACP kind of a tool: what the runtime declared when valid, else from its name."""
    if declared in TOOL_KINDS and declared != "other":
        return declared
    key = (name or "").strip().lower().replace("-", "_")
    for word in (key, *key.split("_")):  # "web_fetch" is a fetch, "grep_search" a search
        if word in _NAMED_KINDS:
            return _NAMED_KINDS[word]
        for prefix, kind in _PREFIX_KINDS:
            if word.startswith(prefix):
                return kind
    return "other"


def program_of(raw_input: Any) -> str | None:
    """The program a command runs (`git` for `git push`), for per-program "always" answers."""
    command = cast(dict[str, Any], raw_input).get("command") if isinstance(raw_input, dict) else raw_input
    if not isinstance(command, str) or not command.strip():
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    while words and "=" in words[0] and not words[0].startswith("="):
        words = words[1:]  # FOO=bar cmd ...
    return words[0].rsplit("/", 1)[-1] if words else None


def always_key(tool: ToolCallStarted) -> str:
    kind = classify(tool.name, tool.tool_kind)
    key = f"{kind}:{tool.name or tool.title}"
    if kind == "execute" and (program := program_of(tool.raw_input)) is not None:
        key = f"{kind}:{program}"
    return key


def decide(mode: str, tool: ToolCallStarted, remembered: dict[str, bool]) -> Verdict:
    """Read-only refuses changes whatever was remembered; then "always" answers; then the mode."""
    kind = classify(tool.name, tool.tool_kind)
    table = _TABLE.get(mode, _TABLE[DEFAULT_MODE])
    if table.get(kind) == "deny":
        return "deny"
    answer = remembered.get(always_key(tool))
    if answer is not None:
        return "allow" if answer else "deny"
    return table.get(kind, "ask")


def refuse_in_read_only(mode: str, what: str) -> None:
    """Read-only means no changes at all, whatever the agent asked or the user said before."""
    if mode == "read-only":
        raise ToolRefused(f"Refused: {what} is not allowed in read-only mode (change it with /mode)")
