"""Slash commands: the server's own (`/help`, `/mode`, `/permissions`, `/status`) and the
adapter's. A prompt that starts with a built-in command is answered by the server itself, as
an agent message in a journaled turn; any other prompt, slash or not, goes to the adapter.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from acp_server.protocol.results import AvailableCommand, CommandInput
from acp_server.turns.policy import MODE_IDS, MODES
from adapters.base import AdapterCapabilities, SlashCommand
from adapters.frozen import frozen

BUILTINS = (
    SlashCommand("help", "List the commands you can use here"),
    SlashCommand("mode", "Show or change how cautious the agent is", hint="ask | accept-edits | read-only | yolo"),
    SlashCommand("permissions", "List the 'always' answers you gave, or revoke them", hint="revoke <n> | clear"),
    SlashCommand("status", "Show this session's settings"),
)
BUILTIN_NAMES = frozenset(c.name for c in BUILTINS)


def available_commands(caps: AdapterCapabilities) -> list[AvailableCommand]:
    commands = [*BUILTINS, *(c for c in caps.commands if c.name not in BUILTIN_NAMES)]
    return [
        AvailableCommand(name=c.name, description=c.description, input=CommandInput(hint=c.hint) if c.hint else None)
        for c in commands
    ]


def builtin_invocation(text: str) -> tuple[str, str] | None:
    """(`name`, arguments) when `text` invokes a built-in command, else None."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    name, _, args = stripped[1:].partition(" ")
    return (name, args.strip()) if name in BUILTIN_NAMES else None


@frozen
class CommandContext:
    """What built-in commands may look at and change, without knowing the server's internals."""

    session_id: str
    cwd: str
    agent_name: str
    mode: str
    config: dict[str, Any]
    permissions: dict[str, bool]
    set_mode: Callable[[str], Awaitable[None]]
    save_permissions: Callable[[], Awaitable[None]]
    commands: list[AvailableCommand]


async def run_builtin(name: str, args: str, ctx: CommandContext) -> str:
    handler = {"help": _help, "mode": _mode, "permissions": _permissions, "status": _status}[name]
    return await handler(args, ctx)


async def _help(args: str, ctx: CommandContext) -> str:
    lines = ["Commands:"]
    for command in ctx.commands:
        hint = f" {command.input.hint}" if command.input is not None else ""
        lines.append(f"- `/{command.name}{hint}`: {command.description}")
    return "\n".join(lines)


async def _mode(args: str, ctx: CommandContext) -> str:
    if not args:
        listed = "\n".join(f"- `{m.id}`{' (current)' if m.id == ctx.mode else ''}: {m.description}" for m in MODES)
        return f"Mode: **{ctx.mode}**\n\n{listed}\n\nChange it with `/mode <name>`."
    if args not in MODE_IDS:
        return f"There is no mode `{args}`. Modes: {', '.join(f'`{m.id}`' for m in MODES)}."
    await ctx.set_mode(args)
    return f"Mode is now **{args}**."


async def _permissions(args: str, ctx: CommandContext) -> str:
    keys = sorted(ctx.permissions)
    if args == "clear":
        ctx.permissions.clear()
        await ctx.save_permissions()
        return f"Revoked all {len(keys)} 'always' answers." if keys else "There were no 'always' answers."
    if args.startswith("revoke"):
        which = args.removeprefix("revoke").strip()
        if not which.isdigit() or not 1 <= int(which) <= len(keys):
            return f"Give the number of the answer to revoke (1 to {len(keys)}); see `/permissions`."
        key = keys[int(which) - 1]
        allowed = ctx.permissions.pop(key)
        await ctx.save_permissions()
        return f"Revoked: always {'allow' if allowed else 'reject'} `{key}`."
    if not keys:
        return "No 'always' answers in this session."
    lines = ["'Always' answers in this session:"]
    lines += [f"{n}. always {'allow' if ctx.permissions[k] else 'reject'} `{k}`" for n, k in enumerate(keys, 1)]
    lines.append("\nRevoke one with `/permissions revoke <n>`, or all with `/permissions clear`.")
    return "\n".join(lines)


async def _status(args: str, ctx: CommandContext) -> str:
    config = ", ".join(f"{k}={v}" for k, v in ctx.config.items()) or "none"
    return (
        f"Session `{ctx.session_id}`\n- agent: {ctx.agent_name}\n- cwd: {ctx.cwd}\n- mode: {ctx.mode}\n"
        f"- options: {config}\n- 'always' answers: {len(ctx.permissions)}"
    )
