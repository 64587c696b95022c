"""The permission policy: for each tool call, allow, deny or ask the user.

One decision from three inputs: the session's mode, the "always" answers the user gave in this
session, and the tool's kind. Tool kinds come from one classification table here, so runtimes
that report only a tool's name still get the right kind; MCP tools (`mcp__<server>__<tool>`)
are never classified, whatever their names or declared kinds say (both are the MCP server's
word), so they ask.

An "always" answer covers exactly what its question named (`subject_of`, which also words the
options): a command line's simple commands as written (`adapters.shellwords`: `git status`
covers neither `git push`, `./git status` nor `git status; rm x`), each remembered on its own;
nothing for a line the shell could make do more than its words say (`$(...)`, redirections,
...), which is asked every time; for any other tool, that tool (kind and name). Answers kept by
older versions for a command's program (`execute:git`) match no command any more.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from adapters.base import ToolRefused
from adapters.events import TOOL_KINDS, ToolCallStarted
from adapters.frozen import frozen
from adapters.shellwords import command_of, simple_commands

Verdict = Literal["allow", "deny", "ask"]


@frozen
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
    """ "Always" answers of one session: rule key -> allowed; persisted with the session."""

    decisions: dict[str, bool] = field(default_factory=dict[str, bool])


COMMAND_KEY = "command:"  # + a simple command in canonical spelling
LINE_KEY = "command line:"  # + a whole command line, for "always reject" of exactly that line
MCP_PREFIX = "mcp__"  # how the agents name an MCP tool: mcp__<server>__<tool>


@frozen
class Subject:
    """What a permission question is about: the rule keys its "always" answers set, and the
    labels that name exactly those. `allow` is empty when no rule can cover it."""

    allow: tuple[str, ...]
    reject: tuple[str, ...]
    allow_label: str | None
    reject_label: str


def classify(name: str | None, declared: str | None = None) -> str:
    """The ACP kind of a tool: what the runtime declared when valid, else from its name;
    "other" for an MCP tool, whatever it declared."""
    key = (name or "").strip().lower().replace("-", "_")
    if key.startswith(MCP_PREFIX):
        return "other"
    if declared in TOOL_KINDS and declared != "other":
        return declared
    for word in (key, *key.split("_")):  # "web_fetch" is a fetch, "grep_search" a search
        if word in _NAMED_KINDS:
            return _NAMED_KINDS[word]
        for prefix, kind in _PREFIX_KINDS:
            if word.startswith(prefix):
                return kind
    return "other"


def approved_command(tool: ToolCallStarted) -> str | None:
    """The command line a permission question about this call names, if it names one."""
    return command_of(tool.raw_input) if classify(tool.name, tool.tool_kind) == "execute" else None


def subject_of(tool: ToolCallStarted) -> Subject:
    """What a question about this call is about: its command line's simple commands (the line
    itself when it is opaque), or the tool."""
    line = approved_command(tool)
    if line is None:
        kind = classify(tool.name, tool.tool_kind)
        key, shown = f"{kind}:{tool.name or tool.title}", tool.name or tool.title
        if kind == "execute":  # a rule naming no command would cover whatever a later call runs
            return Subject((), (key,), None, f"Always reject `{shown}` (any input)")
        return Subject((key,), (key,), f"Always allow `{shown}` (any input)", f"Always reject `{shown}` (any input)")
    line = line.strip()
    parts = simple_commands(line)
    exactly = f"Always reject exactly `{line}`"
    if parts is None:
        return Subject((), (LINE_KEY + line,), None, exactly)
    parts = tuple(dict.fromkeys(parts))
    allow = tuple(COMMAND_KEY + part for part in parts)
    shown = [f"`{part}`" for part in parts]
    listed = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"
    if len(parts) == 1:
        return Subject(allow, allow, f"Always allow {listed}", f"Always reject {listed}")
    return Subject(allow, (LINE_KEY + line,), f"Always allow {listed}", exactly)


def remembered(tool: ToolCallStarted, decisions: Mapping[str, bool]) -> bool | None:
    """The user's "always" answer for this call: rejected when any rule it meets rejects,
    allowed when rules allow all of it, else None."""
    subject = subject_of(tool)
    if any(decisions.get(key) is False for key in (*subject.reject, *subject.allow)):
        return False
    if subject.allow and all(decisions.get(key) is True for key in subject.allow):
        return True
    return None


def decide(mode: str, tool: ToolCallStarted, decisions: Mapping[str, bool]) -> Verdict:
    """Read-only refuses changes whatever was remembered; then "always" answers; then the mode."""
    kind = classify(tool.name, tool.tool_kind)
    table = _TABLE.get(mode, _TABLE[DEFAULT_MODE])
    if table.get(kind) == "deny":
        return "deny"
    answer = remembered(tool, decisions)
    if answer is not None:
        return "allow" if answer else "deny"
    return table.get(kind, "ask")


def refuse_in_read_only(mode: str, what: str) -> None:
    """Read-only means no changes at all, whatever the agent asked or the user said before."""
    if mode == "read-only":
        raise ToolRefused(f"Refused: {what} is not allowed in read-only mode (change it with /mode)")
