"""Turns an agent name from the command line or settings into a runtime adapter.

Only the built-in agents for now; the server asks here and never imports adapters itself.
"""

from __future__ import annotations

from adapters.base import RuntimeAdapter
from adapters.echo import EchoAdapter
from adapters.scripted import ScriptedAdapter

BUILTIN_AGENTS = ("echo", "scripted")


def create_adapter(name: str, *, script: str | None = None) -> RuntimeAdapter:
    """Build the named agent; `script` is the scenario file of the scripted agent."""
    if name not in BUILTIN_AGENTS:
        raise ValueError(f"unknown agent {name!r}; known agents: {', '.join(BUILTIN_AGENTS)}")
    if name == "scripted":
        return ScriptedAdapter(script)
    if script is not None:
        # Silently ignoring it would leave someone wondering why their scenarios never play.
        raise ValueError(f"a script applies only to the scripted agent, not {name!r}")
    return EchoAdapter()
