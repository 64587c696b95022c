"""Questions an agent puts to the user (`clarify`): a form, or choices shown as permission options.

A form (`elicitation/create`) when the editor can show one; otherwise, when the question has
choices, a `session/request_permission` whose options are the choices plus "Skip". A question
asked outside any tool call gets a "think" tool call of its own, so the editor shows it.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import field
from typing import Any

from acp_server.protocol import methods
from acp_server.turns.client import EditorChannel
from adapters.base import ToolRefused
from adapters.events import RuntimeEvent, TextContent, ToolCallStarted, ToolCallUpdated
from adapters.frozen import frozen


@frozen(kw_only=True)
class Questions:
    channel: EditorChannel
    forms: bool  # the editor advertised `elicitation.form`
    urls: bool = False  # ... and `elicitation.url`
    emit: Callable[[RuntimeEvent], Awaitable[None]]
    timeout: float | None = None  # seconds the user gets to answer; None waits for ever
    shown: set[str] = field(default_factory=set[str])  # ids of the URLs the editor was shown

    async def clarify(self, question: str, choices: tuple[str, ...], tool_call_id: str | None) -> str:
        """The user's answer; `ToolRefused` when they decline, skip or cannot be asked."""
        if self.forms:
            return await self._ask_form(question, choices, tool_call_id)
        if choices:
            return await self._ask_choices(question, choices, tool_call_id)
        raise ToolRefused(
            "Cannot ask the user: this editor shows neither forms (elicitation) nor choices for an open question"
        )

    async def elicit(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """An agent's own form or URL, asked as it is; None when the editor shows no such mode.
        A question that timed out, failed or was answered malformed counts as cancelled."""
        from acp_server.protocol.models import ElicitationResult  # pydantic: with the first answer

        mode = request.get("mode")
        if not ((mode == "form" and self.forms) or (mode == "url" and self.urls)):
            return None
        if mode == "url" and isinstance(request.get("elicitationId"), str):
            self.shown.add(request["elicitationId"])
        try:
            reply = await self.channel.ask(methods.ELICITATION_CREATE, request, ElicitationResult, timeout=self.timeout)
        except ToolRefused:
            return {"action": "cancel"}
        if reply.action == "accept":
            return {"action": "accept"} | ({"content": reply.content} if reply.content is not None else {})
        return {"action": reply.action if reply.action == "cancel" else "decline"}

    async def complete(self, elicitation_id: str) -> None:
        """`elicitation/complete` for a URL the editor was shown (its session named, for a runner's
        routes); nothing for one it was not."""
        if elicitation_id not in self.shown:
            return
        self.shown.discard(elicitation_id)
        params = {"sessionId": self.channel.session_id, "elicitationId": elicitation_id}
        await self.channel.peer.notify(methods.ELICITATION_COMPLETE, params)

    async def _ask_form(self, question: str, choices: tuple[str, ...], tool_call_id: str | None) -> str:
        from acp_server.protocol.models import ElicitationResult

        answer: dict[str, Any] = {"type": "string", "title": "Answer"}
        if choices:
            answer["enum"] = list(choices)
        params: dict[str, Any] = {
            "message": question,
            "mode": "form",
            "requestedSchema": {"type": "object", "properties": {"answer": answer}, "required": ["answer"]},
        }
        if tool_call_id is not None:
            params["toolCallId"] = tool_call_id
        reply = await self.channel.ask(methods.ELICITATION_CREATE, params, ElicitationResult, timeout=self.timeout)
        given = (reply.content or {}).get("answer")
        if reply.action != "accept" or not isinstance(given, str):
            raise ToolRefused(
                "The user declined to answer"
                if reply.action == "decline"
                else "The question was dismissed without an answer"
            )
        return given

    async def _ask_choices(self, question: str, choices: tuple[str, ...], tool_call_id: str | None) -> str:
        if tool_call_id is not None:
            return await self._choose(question, choices, tool_call_id)
        call_id = f"call_{os.urandom(8).hex()}"
        await self.emit(ToolCallStarted(call_id, question, "think"))
        try:
            answer = await self._choose(question, choices, call_id)
        except ToolRefused as exc:
            await self.emit(ToolCallUpdated(call_id, status="failed", content=(TextContent(str(exc)),)))
            raise
        await self.emit(ToolCallUpdated(call_id, status="completed", content=(TextContent(answer),)))
        return answer

    async def _choose(self, question: str, choices: tuple[str, ...], call_id: str) -> str:
        from acp_server.protocol.models import PermissionResult

        options = [
            {"optionId": f"choice_{n}", "name": choice, "kind": "allow_once"} for n, choice in enumerate(choices)
        ]
        options.append({"optionId": "skip", "name": "Skip", "kind": "reject_once"})
        params = {"toolCall": {"toolCallId": call_id, "title": question, "kind": "think"}, "options": options}
        result = await self.channel.ask(methods.REQUEST_PERMISSION, params, PermissionResult, timeout=self.timeout)
        outcome = result.outcome
        index = _choice_index(outcome.option_id if outcome.outcome == "selected" else None, len(choices))
        if index is None:
            raise ToolRefused("The user skipped the question")
        return choices[index]


def _choice_index(option_id: str | None, count: int) -> int | None:
    """Which choice `choice_<n>` names; None for "Skip", a cancelled ask or an unknown option."""
    number = (option_id or "").removeprefix("choice_")
    if option_id is None or number == option_id or not number.isdecimal() or int(number) >= count:
        return None
    return int(number)
