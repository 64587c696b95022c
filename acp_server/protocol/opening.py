"""The params of `initialize`, `session/new`, `session/load`/`session/resume` and
`session/prompt`, read without loading pydantic.

These requests open a connection and a session, and start its first turn: pydantic's models
would take longer to load than the rest of the server. Their models in `models.py` stay the
definition: params of the plain shape every client sends (the right JSON types, camelCase
names, absolute paths, text and resource-link blocks) are read here, with the result the models
would give; anything else goes through the models, which give the same result or the -32602
that names the failing fields. tests/test_opening.py checks that both agree.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, NamedTuple, cast

MCP_TRANSPORTS = ("stdio", "http", "sse")


class InitializeRequest(NamedTuple):
    protocol_version: int
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any] | None


class NewSessionRequest(NamedTuple):
    cwd: str
    mcp_servers: tuple[dict[str, Any], ...]  # as sent, with `type` first after `name` (stdio when unset)
    additional_directories: tuple[str, ...] | None


class PromptRequest(NamedTuple):
    session_id: str
    prompt: tuple[dict[str, Any], ...]  # each block as its model dumps it (camelCase, no None)


class LoadSessionRequest(NamedTuple):
    session_id: str
    cwd: str
    mcp_servers: tuple[dict[str, Any], ...]
    additional_directories: tuple[str, ...] | None


def initialize_params(params: dict[str, Any]) -> InitializeRequest:
    version: Any = params.get("protocolVersion")
    caps: Any = params.get("clientCapabilities", {})
    info: Any = params.get("clientInfo")
    plain = type(version) is int and 0 <= version <= 65535 and type(caps) is dict and type(info) in (dict, type(None))
    if plain and not params.keys() & {"protocol_version", "client_capabilities", "client_info"}:
        return InitializeRequest(version, caps, info)
    from acp_server.protocol.models import InitializeParams, parse

    model = parse(InitializeParams, params)
    return InitializeRequest(model.protocol_version, model.client_capabilities, model.client_info)


def new_session_params(params: dict[str, Any]) -> NewSessionRequest:
    if (read := _where(params, params.get("mcpServers"))) is not None:
        return NewSessionRequest(*read)
    from acp_server.protocol.models import NewSessionParams, parse

    model = parse(NewSessionParams, params)
    return NewSessionRequest(model.cwd, *_servers_and_directories(model))


def load_session_params(params: dict[str, Any]) -> LoadSessionRequest:
    session_id: Any = params.get("sessionId")
    read = _where(params, params.get("mcpServers", []))
    if read is not None and type(session_id) is str and "session_id" not in params:
        return LoadSessionRequest(session_id, *read)
    from acp_server.protocol.models import LoadSessionParams, parse

    model = parse(LoadSessionParams, params)
    return LoadSessionRequest(model.session_id, model.cwd, *_servers_and_directories(model))


def prompt_params(params: dict[str, Any]) -> PromptRequest:
    session_id: Any = params.get("sessionId")
    blocks: Any = params.get("prompt")
    if type(session_id) is str and "session_id" not in params and type(blocks) is list:
        plain = [_plain_block(block) for block in cast("list[object]", blocks)]
        if None not in plain:
            return PromptRequest(session_id, cast("tuple[dict[str, Any], ...]", tuple(plain)))
    from acp_server.protocol.models import PromptParams, parse

    model = parse(PromptParams, params)
    return PromptRequest(
        model.session_id, tuple(block.model_dump(by_alias=True, exclude_none=True) for block in model.prompt)
    )


def _plain_block(block: object) -> dict[str, Any] | None:
    """A text or resource-link block as its model gives it (unknown fields dropped), else None."""
    if type(block) is not dict:
        return None
    fields = cast("dict[str, object]", block)
    kind = fields.get("type")
    if kind == "text" and type(text := fields.get("text")) is str:
        return {"type": "text", "text": text}
    if kind == "resource_link" and type(uri := fields.get("uri")) is str and type(name := fields.get("name")) is str:
        return {"type": "resource_link", "uri": uri, "name": name}
    return None


Where = tuple[str, tuple[dict[str, Any], ...], tuple[str, ...] | None]


def _where(params: dict[str, Any], servers: Any) -> Where | None:
    """cwd, MCP servers and extra directories, when they have the plain shape; else None."""
    cwd: Any = params.get("cwd")
    directories: Any = params.get("additionalDirectories")
    plain = _absolute(cwd) and _all(servers, _plain_server) and (directories is None or _all(directories, _absolute))
    if not plain or params.keys() & {"mcp_servers", "additional_directories"}:
        return None
    paths = None if directories is None else tuple(os.path.normpath(d) for d in directories)
    return os.path.normpath(cwd), tuple(_server(server) for server in servers), paths


def _servers_and_directories(model: Any) -> tuple[tuple[dict[str, Any], ...], tuple[str, ...] | None]:
    dirs: list[str] | None = model.additional_directories
    return tuple(server.model_dump(by_alias=True) for server in model.mcp_servers), None if dirs is None else tuple(
        dirs
    )


def _all(items: object, check: Callable[[Any], bool]) -> bool:
    return type(items) is list and all(check(item) for item in cast("list[object]", items))


def _absolute(path: object) -> bool:
    return type(path) is str and os.path.isabs(path)


def _plain_server(server: object) -> bool:
    if type(server) is not dict:
        return False
    fields = cast("dict[str, object]", server)
    return type(fields.get("name")) is str and fields.get("type", "stdio") in MCP_TRANSPORTS


def _server(server: dict[str, Any]) -> dict[str, Any]:
    extra = {key: value for key, value in server.items() if key not in ("name", "type")}
    return {"name": server["name"], "type": server.get("type", "stdio"), **extra}
