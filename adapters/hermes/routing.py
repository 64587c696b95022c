"""Every Hermes tool call passes through acp-server: one `tool_execution` middleware (Hermes'
supported plugin route, registered once per process) finds the running turn by its task id,
asks our permission flow about the visible tool call, and runs read_file, write_file, patch and
foreground terminal commands through the sink (the editor when it offers fs / terminal, else
the server's local fallbacks); other tools go on to Hermes. It never raises: Hermes would run
the tool anyway after a middleware exception.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from adapters.base import Sink, ToolRefused, TurnCancelled
from adapters.events import DiffContent, TerminalContent
from adapters.hermes.reporting import Reporter
from adapters.hermes.setup import hermes
from adapters.hermes.tools import title_of
from adapters.paths import target
from adapters.shellwords import command_of

log = logging.getLogger(__name__)

DEFAULT_READ_LIMIT = 500
_gates: dict[str, Gate] = {}  # task id (our session id) -> the gate of its running turn
_gates_lock = threading.Lock()
_current = threading.local()  # the visible tool call a clarify question belongs to


class Gate:
    """One turn's tool policy and routing."""

    def __init__(self, sink: Sink, reporter: Reporter, *, cwd: str, roots: Sequence[str]) -> None:
        self.sink, self.reporter, self.cwd = sink, reporter, cwd
        self.roots = (cwd, *roots)
        self.allowed_commands: set[str] = set()

    def execute(
        self, name: str, args: dict[str, Any], call_id: str, next_call: Callable[[Any], Any], *, subagent: str = ""
    ) -> Any:
        """Ask, route, run. A call from one of the turn's subagents (Hermes' delegate_task, its
        task id `subagent`) shows in the same turn; its completion is reported here, since the
        subagent's callbacks are its own."""
        if not subagent:
            return self._execute(name, args, call_id, next_call)
        key = f"{subagent}:{call_id}"
        result = self._execute(
            name, args, key, next_call, title=f"Subagent: {title_of(name, args, cwd=self.cwd, roots=self.roots)}"
        )
        self.reporter.tool_completed(key, name, args, result)
        return result

    def _execute(
        self, name: str, args: dict[str, Any], call_id: str, next_call: Callable[[Any], Any], title: str | None = None
    ) -> Any:
        visible = self.reporter.start(call_id, name, args, title=title)
        if visible is None:  # the turn was cancelled
            return _error("cancelled by the user")
        try:
            old, new, path = self._edit_preview(name, args)
            if path is not None and new is not None:
                self.reporter.show(visible, DiffContent(path, new, old))
            decision = self.sink.request_permission(visible)
            if not decision.allowed:
                why = "cancelled" if decision.cancelled else (decision.reason or "the user refused it")
                self.reporter.settle(visible, f"Not run: {why}")
                return _error(f"{name} was not run: {why}. Do not retry it unless the user asks.")
            if name == "terminal":
                self.allowed_commands.add(str(args.get("command", "")))
            self.sink.tool_update(visible, status="in_progress")
            _current.visible = visible
            routed = self._route(name, args, visible, path, new)
            return routed if routed is not None else next_call(args)
        except TurnCancelled:
            return _error("cancelled by the user")
        except ToolRefused as exc:
            return _error(str(exc))
        finally:
            _current.visible = None

    def approve(self, command: str, description: str = "", **_: Any) -> str:
        """Hermes' own approval callback: answered by the decision our flow already took."""
        return "once" if command in self.allowed_commands else "deny"

    def clarify(self, question: str, choices: list[str] | None) -> str:
        visible: str | None = getattr(_current, "visible", None)
        try:
            return self.sink.clarify(question, choices=tuple(choices or ()), tool_call_id=visible)
        except (ToolRefused, TurnCancelled) as exc:
            raise RuntimeError(str(exc) or "the question was declined") from exc

    # --- editor routing ---------------------------------------------------------------

    def _route(self, name: str, args: dict[str, Any], visible: str, path: str | None, new: str | None) -> Any:
        if name == "read_file" and (target := self._inside(args.get("path"))) is not None:
            return self._read(target, args)
        if name in ("write_file", "patch") and path is not None and new is not None:
            self.sink.write_text_file(path, new)
            return json.dumps({"success": True, "path": path, "bytes_written": len(new.encode())})
        if name == "terminal" and not args.get("background") and _local_terminal():
            return self._command(args, visible)
        return None

    def _read(self, path: str, args: dict[str, Any]) -> str:
        text = self.sink.read_text_file(path)
        lines = text.splitlines()
        start = max(_int(args.get("offset"), 1), 1)
        limit = max(_int(args.get("limit"), DEFAULT_READ_LIMIT), 1)
        shown = lines[start - 1 : start - 1 + limit]
        numbered = "".join(f"{start + i}|{line}\n" for i, line in enumerate(shown))
        truncated = start - 1 + limit < len(lines)
        result: dict[str, Any] = {"content": numbered, "total_lines": len(lines), "truncated": truncated}
        if truncated:
            result["next_offset"] = start + limit
        return json.dumps(result, ensure_ascii=False)

    def _command(self, args: dict[str, Any], visible: str) -> str:
        command = command_of(args) or ""  # as the permission question named it, workdir included
        timeout = args.get("timeout")
        seconds = float(timeout) if isinstance(timeout, int | float) and timeout > 0 else None
        result = self.sink.run_command(command, tool_call_id=visible, timeout=seconds)
        if result.terminal_id:
            self.reporter.show(visible, TerminalContent(result.terminal_id))
        error = None if result.signal is None else f"killed by {result.signal}"
        return json.dumps({"output": result.output, "exit_code": result.exit_code, "error": error}, ensure_ascii=False)

    def _edit_preview(self, name: str, args: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
        """(old text, new text, path) of an edit we can route; (None, None, None) otherwise."""
        if name not in ("write_file", "patch") or (path := self._inside(args.get("path"))) is None:
            return None, None, None
        try:
            old: str | None = self.sink.read_text_file(path)
        except ToolRefused:
            old = None
        if name == "write_file":
            content = args.get("content")
            return (old, content, path) if isinstance(content, str) else (None, None, None)
        find, replace = args.get("old_string"), args.get("new_string")
        if args.get("mode", "replace") != "replace" or old is None or not isinstance(find, str) or not find:
            return None, None, None
        if not isinstance(replace, str) or (old.count(find) != 1 and not args.get("replace_all")) or find not in old:
            return None, None, None  # not exact: Hermes' own fuzzy patch handles it locally
        return old, old.replace(find, replace), path

    def _inside(self, path: Any) -> str | None:
        """Where the path really is when that lies in a workspace root (the editor knows those
        files): the path the editor is asked for and the diff names."""
        if not isinstance(path, str) or not path:
            return None
        try:
            return target(os.path.expanduser(path), cwd=self.cwd, roots=self.roots).path
        except ToolRefused:
            return None


# --- the process-wide middleware ------------------------------------------------------------


def attach(session_id: str, gate: Gate) -> None:
    install()
    with _gates_lock:
        _gates[session_id] = gate


def detach(session_id: str, gate: Gate) -> None:
    with _gates_lock:
        if _gates.get(session_id) is gate:
            del _gates[session_id]


def gate_of(session_id: str) -> Gate | None:
    """The gate of the session's running turn, if one runs."""
    with _gates_lock:
        return _gates.get(session_id)


def install() -> None:
    """Register the middleware with Hermes' plugin manager, again if a forced plugin rescan
    (Hermes clears all middleware then) removed it."""
    plugins = hermes("hermes_cli.plugins")
    manager = plugins.get_plugin_manager()
    manager.discover_and_load()  # first, or the first discovery would not see us
    registered: dict[str, list[Any]] = manager._middleware  # no public query for one callback
    if _middleware not in registered.get("tool_execution", []):
        manifest = plugins.PluginManifest(name="acp-server", source="entrypoint")
        plugins.PluginContext(manifest, manager).register_middleware("tool_execution", _middleware)


def owner_of(task_id: str) -> str | None:
    """The session whose running turn a Hermes task belongs to: the session itself, or, for a
    subagent of Hermes' delegate_task (a task id of its own), the session it was delegated from,
    through however many levels of delegation."""
    with _gates_lock:
        if task_id in _gates:
            return task_id
        sessions = set(_gates)
    if not sessions:
        return None
    delegation = hermes("tools.delegate_tool")
    with delegation._active_subagents_lock:  # Hermes' registry of running subagents; no public query
        agents = [record.get("agent") for record in delegation._active_subagents.values()]
        agent = delegation._active_subagents.get(task_id, {}).get("agent")
    by_session = {getattr(a, "session_id", None): a for a in agents if a is not None}
    for _ in range(len(agents)):
        parent = getattr(agent, "_parent_session_id", None)
        if parent in sessions:
            return parent
        agent = by_session.get(parent)
    return None


def _middleware(*, tool_name: str, args: Any, next_call: Callable[[Any], Any], **context: Any) -> Any:
    task_id = str(context.get("task_id") or "")
    owner = owner_of(task_id)
    gate = gate_of(owner) if owner is not None else None
    if gate is None:
        if _bookkeeping(tool_name):
            return next_call(args)
        log.warning("refused Hermes' %s outside any turn (task %s): nobody can be asked about it", tool_name, task_id)
        return _error(f"{tool_name} was not run: acp-server runs no tool outside a turn the user can be asked in.")
    if not isinstance(args, dict):
        return _error(f"{tool_name} was not run: its arguments are not an object.")
    call_id = str(context.get("tool_call_id") or "")
    return gate.execute(tool_name, args, call_id, next_call, subagent="" if owner == task_id else task_id)  # pyright: ignore[reportUnknownArgumentType]


def _bookkeeping(tool_name: str) -> bool:
    """Hermes' memory and skill tools, which its background review runs after a turn (limited to
    them by Hermes itself): Hermes' own notes in HERMES_HOME, not the user's workspace."""
    return hermes("tools.registry").registry.get_toolset_for_tool(tool_name) in ("memory", "skills")


def _local_terminal() -> bool:
    """Whether Hermes runs commands on this machine (not docker, ssh, modal, ...)."""
    return os.environ.get("TERMINAL_ENV", "local").strip().lower() in ("", "local")


def _error(message: str) -> str:
    return json.dumps({"error": message}, ensure_ascii=False)


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
