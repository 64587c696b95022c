"""The stable start of every request: the system message and the tools array, built in tiers.

Most stable first, so a provider's prefix cache keeps matching: a frozen tier (identity, tool
guidance), then a context tier (the project's directories and environment, a date-only stamp),
then the conversation. The system message is written once per session and kept in its
transcript, so it stays byte-identical across turns, restarts and midnight; tools are sorted.
On a small window (`fixed_part`) both come terse: a short identity, tools without their
parameters' descriptions.
"""

from __future__ import annotations

import datetime
import platform
from collections.abc import Iterable, Sequence
from typing import Any

from adapters.base import SystemPrompt
from adapters.openai.context import DEFAULT
from adapters.openai.jsonvalues import is_array, is_object
from adapters.openai.tools import Tool

IDENTITY = """\
You are a coding agent inside the user's editor. You work on the user's project through tools \
and answer in the editor's chat."""

GUIDANCE = """\
Use the tools to look at the code before changing it: read_file, list_directory and \
search_text to explore, edit_file (exact, unique replacement) or write_file to change files, \
run_command to build and test. Paths are relative to the working directory. Tools whose names \
start with mcp__ come from the user's MCP servers. Keep answers short; say what you changed and why."""

TERSE_IDENTITY = """\
You are a coding agent in the user's editor. Look at the code with the tools before changing it; \
paths are relative to the working directory. Keep answers short."""

CONTEXT_START = "Working directory: "  # where the context tier begins (`system_message`)
FIXED_SHARE = 0.125  # a full fixed part over this share of the request budget is sent terse
TERSE_DESCRIPTION = 160  # characters of a tool's description kept, at most its first sentence
SCHEMA_PROSE = frozenset({"description", "title", "examples"})
SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})  # name -> schema
SCHEMA_DATA = frozenset({"default", "enum", "const"})  # values, not schemas


def fixed_part(
    tools: Iterable[Tool], cwd: str, additional_directories: Sequence[str] = (), *, budget: int | None
) -> tuple[str, list[dict[str, Any]]]:
    """The system message and the tools array: terse when the full ones would take more than
    `FIXED_SHARE` of a request's `budget` (estimated uncalibrated, so a session's choice stays put)."""
    tools = list(tools)
    system, schemas = system_message(cwd, additional_directories), tool_schemas(tools)
    if budget is None or DEFAULT.tokens([system, schemas]) <= budget * FIXED_SHARE:
        return system, schemas
    return system_message(cwd, additional_directories, terse=True), tool_schemas(tools, terse=True)


def system_message(
    cwd: str, additional_directories: Sequence[str] = (), today: datetime.date | None = None, *, terse: bool = False
) -> str:
    """The frozen tier, then the context tier; nothing in it changes within a day."""
    day = (today or datetime.date.today()).isoformat()
    context = [f"Working directory: {cwd}"]
    if additional_directories:
        context.append("Other workspace directories: " + ", ".join(additional_directories))
    context.append(f"Operating system: {platform.system() or 'unknown'}")
    context.append(f"Session started on: {day}")
    frozen = TERSE_IDENTITY if terse else f"{IDENTITY}\n\n{GUIDANCE}"
    return f"{frozen}\n\n" + "\n".join(context)


def with_instructions(system: str, instructions: SystemPrompt) -> str:
    """The system message with a client's system prompt: after it (append), or in place of the
    frozen tier, the context tier kept (override: the tools and the workspace stay the same)."""
    if not instructions.override:
        return f"{system}\n\n{instructions.text}"
    at = system.find(CONTEXT_START)
    return instructions.text if at < 0 else f"{instructions.text}\n\n{system[at:]}"


def tool_schemas(tools: Iterable[Tool], *, terse: bool = False) -> list[dict[str, Any]]:
    """The tools array, sorted by name: the same tools always give the same bytes."""
    ordered = sorted(tools, key=lambda tool: tool.name)
    if not terse:
        return [tool.schema() for tool in ordered]
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": first_sentence(tool.description),
                "parameters": bare(tool.parameters),
            },
        }
        for tool in ordered
    ]


def first_sentence(text: str) -> str:
    sentence = text.split(". ", 1)[0].strip()
    return sentence if len(sentence) <= TERSE_DESCRIPTION else sentence[: TERSE_DESCRIPTION - 3] + "..."


def bare(schema: Any) -> Any:
    """A JSON schema without its prose (descriptions, titles, examples); what it accepts is kept."""
    if is_array(schema):
        return [bare(item) for item in schema]
    if not is_object(schema):
        return schema
    kept: dict[str, Any] = {}
    for key, value in schema.items():
        if key in SCHEMA_PROSE:
            continue
        if key in SCHEMA_MAPS and is_object(value):
            kept[key] = {name: bare(item) for name, item in value.items()}
        else:
            kept[key] = value if key in SCHEMA_DATA else bare(value)
    return kept
