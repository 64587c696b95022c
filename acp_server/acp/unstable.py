"""The params of ACP's unstable parts we implement (`--unstable`): a client's `systemPrompt` on
session/new, load, resume and fork, and `session/fork`'s own; read only when the switch is on
(off, a stable server ignores them as before).

`systemPrompt` is checked as the schema says an agent must: a mode it does not support, a block
other than text or an empty array is -32602 and no session is created, loaded or forked.
"""

from __future__ import annotations

from typing import Any, NamedTuple, cast

from acp_server.rpc.errors import FieldProblem, invalid_params
from adapters.base import SystemPrompt

FIELD = "systemPrompt"
SYSTEM_PROMPT = "systemPrompt"  # the session's config key it is kept under (no option of that name is shown)


def system_prompt_param(params: dict[str, Any], *, override: bool) -> SystemPrompt | None:
    """The request's `systemPrompt` (omitted and null alike: None); `override` whether the agent
    supports that mode."""
    value: Any = params.get(FIELD)
    if value is None:
        return None
    if type(value) is not dict:
        raise _invalid(FIELD, "must be an object with mode and content")
    fields = cast("dict[str, Any]", value)
    mode = fields.get("mode")
    if mode not in ("append", "override") or (mode == "override" and not override):
        raise _invalid(f"{FIELD}.mode", f"{mode!r} is not a mode this agent supports")
    content: Any = fields.get("content")
    if type(content) is not list or not content:
        raise _invalid(f"{FIELD}.content", "must be a non-empty array of text blocks")
    texts: list[str] = []
    for index, block in enumerate(cast("list[Any]", content)):
        item = cast("dict[str, Any]", block) if type(block) is dict else {}
        if item.get("type") != "text" or type(item.get("text")) is not str:
            raise _invalid(f"{FIELD}.content.{index}", "is not a text block")
        texts.append(item["text"])
    return SystemPrompt("\n\n".join(texts), override=mode == "override")


def stored(prompt: SystemPrompt) -> dict[str, Any]:
    """How the session keeps it (in its journaled config), so a restart keeps it too."""
    return {"mode": "override" if prompt.override else "append", "text": prompt.text}


def with_system_prompt(config: dict[str, Any], prompt: SystemPrompt | None) -> dict[str, Any]:
    """A session's config with `prompt` kept in it (None: the one it has stays)."""
    return dict(config) if prompt is None else {**config, SYSTEM_PROMPT: stored(prompt)}


def from_stored(value: object) -> SystemPrompt | None:
    if not isinstance(value, dict):
        return None
    fields = cast("dict[str, Any]", value)
    text = fields.get("text")
    return SystemPrompt(text, override=fields.get("mode") == "override") if isinstance(text, str) else None


class ForkRequest(NamedTuple):
    session_id: str
    cwd: str
    mcp_servers: tuple[dict[str, Any], ...]
    additional_directories: tuple[str, ...] | None


def fork_params(params: dict[str, Any]) -> ForkRequest:
    """session/fork's params, checked as session/load's are (the same fields, by the same rules)."""
    from acp_server.protocol.opening import load_session_params

    read = load_session_params(params)
    return ForkRequest(read.session_id, read.cwd, read.mcp_servers, read.additional_directories)


def _invalid(field: str, problem: str) -> Exception:
    return invalid_params(FieldProblem(field, problem), message=f"{field} {problem}")
