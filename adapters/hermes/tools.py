"""What acp-server shows for each Hermes tool: one table of ACP kinds, titles, locations, and
the todo list as a plan. Pure functions of a tool's name and arguments; no Hermes imports.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal, cast

from adapters.base import ToolRefused
from adapters.events import Location, PlanEntry, ToolKind
from adapters.paths import Target, target

# Hermes' tool names -> ACP kinds; names not listed (plugins, MCP tools) are "other", and ask.
KINDS: Mapping[str, ToolKind] = {
    "read_file": "read",
    "skill_view": "read",
    "skills_list": "read",
    "vision_analyze": "read",
    "read_terminal": "read",
    "search_files": "search",
    "session_search": "search",
    "write_file": "edit",
    "patch": "edit",
    "skill_manage": "edit",
    "terminal": "execute",
    "process": "execute",
    "execute_code": "execute",
    "web_search": "fetch",
    "web_extract": "fetch",
    "browser_navigate": "fetch",
    "todo": "think",
    "clarify": "think",
    "memory": "other",
    "delegate_task": "other",
}
FILE_TOOLS = ("read_file", "write_file", "patch")
MCP_PREFIX = "mcp__"  # Hermes names an MCP tool mcp__<server>__<tool>
PLAN_STATUS: Mapping[str, Literal["pending", "in_progress", "completed"]] = {
    "pending": "pending",
    "in_progress": "in_progress",
    "completed": "completed",
}


def kind_of(name: str) -> ToolKind:
    if name.startswith("browser_"):
        return "fetch"
    return KINDS.get(name, "other")


def file_of(path: Any, *, cwd: str, roots: Sequence[str] = ()) -> Target | None:
    """Where a file tool's `path` really is (`~` as home, as Hermes reads it): beneath the
    session's roots as they are named, else its real path anywhere (Hermes' own tools go there,
    once allowed); None for no path, or one that names no place (a NUL)."""
    if not isinstance(path, str) or not path:
        return None
    try:
        return target(os.path.expanduser(path), cwd=cwd, roots=(cwd, *roots, os.sep))
    except ToolRefused:
        return None


def title_of(name: str, args: Mapping[str, Any], *, cwd: str, roots: Sequence[str] = ()) -> str:
    """A short title an editor can show in one line; a file is named by its real location."""
    file = file_of(args.get("path"), cwd=cwd, roots=roots)
    path = file.shown if file is not None and name in FILE_TOOLS else _text(args.get("path"))
    match name:
        case "read_file":
            return f"Read {path}"
        case "write_file":
            return f"Write {path}"
        case "patch":
            return f"Edit {path}" if path else "Apply patch"
        case "terminal":
            return f"Run {_clip(_text(args.get('command')))}"
        case "search_files":
            return f"Search {_clip(_text(args.get('pattern') or args.get('query')))}"
        case "todo":
            return "Update plan" if args.get("todos") else "Read plan"
        case "clarify":
            return f"Ask: {_clip(_text(args.get('question')))}"
        case "web_search":
            return f"Search the web: {_clip(_text(args.get('query')))}"
        case _ if name.startswith(MCP_PREFIX) and "__" in name[len(MCP_PREFIX) :]:
            server, _, tool = name[len(MCP_PREFIX) :].partition("__")
            return f"{server}: {tool}"
        case _:
            return name.replace("_", " ").capitalize()


def locations_of(name: str, args: Mapping[str, Any], *, cwd: str, roots: Sequence[str] = ()) -> tuple[Location, ...]:
    """The file (or searched directory) a file tool touches, where it really is (`file_of`),
    with the line a read starts at."""
    file = file_of(args.get("path"), cwd=cwd, roots=roots)
    if file is None or name not in (*FILE_TOOLS, "search_files"):
        return ()
    offset = args.get("offset") if name == "read_file" else None
    line = offset if isinstance(offset, int) and not isinstance(offset, bool) and offset >= 1 else None
    return (Location(file.path, line),)


def plan_of(result: Any) -> tuple[PlanEntry, ...] | None:
    """The plan in a todo tool's result (Hermes returns the full list), or None."""
    try:
        data: Any = json.loads(result) if isinstance(result, str) else result
    except ValueError:
        return None
    todos: Any = cast(dict[str, Any], data).get("todos") if isinstance(data, dict) else None
    if not isinstance(todos, list):
        return None
    entries: list[PlanEntry] = []
    for item in cast(list[Any], todos):
        fields = cast(dict[str, Any], item) if isinstance(item, dict) else {}
        if isinstance(content := fields.get("content"), str):
            # A cancelled item is done with, as far as the plan's display goes.
            entries.append(PlanEntry(content, PLAN_STATUS.get(str(fields.get("status")), "completed")))
    return tuple(entries)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _clip(text: str, limit: int = 60) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"
