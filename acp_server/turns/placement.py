"""Where a turn's commands run, as `--terminal` says: `auto` (the editor's terminal when it
offered `terminal`), `editor` (only there) or `local` (never there). `turns.terminal` acts on it."""

from __future__ import annotations

from typing import Literal, get_args

TerminalChoice = Literal["auto", "editor", "local"]
TERMINAL_CHOICES: tuple[TerminalChoice, ...] = get_args(TerminalChoice)


def terminal_choice(text: str) -> TerminalChoice | None:
    """The `--terminal` value `text` names, or None."""
    return next((choice for choice in TERMINAL_CHOICES if choice == text), None)
