"""The agent's requests during a turn, answered through the sink, so they go where a built-in
agent's asks go: permission through our policy and then the editor, files through the editor
when it offers them and the local disk (inside the session's roots) otherwise, questions as
forms or choices, terminals as our own agents' commands (`terminals`).

`prepare` runs in the turn's worker thread, in order with the updates (a question shows the
call as the agent described it, started first if the agent never announced it); `answer` runs
in a thread of its own, as the user may take a while. A permission is answered with the
agent's own option of the kind we decided: a "once" one, since "always" answers are kept in our
journal and decided by our policy, not left to the agent; the agent's "always" only when the user
chose "always" where the agent offers no "once" (the question offers only what the agent does).
"""

from __future__ import annotations

import logging
from typing import Any, cast

from acp_server.downstream.link import CANCELLED_PERMISSION
from acp_server.downstream.terminals import Terminals
from acp_server.downstream.updates import ToolCalls
from acp_server.protocol import methods
from acp_server.rpc.errors import INTERNAL_ERROR, INVALID_PARAMS, REQUEST_CANCELLED, RESOURCE_NOT_FOUND, RpcError
from adapters.base import PermissionDecision, Sink, ToolRefused, TurnCancelled
from adapters.frozen import frozen

log = logging.getLogger(__name__)

Json = dict[str, Any]
TERMINAL_METHODS = frozenset(
    {
        methods.TERMINAL_CREATE,
        methods.TERMINAL_OUTPUT,
        methods.TERMINAL_WAIT_FOR_EXIT,
        methods.TERMINAL_KILL,
        methods.TERMINAL_RELEASE,
    }
)
ALLOW_KINDS = ("allow_once", "allow_always")
REJECT_KINDS = ("reject_once", "reject_always")


@frozen
class Prepared:
    """A request ready to be answered: `tool_call_id` for a permission question."""

    method: str
    params: Json
    tool_call_id: str | None = None


def prepare(method: str, params: Json, tools: ToolCalls) -> Prepared:
    if method != methods.REQUEST_PERMISSION:
        return Prepared(method, params)
    call = params.get("toolCall")
    if not isinstance(call, dict) or not isinstance(cast(Json, call).get("toolCallId"), str):
        raise RpcError(INVALID_PARAMS, "Invalid params: toolCall.toolCallId is required")
    return Prepared(method, params, tools.question(cast(Json, call)))


def answer(prepared: Prepared, sink: Sink, tools: ToolCalls, terminals: Terminals) -> Any:
    """The answer to send the agent, or an `RpcError` to answer with."""
    try:
        if prepared.method in TERMINAL_METHODS:
            return terminals.answer(prepared.method, prepared.params)
        return _answer(prepared, sink, tools)
    except TurnCancelled:
        if prepared.method == methods.REQUEST_PERMISSION:
            return CANCELLED_PERMISSION
        if prepared.method == methods.ELICITATION_CREATE:
            return {"action": "cancel"}
        raise RpcError(REQUEST_CANCELLED, "The turn was cancelled") from None
    except ToolRefused as exc:
        code = RESOURCE_NOT_FOUND if str(exc).startswith("No such file") else INTERNAL_ERROR
        raise RpcError(code, str(exc)) from None


def _answer(prepared: Prepared, sink: Sink, tools: ToolCalls) -> Any:
    params = prepared.params
    if prepared.method == methods.REQUEST_PERMISSION:
        assert prepared.tool_call_id is not None
        decision = sink.request_permission(prepared.tool_call_id, offered=offered_kinds(params.get("options")))
        if decision.allowed and not decision.cancelled:
            tools.allow(prepared.tool_call_id, cast(Json, params.get("toolCall")))
        return choose(params.get("options"), decision)
    if prepared.method == methods.FS_READ_TEXT_FILE:
        path, line, limit = params.get("path"), params.get("line"), params.get("limit")
        return {"content": sink.read_text_file(_path(path), line=_number(line), limit=_number(limit))}
    if prepared.method == methods.FS_WRITE_TEXT_FILE:
        content = params.get("content")
        if not isinstance(content, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: content must be a string")
        sink.write_text_file(_path(params.get("path")), content)
        return {}
    return _elicit(params, sink, tools)


def offered_kinds(options: Any) -> frozenset[str]:
    """The option kinds the agent offers, each with an id to answer with."""
    return frozenset(str(option.get("kind")) for option in _options(options) if isinstance(option.get("optionId"), str))


def choose(options: Any, decision: PermissionDecision) -> Json:
    """The agent's option that says what we decided, "once" before "always"; an allow is sent
    as "always" only when the user chose "always" (never wider than the answer); cancelled when
    the turn was, or when the agent offered no option of that kind."""
    if decision.cancelled:
        return CANCELLED_PERMISSION
    kinds = (ALLOW_KINDS if decision.remember else ALLOW_KINDS[:1]) if decision.allowed else REJECT_KINDS
    for kind in kinds:
        for option in _options(options):
            if option.get("kind") == kind and isinstance(option.get("optionId"), str):
                return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}
    log.warning("the agent offered no %s option; answering cancelled", "allow" if decision.allowed else "reject")
    return CANCELLED_PERMISSION


def _options(options: Any) -> list[Json]:
    listed = cast(list[Any], options) if isinstance(options, list) else []
    return [cast(Json, option) for option in listed if isinstance(option, dict)]


def _elicit(params: Json, sink: Sink, tools: ToolCalls) -> Json:
    """The agent's form or URL as it wrote it, to an editor that shows that mode (its tool call
    named by our id; a request-scoped one becomes the session's). For any other editor, a form
    of one text field (with or without choices) is asked as `clarify`; anything else declined."""
    if params.get("mode") not in ("form", "url") or not isinstance(params.get("message"), str):
        return {"action": "decline"}
    request = {k: v for k, v in params.items() if k not in ("sessionId", "requestId", "toolCallId")}
    theirs = params.get("toolCallId")
    ours = tools.ours(theirs) if isinstance(theirs, str) else None
    answer = sink.elicit(request | ({"toolCallId": ours} if ours is not None else {}))
    return answer if answer is not None else _as_question(params, sink)


def _as_question(params: Json, sink: Sink) -> Json:
    schema = params.get("requestedSchema")
    properties = cast(Json, schema).get("properties") if isinstance(schema, dict) else None
    message = params.get("message")
    if params.get("mode") != "form" or not isinstance(properties, dict) or not isinstance(message, str):
        return {"action": "decline"}
    fields = cast(Json, properties)
    if len(fields) != 1:
        return {"action": "decline"}
    name, spec = next(iter(fields.items()))
    spec = cast(Json, spec) if isinstance(spec, dict) else {}
    choices = spec.get("enum")
    if spec.get("type") != "string" or (choices is not None and not isinstance(choices, list)):
        return {"action": "decline"}
    options = [str(c) for c in cast(list[Any], choices or [])]
    try:
        given = sink.clarify(message, choices=options)
    except ToolRefused:
        return {"action": "decline"}
    return {"action": "accept", "content": {name: given}}


def _path(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise RpcError(INVALID_PARAMS, "Invalid params: path must be an absolute path")
    return value


def _number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
