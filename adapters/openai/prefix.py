"""The stable start of every request: the system message and the tools array, built in tiers.

Most stable first, so a provider's prefix cache keeps matching: a frozen tier (identity, tool
guidance), then a context tier (the project's directories and environment, a date-only stamp),
then the conversation. The system message is written once per session and kept in its
transcript, so it stays byte-identical across turns, restarts and midnight; tools are sorted.
"""

from __future__ import annotations

import datetime
import platform
from collections.abc import Iterable, Sequence
from typing import Any

from adapters.openai.tools import Tool

IDENTITY = """\
You are a coding agent inside the user's editor. You work on the user's project through tools \
and answer in the editor's chat."""

GUIDANCE = """\
Use the tools to look at the code before changing it: read_file, list_directory and \
search_text to explore, edit_file (exact, unique replacement) or write_file to change files, \
run_command to build and test. Paths are relative to the working directory. Tools whose names \
start with mcp__ come from the user's MCP servers. Keep answers short; say what you changed and why."""


def system_message(cwd: str, additional_directories: Sequence[str] = (), today: datetime.date | None = None) -> str:
    """The frozen tier, then the context tier; nothing in it changes within a day."""
    day = (today or datetime.date.today()).isoformat()
    context = [f"Working directory: {cwd}"]
    if additional_directories:
        context.append("Other workspace directories: " + ", ".join(additional_directories))
    context.append(f"Operating system: {platform.system() or 'unknown'}")
    context.append(f"Session started on: {day}")
    return f"{IDENTITY}\n\n{GUIDANCE}\n\n" + "\n".join(context)


def tool_schemas(tools: Iterable[Tool]) -> list[dict[str, Any]]:
    """The tools array, sorted by name: the same tools always give the same bytes."""
    return [tool.schema() for tool in sorted(tools, key=lambda tool: tool.name)]
