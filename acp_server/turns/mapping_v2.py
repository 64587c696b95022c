"""The ACP v2 wire of the journal's events: the v1 mapper's updates (`turns.mapping`, live and
replay alike) rewritten as v2 shapes, one pure function per kind.

v1 and v2 describe the same things (a message chunk, a tool call, a plan) with different shapes:
tool calls become `tool_call_update` upserts, plans `plan_update`, diffs `changes` plus a patch,
config options carry `configId`, permission requests a `title` and a `subject`. Built on the v1
updates so that ids, HAUI drawing, redaction and the terminals replay shows stay one code path.
"""

from __future__ import annotations

import difflib
from typing import Any, cast

from acp_server.turns.mapping import CANCELLED_KEY

PLAN_ID = "plan"  # one plan per session, replaced whole by each update, as v1's plan was
UNNAMED_MESSAGE = "acp-server:message"  # a chunk v1 sent without an id (v2 needs one)
_DROPPED = frozenset({"current_mode_update"})  # v2 has no modes: the mode is a config option


def state_update(state: str, *, stop_reason: str | None = None, error: dict[str, Any] | None = None) -> dict[str, Any]:
    """A `state_update`: running, requires_action, or idle with its stop reason."""
    update: dict[str, Any] = {"sessionUpdate": "state_update", "state": state}
    if stop_reason is not None:
        update["stopReason"] = stop_reason
    if error is not None:
        update["error"] = error
    return update


def update(v1: dict[str, Any]) -> dict[str, Any] | None:
    """The v2 form of one v1 `session/update` payload, or None when v2 has no such update."""
    kind = v1.get("sessionUpdate")
    if kind in _DROPPED:
        return None
    if kind in ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk"):
        return {**v1, "messageId": v1.get("messageId") or UNNAMED_MESSAGE}
    if kind in ("tool_call", "tool_call_update"):
        fields = _marked_cancelled({k: v for k, v in v1.items() if k != "sessionUpdate"})
        return {"sessionUpdate": "tool_call_update", **tool_call(fields)}
    if kind == "plan":
        plan = {"type": "items", "planId": PLAN_ID, "entries": v1.get("entries", [])}
        return {"sessionUpdate": "plan_update", "plan": plan}
    if kind == "config_option_update":
        return {**v1, "configOptions": config_options(v1.get("configOptions", []))}
    if kind == "available_commands_update":
        return {**v1, "availableCommands": commands(v1.get("availableCommands", []))}
    return v1  # the same in both: session_info_update, usage_update, notice, compaction_*


def cancelled(shown: dict[str, Any]) -> dict[str, Any]:
    """An update of a cancelled turn: a tool call it closed (bare `failed`) ends `cancelled`,
    v2's status for it (v1 has none)."""
    bare = shown.keys() == {"sessionUpdate", "toolCallId", "status"}
    if bare and shown["sessionUpdate"] == "tool_call_update" and shown["status"] == "failed":
        return {**shown, "status": "cancelled"}
    return shown


def _marked_cancelled(fields: dict[str, Any]) -> dict[str, Any]:
    """A call a client cancelled (its last update marked, `mapping.cancelled_mark`) ends
    `cancelled`, v2's status for it, live and replayed alike; the mark itself is v1's."""
    meta: Any = fields.get("_meta")
    if not isinstance(meta, dict):
        return fields
    meta = cast(dict[str, Any], meta)
    ours: Any = meta.get("acp-server")
    if not (isinstance(ours, dict) and cast(dict[str, Any], ours).get(CANCELLED_KEY)):
        return fields
    rest = {k: v for k, v in cast(dict[str, Any], ours).items() if k != CANCELLED_KEY}
    others = {k: v for k, v in meta.items() if k != "acp-server"} | ({"acp-server": rest} if rest else {})
    shown = {k: v for k, v in fields.items() if k != "_meta"} | ({"_meta": others} if others else {})
    return {**shown, "status": "cancelled"}


def tool_call(fields: dict[str, Any]) -> dict[str, Any]:
    """A v1 tool call (or its update) as a v2 `ToolCallUpdate` patch: absent fields unchanged."""
    if "content" not in fields:
        return dict(fields)
    return {**fields, "content": [tool_content(item) for item in fields["content"]]}


def tool_content(item: dict[str, Any]) -> dict[str, Any]:
    """Tool call content: a v1 diff (path, old and new text) becomes v2 `changes` and a patch."""
    if item.get("type") != "diff":
        return item
    path, old, new = item["path"], item.get("oldText"), item.get("newText", "")
    change = {"operation": "add" if old is None else "modify", "path": path, "fileType": "text"}
    return {"type": "diff", "changes": [change], "patch": {"format": "git_patch", "text": git_patch(path, old, new)}}


def git_patch(path: str, old: str | None, new: str) -> str:
    """A unified diff of one text file in git's form (a new file from /dev/null)."""
    name = path.lstrip("/")
    before, after = ("/dev/null" if old is None else f"a/{name}"), f"b/{name}"
    lines = difflib.unified_diff((old or "").splitlines(True), new.splitlines(True), before, after)
    header = f"diff --git a/{name} b/{name}\n" + ("new file mode 100644\n" if old is None else "")
    ending = "\n\\ No newline at end of file\n"
    return header + "".join(line if line.endswith("\n") else line + ending for line in lines)


def config_options(options: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """v1 options (`id`) as v2's (`configId`); the mode option keeps its `mode` category."""
    return [{"configId": o["id"], **{k: v for k, v in o.items() if k != "id"}} for o in options]


def commands(available: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """v1 commands as v2's tagged `command`s; an input hint becomes a `text` input."""
    shown: list[dict[str, Any]] = []
    for command in available:
        entry = {"type": "command", **{k: v for k, v in command.items() if k != "input"}}
        if isinstance(command.get("input"), dict):
            entry["input"] = {"type": "text", **command["input"]}
        shown.append(entry)
    return shown


def permission_request(params: dict[str, Any]) -> dict[str, Any]:
    """A v1 `session/request_permission` as v2's: the tool call is the `subject`, its title the
    question's `title`; the options and the answer's shape are the same."""
    call = tool_call(params["toolCall"])
    title = call.get("title") or "Allow this tool call?"
    rest = {k: v for k, v in params.items() if k != "toolCall"}
    return {**rest, "title": title, "subject": {"type": "tool_call", "toolCall": call}}
