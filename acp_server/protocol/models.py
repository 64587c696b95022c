"""Pydantic models of the ACP wire: what the client sends us (validated in `parse`, the one
place params are checked) and what the editor answers our requests. What we answer is in
`results.py`; `opening.py` reads the params of the start-up path without loading these.

Field names are snake_case in Python and camelCase on the wire. Unknown fields are ignored
(newer clients send more), while wrong types and missing required fields become -32602 with
the failing fields named and the input values never echoed.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from acp_server.rpc.errors import FieldProblem, invalid_params


class WireModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True, defer_build=True
    )  # built on first use: start-up stays fast

    def wire(self) -> dict[str, Any]:
        """The JSON object the peer reads: camelCase, unset optional fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True)


# --- content blocks ------------------------------------------------------------------------


class TextBlock(WireModel):
    type: Literal["text"]
    text: str


class ImageBlock(WireModel):
    type: Literal["image"]
    data: str
    mime_type: str


class AudioBlock(WireModel):
    type: Literal["audio"]
    data: str
    mime_type: str


class ResourceLinkBlock(WireModel):
    type: Literal["resource_link"]
    uri: str
    name: str


class EmbeddedResource(WireModel):
    uri: str
    text: str | None = None
    blob: str | None = None
    mime_type: str | None = None


class ResourceBlock(WireModel):
    type: Literal["resource"]
    resource: EmbeddedResource


ContentBlock = Annotated[
    TextBlock | ImageBlock | AudioBlock | ResourceLinkBlock | ResourceBlock,
    Field(discriminator="type"),
]


# --- requests ------------------------------------------------------------------------------


def _absolute(path: str) -> str:
    if not os.path.isabs(path):
        raise ValueError("must be an absolute path")
    return os.path.normpath(path)


class InitializeParams(WireModel):
    protocol_version: int = Field(ge=0, le=65535)
    client_capabilities: dict[str, Any] = Field(default_factory=dict)
    client_info: dict[str, Any] | None = None


class AuthenticateParams(WireModel):
    method_id: str


class McpServer(WireModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="allow", frozen=True, defer_build=True
    )
    name: str
    type: Literal["stdio", "http", "sse"] = "stdio"


def _absolute_or_none(path: str | None) -> str | None:
    return None if path is None else _absolute(path)


def _all_absolute(paths: list[str] | None) -> list[str]:
    return [_absolute(path) for path in paths or []]


class NewSessionParams(WireModel):
    cwd: str
    mcp_servers: list[McpServer]
    additional_directories: list[str] | None = None

    _cwd = field_validator("cwd")(_absolute)
    _dirs = field_validator("additional_directories")(_all_absolute)


class SessionParams(WireModel):
    session_id: str


class LoadSessionParams(SessionParams):
    cwd: str
    mcp_servers: list[McpServer] = Field(default_factory=list[McpServer])
    additional_directories: list[str] | None = None

    _cwd = field_validator("cwd")(_absolute)
    _dirs = field_validator("additional_directories")(_all_absolute)


class ListSessionsParams(WireModel):
    cwd: str | None = None
    cursor: str | None = None

    _cwd = field_validator("cwd")(_absolute_or_none)


class PromptParams(SessionParams):
    prompt: list[ContentBlock]


class SetModeParams(SessionParams):
    mode_id: str


class SetConfigOptionParams(SessionParams):
    config_id: str
    value: str | bool
    type: str | None = None


# --- responses to our requests -------------------------------------------------------------


class SelectedOutcome(WireModel):
    outcome: Literal["selected"]
    option_id: str


class CancelledOutcome(WireModel):
    outcome: Literal["cancelled"]


class PermissionResult(WireModel):
    outcome: Annotated[SelectedOutcome | CancelledOutcome, Field(discriminator="outcome")]


class ElicitationResult(WireModel):
    action: str
    content: dict[str, Any] | None = None


class ReadTextFileResult(WireModel):
    content: str


class CreateTerminalResult(WireModel):
    terminal_id: str


class TerminalExit(WireModel):
    exit_code: int | None = None
    signal: str | None = None


class TerminalOutputResult(WireModel):
    output: str
    truncated: bool = False
    exit_status: TerminalExit | None = None


# --- validation ----------------------------------------------------------------------------


M = TypeVar("M", bound=BaseModel)

_GENERIC = {
    "missing": "is required",
    "union_tag_invalid": "has an unknown type",
    "union_tag_not_found": "needs a type",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "dict_type": "must be an object",
    "list_type": "must be an array",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "bool_type": "must be a boolean",
    "bool_parsing": "must be a boolean",
}


# Discriminated unions put the tag into an error's location ("prompt.0.text.text"); a wire
# field path never contains these right after an array index.
_UNION_TAGS = frozenset({"text", "image", "audio", "resource_link", "resource", "selected", "cancelled"})


def _field_path(loc: tuple[int | str, ...]) -> str:
    parts = [
        part
        for i, part in enumerate(loc)
        if not (0 < i < len(loc) - 1 and isinstance(loc[i - 1], int) and part in _UNION_TAGS)
    ]
    return ".".join(str(part) for part in parts) or "params"


def field_problems(exc: ValidationError) -> list[FieldProblem]:
    """The failing fields of a validation error, without the values that failed."""
    return [
        FieldProblem(_field_path(error["loc"]), _GENERIC.get(error["type"], error["msg"].removeprefix("Value error, ")))
        for error in exc.errors(include_input=False, include_url=False, include_context=False)
    ]


def parse(model: type[M], params: Any) -> M:
    """Validate `params` as `model`, or raise -32602 naming every failing field."""
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise invalid_params(*field_problems(exc)) from None
