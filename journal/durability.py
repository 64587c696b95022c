"""When an appended event is committed: the rules the server and the journal share.

The server commits every event before its `session/update` is written to the editor (it appends
with `durable=True`), so a process crash never takes back what the editor showed; the turns that
append while a commit is in flight share the next one. `is_durable` names the events committed
before `Journal.append` returns even when the caller does not ask (a bulk writer's group commit):
the decisions a crash must never hide. Against power loss see the durability policy in docs/sessions.md.
"""

from __future__ import annotations

from adapters.events import RuntimeEvent, ToolCallUpdated

# The prompt, a tool's start, a permission decision, the run's end; and (below) a tool's
# dispatched record, its `in_progress` update, which the thread bridge waits for before the tool
# runs, so a crash can never hide a side effect that happened.
DURABLE_KINDS = frozenset({"prompt", "tool_started", "permission", "done"})


def is_durable(event: RuntimeEvent) -> bool:
    """True when `event` is committed before its append returns, whether or not the caller asks."""
    if event.kind in DURABLE_KINDS:
        return True
    return isinstance(event, ToolCallUpdated) and event.status == "in_progress"
