"""The permission flow of a tool call: the policy decides, or the user does through the editor.

`PermissionFlow` asks `policy.decide` first and sends `session/request_permission` only when
it says "ask", with options that name what an "always" answer would cover. "Always" answers are
remembered in the session's `PermissionMemory` (and saved through `on_remember`); every outcome,
including a cancelled ask, is reported as a `PermissionDecided` event so the journal records who
decided what. A decision holds for the call as it was decided on: a command run for the call
must be the one it named (`check_command`), or it is decided on again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import field, replace
from typing import Any, Literal

import anyio

from acp_server.protocol import methods
from acp_server.rpc.errors import RequestTimeoutError, RpcError
from acp_server.turns.client import EditorChannel, check_answer, error_text
from acp_server.turns.mapping import tool_call_fields
from acp_server.turns.policy import PermissionMemory, Subject, approved_command, decide, remembered, subject_of
from adapters.base import PermissionDecision, ToolRefused
from adapters.events import PermissionDecided, RuntimeEvent, ToolCallStarted
from adapters.frozen import frozen
from journal.caps import capped_tool
from journal.redact import redact_event, redact_text

log = logging.getLogger(__name__)

Outcome = Literal["allowed", "rejected", "cancelled", "timed_out"]
Emit = Callable[[RuntimeEvent], Awaitable[None]]
Decided = tuple[ToolCallStarted, bool]


def permission_options(subject: Subject) -> list[dict[str, Any]]:
    """The answers to a question, the "always" ones named by what they cover (optionId = kind)."""
    labels = [
        ("allow_once", "Allow once"),
        ("allow_always", subject.allow_label),
        ("reject_once", "Reject"),
        ("reject_always", subject.reject_label),
    ]
    # Labels name commands, which may carry a secret: shown as the journal keeps them.
    return [{"optionId": kind, "name": redact_text(name), "kind": kind} for kind, name in labels if name is not None]


@frozen(kw_only=True)
class PermissionFlow:
    channel: EditorChannel
    permissions: PermissionMemory
    mode: Callable[[], str]
    emit: Emit
    timeout: float | None = None  # seconds the user gets to answer; None waits for ever
    on_remember: Callable[[], Awaitable[None]] | None = None
    # tool call id -> the call as its permission was decided on, and whether it was allowed
    decided: dict[str, Decided] = field(default_factory=dict[str, Decided])

    async def request(self, tool: ToolCallStarted, offered: Collection[str] | None = None) -> PermissionDecision:
        """Decide by the policy; ask the user only when it says so, or when its "allow" cannot be
        given as asked (`offered`, the option kinds an agent below can honour, has no
        `allow_once`). Every outcome is reported."""
        decision = await self._decide(tool, offered)
        self.decided[tool.tool_call_id] = (tool, decision.allowed)
        return decision

    async def check_command(self, command: str, tool_call_id: str | None) -> None:
        """Before a command runs for a tool call whose permission was decided: refuse it when the
        call was not allowed; decide again when it is not the command the decision named (the
        agent changed it, or the question named none), so what runs is what was allowed."""
        if tool_call_id not in self.decided:
            return  # the agent did not ask about this call (or named none)
        tool, allowed = self.decided[tool_call_id]
        if not allowed:
            raise ToolRefused("Refused: this tool call was not allowed")
        if approved_command(tool) == command:
            return
        changed = replace(tool, title=f"Run `{command}`", tool_kind="execute", raw_input={"command": command})
        decision = await self.request(changed)
        if not decision.allowed:
            raise ToolRefused(decision.reason or "Permission denied by the user")

    async def _decide(self, tool: ToolCallStarted, offered: Collection[str] | None) -> PermissionDecision:
        verdict = decide(self.mode(), tool, self.permissions.decisions)
        if verdict == "allow" and offered is not None and "allow_once" not in offered:
            verdict = "ask"  # the agent could only be told "always", which is more than the policy said
        if verdict != "ask":
            by = "policy" if remembered(tool, self.permissions.decisions) is None else "remembered"
            await self.emit(PermissionDecided(tool.tool_call_id, "allowed" if verdict == "allow" else "rejected", by))
            if verdict == "allow":
                return PermissionDecision(True)
            why = 'an earlier "always reject"' if by == "remembered" else f"{self.mode()} mode"
            return PermissionDecision(False, reason=f"Refused by {why}")
        try:
            decision, outcome, option = await self._ask_user(tool, offered)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.emit(PermissionDecided(tool.tool_call_id, "cancelled", "user"))
            raise
        await self.emit(PermissionDecided(tool.tool_call_id, outcome, "user", option))
        return decision

    async def _ask_user(
        self, tool: ToolCallStarted, offered: Collection[str] | None
    ) -> tuple[PermissionDecision, Outcome, str | None]:
        from acp_server.protocol.models import PermissionResult  # pydantic: with the first answer

        fields = tool_call_fields(redact_event(capped_tool(tool)))  # the call as the journal keeps it
        fields.pop("status")
        subject = subject_of(tool)
        # Only answers that can be given as the user chose them: never "once" sent as "always".
        options = [o for o in permission_options(subject) if offered is None or _answerable(o["kind"], offered)]
        params = {"toolCall": fields, "options": options}
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
        if option not in {offered["optionId"] for offered in options}:
            log.warning("unknown permission option %r; treating it as a rejection", option)
            return PermissionDecision(False, reason="Denied: the editor chose an unknown option"), "rejected", option
        allowed, always = option.startswith("allow"), option.endswith("always")
        if always:
            self.permissions.decisions.update(dict.fromkeys(subject.allow if allowed else subject.reject, allowed))
            if self.on_remember is not None:
                await self.on_remember()
        reason = None if allowed else "Permission denied by the user"
        decision = PermissionDecision(allowed, remember=always, reason=reason)
        return decision, "allowed" if allowed else "rejected", option


def _answerable(kind: str, offered: Collection[str]) -> bool:
    """Whether an answer of `kind` reaches an agent below that offers the `offered` kinds as the
    user meant it: a "once" only as its own "once"; an "always" is ours to keep (the journal
    remembers it and answers the agent "once" each time), so the agent's "once" serves it too."""
    if kind.endswith("_always"):
        return kind in offered or kind.replace("_always", "_once") in offered
    return kind in offered
