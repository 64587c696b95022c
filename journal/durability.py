"""Which runtime events are durable: committed before `Journal.append` returns.

The one table the server and the journal share. A durable event is safe once its append
returns, so a worker may go on: the prompt, a visible tool, a permission decision, the run's
end, and a tool's dispatched record (its `in_progress` update), which the thread bridge waits
for before the tool runs so a crash can never hide a side effect that happened.
"""

from __future__ import annotations

from adapters.events import RuntimeEvent, ToolCallUpdated

DURABLE_KINDS = frozenset({"prompt", "tool_started", "permission", "done"})


def is_durable(event: RuntimeEvent) -> bool:
    """True when `event` must be committed before its append returns."""
    if event.kind in DURABLE_KINDS:
        return True
    return isinstance(event, ToolCallUpdated) and event.status == "in_progress"
