"""The permission flow of a tool call: the policy decides, or the user does through the editor.

`PermissionFlow` asks `policy.decide` first and sends `session/request_permission` only when
it says "ask". "Always" answers are remembered in the session's `PermissionMemory` (and saved
through `on_remember`); every outcome, including a cancelled ask, is reported as a
`PermissionDecided` event so the journal records who decided what.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from acp_server.protocol import methods
from acp_server.protocol.models import PermissionResult
from acp_server.rpc.errors import RequestTimeoutError, RpcError
from acp_server.turns.client import EditorChannel, check_answer, error_text
from acp_server.turns.mapping import tool_call_fields
from acp_server.turns.policy import PermissionMemory, always_key, decide
from adapters.base import PermissionDecision, ToolRefused
from adapters.events import PermissionDecided, RuntimeEvent, ToolCallStarted

log = logging.getLogger(__name__)

Outcome = Literal["allowed", "rejected", "cancelled", "timed_out"]
Emit = Callable[[RuntimeEvent], Awaitable[None]]

PERMISSION_OPTIONS: list[dict[str, Any]] = [
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject_always", "name": "Always reject", "kind": "reject_always"},
]
_OPTION_IDS = frozenset(option["optionId"] for option in PERMISSION_OPTIONS)


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionFlow:
    channel: EditorChannel
    permissions: PermissionMemory
    mode: Callable[[], str]
    emit: Emit
    timeout: float | None = None  # seconds the user gets to answer; None waits for ever
    on_remember: Callable[[], Awaitable[None]] | None = None

    async def request(self, tool: ToolCallStarted) -> PermissionDecision:
        """Decide by the policy; ask the user only when it says so. Every outcome is reported."""
        verdict = decide(self.mode(), tool, self.permissions.decisions)
        if verdict != "ask":
            by = "remembered" if always_key(tool) in self.permissions.decisions else "policy"
            await self.emit(PermissionDecided(tool.tool_call_id, "allowed" if verdict == "allow" else "rejected", by))
            if verdict == "allow":
                return PermissionDecision(True)
            why = 'an earlier "always reject"' if by == "remembered" else f"{self.mode()} mode"
            return PermissionDecision(False, reason=f"Refused by {why}")
        try:
            decision, outcome, option = await self._ask_user(tool)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.emit(PermissionDecided(tool.tool_call_id, "cancelled", "user"))
            raise
        await self.emit(PermissionDecided(tool.tool_call_id, outcome, "user", option))
        return decision

    async def _ask_user(self, tool: ToolCallStarted) -> tuple[PermissionDecision, Outcome, str | None]:
        fields = tool_call_fields(tool)
        fields.pop("status")
        params = {"toolCall": fields, "options": PERMISSION_OPTIONS}
        try:
            result = await self.channel.request(methods.REQUEST_PERMISSION, params, timeout=self.timeout)
        except RequestTimeoutError:
            reason = f"No answer to the permission request within {self.timeout:g} s, so it was denied"
            return PermissionDecision(False, reason=reason), "timed_out", None
        except RpcError as exc:
            reason = f"Denied: the editor refused to ask ({error_text(exc)})"
            return PermissionDecision(False, reason=reason), "rejected", None
        try:
            answer = check_answer(methods.REQUEST_PERMISSION, PermissionResult, result).outcome
        except ToolRefused as exc:
            # Not the user's "no", but no "yes" either: this tool is denied, the turn goes on.
            log.warning("%s", exc)
            return PermissionDecision(False, reason=str(exc)), "rejected", None
        if answer.outcome == "cancelled":
            cancelled = PermissionDecision(False, cancelled=True, reason="The permission request was cancelled")
            return cancelled, "cancelled", None
        option = answer.option_id
        if option not in _OPTION_IDS:
            log.warning("unknown permission option %r; treating it as a rejection", option)
            return PermissionDecision(False, reason="Denied: the editor chose an unknown option"), "rejected", option
        allowed, always = option.startswith("allow"), option.endswith("always")
        if always:
            self.permissions.decisions[always_key(tool)] = allowed
            if self.on_remember is not None:
                await self.on_remember()
        reason = None if allowed else "Permission denied by the user"
        decision = PermissionDecision(allowed, remember=always, reason=reason)
        return decision, "allowed" if allowed else "rejected", option
