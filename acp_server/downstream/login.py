"""The agent below's sign-in, offered as ours: its `authMethods` as the editor is shown them,
and the command that runs one of its terminal methods (`acp-server login`).

An editor runs a terminal method as *its* command for the agent (acp-server's, with whatever
follows `--`) with the method's `args` appended and `env` set. Appended arguments would land
after `--`, in the agent's command, so ours carries no `args`: `LOGIN_ENV` names the method,
and acp-server started with it runs the agent's command with the agent's own `args` instead of
serving (the agent's `env` is set by the editor on us, and passes down).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adapters.base import AuthMethod

LOGIN_ENV = "ACP_SERVER_LOGIN"  # the terminal method to run instead of serving

Json = dict[str, Any]


def offered(method: Json) -> AuthMethod:
    """The agent's method as acp-server offers it (`method` as `AgentInfo` keeps it)."""
    description = method.get("description")
    described = description if isinstance(description, str) else None
    if method.get("type") != "terminal":
        return AuthMethod(method["id"], method["name"], described)
    env: Mapping[str, str] = {**method["env"], LOGIN_ENV: method["id"]}
    return AuthMethod(method["id"], method["name"], described, kind="terminal", env=env)


def terminal_method(methods: tuple[Json, ...], method_id: str | None) -> Json:
    """The terminal method `method_id` (the only one when None); LookupError says what there is."""
    terminal = [m for m in methods if m.get("type") == "terminal"]
    if method_id is None and len(terminal) == 1:
        return terminal[0]
    for method in terminal:
        if method["id"] == method_id:
            return method
    if not terminal:
        agent = ", ".join(m["id"] for m in methods)
        why = f"its methods ({agent}) are run by the editor through authenticate" if agent else "it offers none"
        raise LookupError(f"the agent offers no sign-in to run in a terminal: {why}")
    ids = ", ".join(m["id"] for m in terminal)
    named = f"no method {method_id!r}" if method_id is not None else "several methods"
    raise LookupError(f"the agent has {named}; name one of: {ids}")
