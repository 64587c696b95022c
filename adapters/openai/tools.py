"""The built-in tools the model may call, and the one path every tool call takes.

A call is shown to the editor (title, ACP kind, input, locations), previewed when it changes
a file (the diff appears before the permission question), passed through
`sink.request_permission` when it has side effects, then run through the sink. Every failure
becomes a tool error for the model (the turn goes on) and a `failed` tool call for the user.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from adapters.base import Sink, ToolRefused
from adapters.bounds import MAX_DEPTH, unfit
from adapters.events import (
    DiffContent,
    Location,
    TerminalContent,
    TextContent,
    ToolContent,
    ToolKind,
    ToolLocation,
    ToolStatus,
)
from adapters.frozen import frozen
from adapters.openai import search
from adapters.openai.jsonvalues import is_object
from adapters.paths import Target, target

MAX_RESULT_CHARS = 50_000
MAX_READ_LINES = 2000
TOO_DEEP = f"The tool arguments are nested deeper than {MAX_DEPTH} levels; send a flatter JSON object"
DEFAULT_COMMAND_TIMEOUT = 120.0
MAX_COMMAND_TIMEOUT = 600.0


@frozen
class Workspace:
    """What a tool runs against: the turn's sink, its working directory and the other roots."""

    sink: Sink
    cwd: str
    roots: tuple[str, ...] = ()  # the session's additional directories

    def target(self, path: str) -> Target:
        """Where `path` really is: the one path a file tool names in its title, locations and
        diff and hands to the sink, so the editor is asked for the place that was checked."""
        return target(path, cwd=self.cwd, roots=(self.cwd, *self.roots))


@frozen
class Outcome:
    result: str  # what the model reads
    content: tuple[ToolContent, ...] = ()  # what the user sees
    status: ToolStatus = "completed"
    raw_output: Any = None


@dataclass(slots=True)
class Action:
    """One prepared call: `preview` runs before the permission question, `run` after it."""

    title: str
    kind: ToolKind
    run: Callable[[str], Outcome]
    locations: tuple[ToolLocation, ...] = ()
    ask: bool = False
    preview: Callable[[], tuple[ToolContent, ...]] | None = None


Builder = Callable[[Mapping[str, Any], Workspace], Action]


@frozen
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    build: Builder

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@frozen
class Call:
    """A tool call as the model streamed it."""

    id: str
    name: str
    arguments: str = ""


def execute(call: Call, tool: Tool | None, ws: Workspace) -> str:
    """Show, preview, ask, run and report one call; returns the result text for the model."""
    sink = ws.sink
    try:
        args = parse_arguments(call.arguments)
        if tool is None:
            raise ToolRefused(f"There is no tool named {call.name!r}")
        action = tool.build(args, ws)
    except ToolRefused as exc:
        tid = sink.tool_call(call.name or "unknown tool", name=call.name, raw_input=call.arguments or None)
        sink.tool_update(tid, status="failed", content=[TextContent(str(exc))])
        return f"Error: {exc}"
    tid = sink.tool_call(action.title, kind=action.kind, name=call.name, raw_input=args, locations=action.locations)
    preview: tuple[ToolContent, ...] = ()
    try:
        if action.preview is not None:
            preview = action.preview()
            sink.tool_update(tid, content=preview)
        if action.ask:
            decision = sink.request_permission(tid)
            if not decision.allowed:
                reason = decision.reason or "Permission denied by the user"
                sink.tool_update(tid, status="failed", content=[*preview, TextContent(reason)])
                return f"Error: the user did not allow this call ({reason}). Do not retry it as is."
        sink.tool_update(tid, status="in_progress")
        outcome = action.run(tid)
    except (ToolRefused, OSError, UnicodeError) as exc:
        sink.tool_update(tid, status="failed", content=[*preview, TextContent(str(exc))])
        return f"Error: {exc}"
    sink.tool_update(tid, status=outcome.status, content=outcome.content or None, raw_output=outcome.raw_output)
    return cap(outcome.result)


def parse_arguments(text: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolRefused(f"The tool arguments are not valid JSON ({exc.msg}); send a JSON object") from None
    except RecursionError:  # deeper than the parser goes
        raise ToolRefused(TOO_DEEP) from None
    if unfit(value) is not None:  # deeper than the journal, the redactor and the wire may be asked to walk
        raise ToolRefused(TOO_DEEP)
    if not is_object(value):
        raise ToolRefused("The tool arguments must be a JSON object")
    return value


def cap(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[{len(text) - limit} more characters not shown]"


# --- argument helpers ----------------------------------------------------------------


def _str(args: Mapping[str, Any], name: str, *, required: bool = True, empty: bool = False) -> str:
    value = args.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (not empty and not value):
        raise ToolRefused(f"The argument {name!r} must be a{'' if empty else ' non-empty'} string")
    return value


def _int(args: Mapping[str, Any], name: str, *, minimum: int = 1) -> int | None:
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ToolRefused(f"The argument {name!r} must be a whole number of at least {minimum}")
    return value


# --- the tools -----------------------------------------------------------------------


def _read_file(args: Mapping[str, Any], ws: Workspace) -> Action:
    file = ws.target(_str(args, "path"))
    start, end = _int(args, "start_line"), _int(args, "end_line")
    if start is not None and end is not None and end < start:
        raise ToolRefused("end_line must not be before start_line")
    limit = None if end is None else end - (start or 1) + 1
    lines = f" (lines {start or 1}-{end if end is not None else 'end'})" if start or end else ""

    def run(tid: str) -> Outcome:
        # Always a range: a whole-file read of a big file is refused, a range is cut with a note.
        text = ws.sink.read_text_file(file.path, line=start, limit=min(limit or MAX_READ_LINES + 1, MAX_READ_LINES + 1))
        rows = text.splitlines(keepends=True)
        if len(rows) > MAX_READ_LINES:
            first = (start or 1) + MAX_READ_LINES
            text = "".join(rows[:MAX_READ_LINES]) + f"\n[file continues; read on with start_line={first}]"
        return Outcome(text or "(empty)", raw_output={"lines": min(len(rows), MAX_READ_LINES)})

    return Action(f"Read {file.shown}{lines}", "read", run, locations=(Location(file.path, start),))


def _list_directory(args: Mapping[str, Any], ws: Workspace) -> Action:
    path = _str(args, "path", required=False) or "."
    where = ws.target(path)
    return Action(
        f"List {where.shown}",
        "search",
        lambda tid: Outcome(search.list_directory(ws.cwd, path)),
        locations=(where.path,),
    )


def _search_text(args: Mapping[str, Any], ws: Workspace) -> Action:
    pattern = _str(args, "pattern")
    path = _str(args, "path", required=False) or "."

    def run(tid: str) -> Outcome:
        found = search.search_text(ws.cwd, pattern, path, check=ws.sink.check_cancelled)
        return Outcome(found.text, (TextContent(f"{found.matches} matches"),), raw_output={"matches": found.matches})

    within = ws.target(path)
    where = "" if within.shown == "." else f" in {within.shown}"
    return Action(f"Search for {pattern!r}{where}", "search", run, locations=(within.path,))


def _write_file(args: Mapping[str, Any], ws: Workspace) -> Action:
    file, content = ws.target(_str(args, "path")), _str(args, "content", empty=True)
    diff: list[DiffContent] = []

    def preview() -> tuple[ToolContent, ...]:
        try:
            old: str | None = ws.sink.read_text_file(file.path)
        except ToolRefused:
            old = None
        diff.append(DiffContent(path=file.path, new_text=content, old_text=old))
        return tuple(diff)

    def run(tid: str) -> Outcome:
        ws.sink.write_text_file(file.path, content)
        return Outcome(f"Wrote {file.shown} ({len(content.splitlines())} lines).", tuple(diff))

    return Action(f"Write {file.shown}", "edit", run, locations=(file.path,), ask=True, preview=preview)


def _edit_file(args: Mapping[str, Any], ws: Workspace) -> Action:
    file, old_string = ws.target(_str(args, "path")), _str(args, "old_string")
    path = file.shown
    new_string = _str(args, "new_string", empty=True)
    diff: list[DiffContent] = []

    def preview() -> tuple[ToolContent, ...]:
        old = ws.sink.read_text_file(file.path)
        count = old.count(old_string)
        if count == 0:
            raise ToolRefused(
                f"old_string was not found in {path}; read the file and copy the exact text, whitespace included"
            )
        if count > 1:
            raise ToolRefused(
                f"old_string occurs {count} times in {path}; include more surrounding text so that it is unique"
            )
        new = old.replace(old_string, new_string, 1)
        diff.append(DiffContent(path=file.path, new_text=new, old_text=old))
        return tuple(diff)

    def run(tid: str) -> Outcome:
        ws.sink.write_text_file(file.path, diff[0].new_text)
        return Outcome(f"Edited {path}.", tuple(diff))

    return Action(f"Edit {path}", "edit", run, locations=(file.path,), ask=True, preview=preview)


def _run_command(args: Mapping[str, Any], ws: Workspace) -> Action:
    command = _str(args, "command")
    timeout = float(min(_int(args, "timeout") or DEFAULT_COMMAND_TIMEOUT, MAX_COMMAND_TIMEOUT))

    def run(tid: str) -> Outcome:
        result = ws.sink.run_command(command, tool_call_id=tid, timeout=timeout)
        ended = f"signal {result.signal}" if result.signal else f"exit code {result.exit_code}"
        shown: tuple[ToolContent, ...] = (
            (TerminalContent(result.terminal_id),)
            if result.terminal_id
            else (TextContent(f"```\n{result.output.rstrip()}\n```"),)
            if result.output.strip()
            else ()
        )
        return Outcome(
            f"{ended}\n{cap(result.output, MAX_RESULT_CHARS - 100)}",
            shown,
            "completed" if result.exit_code == 0 else "failed",
            {"exitCode": result.exit_code, "signal": result.signal},
        )

    title = command if len(command) <= 80 else command[:77] + "..."
    return Action(f"`{title}`", "execute", run, ask=True)


def _schema(required: list[str], **props: tuple[str, str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": kind, "description": text} for name, (kind, text) in props.items()},
        "required": required,
    }


BUILTIN_TOOLS: tuple[Tool, ...] = (
    Tool(
        "read_file",
        "Read a text file of the workspace, optionally only some lines (1-based, inclusive).",
        _schema(
            ["path"],
            path=("string", "File path, relative to the workspace"),
            start_line=("integer", "First line to read"),
            end_line=("integer", "Last line to read"),
        ),
        _read_file,
    ),
    Tool(
        "list_directory",
        "List the entries of a directory of the workspace (directories end with /).",
        _schema([], path=("string", "Directory path, relative to the workspace; default '.'")),
        _list_directory,
    ),
    Tool(
        "search_text",
        "Search the workspace's files for lines matching a regular expression; "
        "skips files ignored by .gitignore. Answers path:line: text.",
        _schema(
            ["pattern"],
            pattern=("string", "Python regular expression"),
            path=("string", "File or directory to search; default the whole workspace"),
        ),
        _search_text,
    ),
    Tool(
        "write_file",
        "Create a file or replace its whole content.",
        _schema(
            ["path", "content"],
            path=("string", "File path, relative to the workspace"),
            content=("string", "The complete new content"),
        ),
        _write_file,
    ),
    Tool(
        "edit_file",
        "Replace one exact, unique occurrence of old_string in a file by new_string.",
        _schema(
            ["path", "old_string", "new_string"],
            path=("string", "File path, relative to the workspace"),
            old_string=("string", "Exact text to replace, whitespace included; must occur once"),
            new_string=("string", "The replacement text"),
        ),
        _edit_file,
    ),
    Tool(
        "run_command",
        "Run a shell command in the workspace directory and return its output and exit code.",
        _schema(
            ["command"],
            command=("string", "The shell command line"),
            timeout=("integer", f"Seconds before it is stopped; default {DEFAULT_COMMAND_TIMEOUT:g}"),
        ),
        _run_command,
    ),
)
