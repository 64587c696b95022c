"""Answers to requests, checked on the side that asked: the models of what the editor answers the
server that models.py does not already hold, the server's requests and answers as the `prompt`
client reads them, and `parse_answer`, which turns a mismatch into `MalformedAnswerError` naming
each failing field and the JSON kind found there (never the value). No behaviour beyond that.
"""

from __future__ import annotations

import os
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError, field_validator
from pydantic_core import ErrorDetails

from acp_server.protocol.models import WireModel, field_problems
from acp_server.rpc.errors import SUMMARIZED_PROBLEMS, FieldProblem

M = TypeVar("M", bound=BaseModel)

# --- what the editor answers the server ----------------------------------------------------


class Acknowledged(WireModel):
    """The answer to fs/write_text_file, terminal/kill and terminal/release: an object with
    nothing we read (`parse_answer` also takes `null` for it, as the reference SDK does)."""


# --- the `prompt` client's side: the server's requests and answers, as far as it reads them --
# (`sessionId` is not required: the client has one session and does not read it.)


def _absolute(path: str) -> str:
    if not os.path.isabs(path):
        raise ValueError("must be an absolute path")
    return os.path.normpath(path)


class PermissionOption(WireModel):
    option_id: str
    name: str
    kind: str  # allow_once, allow_always, reject_once, reject_always; a newer kind is not chosen


class PermissionToolCall(WireModel):
    tool_call_id: str
    title: str | None = None
    kind: str | None = None


class RequestPermissionParams(WireModel):
    tool_call: PermissionToolCall
    options: list[PermissionOption]


def _count(value: int | None) -> int | None:
    if value is not None and value < 0:
        raise ValueError("must be a non-negative integer")
    return value


class ReadTextFileParams(WireModel):
    path: str
    line: int | None = Field(default=None, strict=True)  # strict: `true` and "2" are not lines
    limit: int | None = Field(default=None, strict=True)

    _path = field_validator("path")(_absolute)
    _counts = field_validator("line", "limit")(_count)


class WriteTextFileParams(WireModel):
    path: str
    content: str

    _path = field_validator("path")(_absolute)


class InitializeAnswer(WireModel):
    protocol_version: int


class NewSessionAnswer(WireModel):
    session_id: str


class PromptAnswer(WireModel):
    stop_reason: str


# --- checking an answer -------------------------------------------------------------------


class MalformedAnswerError(Exception):
    """A peer's answer to one of our requests that does not match the schema. `problems` name
    the failing fields and the JSON kind that was there instead, never the values."""

    def __init__(self, problems: list[FieldProblem]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{p.field} {p.problem}" for p in problems[:SUMMARIZED_PROBLEMS]))


def parse_answer(model: type[M], answer: Any) -> M:
    """Validate an answer (a response's `result`) as `model`, or raise `MalformedAnswerError`.
    `null` counts as `{}` for `Acknowledged`, whose answers carry nothing we read."""
    if answer is None and model is Acknowledged:
        answer = {}
    try:
        return model.model_validate(answer)
    except ValidationError as exc:
        # field_problems words each error as -32602 does; the same errors, in order, with inputs
        # (their JSON kind is named, never their value) and context (the union tag's name).
        worded = field_problems(exc)
        problems = [_answer_problem(e, w.problem) for e, w in zip(exc.errors(include_url=False), worded, strict=True)]
        raise MalformedAnswerError(problems) from None


_TYPE_ERRORS = frozenset(
    {"model_type", "model_attributes_type", "dict_type", "list_type", "string_type"}
    | {"int_type", "int_parsing", "bool_type", "bool_parsing"}
)


def _answer_problem(error: ErrorDetails, problem: str) -> FieldProblem:
    loc, kind, context = error["loc"], error["type"], error.get("ctx") or {}
    parts = [str(part) for part in loc if part not in ("selected", "cancelled")]  # union tags
    if kind in ("union_tag_not_found", "union_tag_invalid"):
        # The message names the tag field itself ("outcome.outcome"), not the object holding it.
        parts.append(str(context.get("discriminator", "type")).strip("'"))
        problem = "is required" if kind == "union_tag_not_found" else "has an unknown value"
    elif kind in _TYPE_ERRORS:
        problem = f"{problem}, not {_json_kind(error.get('input'))}"
    return FieldProblem(".".join(parts) or "the answer", problem)


def _json_kind(value: object) -> str:
    """What JSON value a Python value came from, for messages that must not echo it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    return "an array" if isinstance(value, list) else "an object"
