"""Turns an agent name from the command line or settings into a runtime adapter.

Three kinds of names: a built-in (`echo`, `scripted`, `python`, `openai`, `hermes`), a third-party agent
installed with an `acp_server.agents` entry point, or an import path `module:factory`. Every
target is imported only when it is asked for; any failure is a `ValueError` saying what to do.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import shlex
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from adapters.base import RuntimeAdapter
from adapters.frozen import frozen

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "acp_server.agents"
BUILTINS: Mapping[str, str] = {
    "echo": "adapters.echo:EchoAdapter",
    "scripted": "adapters.registry:scripted_agent",
    "python": "adapters.registry:python_agent",
    "openai": "adapters.openai:OpenAIAdapter",
    "hermes": "adapters.hermes:HermesAdapter",
    # ACP agents below acp-server (acp_server/downstream), by import string: adapters imports nothing of it.
    "acp": "acp_server.downstream.presets:acp_agent",
    "claude": "acp_server.downstream.presets:claude",
    "codex": "acp_server.downstream.presets:codex",
    "gemini": "acp_server.downstream.presets:gemini",
    "fast-agent": "acp_server.downstream.presets:fast_agent",
    "hermes-acp": "acp_server.downstream.presets:hermes_acp",
}
ACP_AGENTS = frozenset({"acp", "claude", "codex", "gemini", "fast-agent", "hermes-acp"})
# The extra that installs a built-in's dependencies, where they are not the base install's.
EXTRAS: Mapping[str, str] = {"hermes": "hermes"}
ADAPTER_MEMBERS = ("name", "capabilities", "run_turn", "cancel")


@frozen
class AgentSpec:
    """A registered agent: its name, what it points to, and where it was registered."""

    name: str
    target: str  # module:attribute
    origin: str  # "built-in" or "entry point of <distribution>"


def agent_specs() -> tuple[AgentSpec, ...]:
    """The built-ins, then installed entry points by name (a name taken by a built-in is skipped)."""
    from importlib.metadata import entry_points  # scans every installed distribution: only when asked

    specs = [AgentSpec(name, target, "built-in") for name, target in BUILTINS.items()]
    seen = set(BUILTINS)
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name):
        if ep.name in seen:
            log.warning("ignoring the agent entry point %r of %s: the name is taken", ep.name, _dist(ep))
            continue
        seen.add(ep.name)
        target = f"{ep.module}:{ep.attr}" if ep.attr else ep.value
        specs.append(AgentSpec(ep.name, target, f"entry point of {_dist(ep)}"))
    return tuple(specs)


def known_agents() -> tuple[str, ...]:
    return tuple(spec.name for spec in agent_specs())


def create_adapter(name: str, **settings: Any) -> RuntimeAdapter:
    """Build the named agent. Settings (e.g. `script`) left as None are not given; any other
    setting goes to the factory, which must accept it."""
    given = {key: value for key, value in settings.items() if value is not None}
    spec = _find(name)
    target = spec.target if spec else name
    extra = EXTRAS.get(name) if spec else None
    obj = load_object(target, agent=name, install=install_command(extra) if extra else None)
    return build(obj, agent=name, target=target, settings=given)


def check_name(name: str) -> None:
    """ValueError naming the near miss and the known agents when `name` is no agent (a
    module:factory path is checked when it is loaded)."""
    _find(name)


def _find(name: str) -> AgentSpec | None:
    if name in BUILTINS:  # a built-in's name is never an entry point's (see agent_specs)
        return AgentSpec(name, BUILTINS[name], "built-in")
    spec = next((s for s in agent_specs() if s.name == name), None)
    if spec is None and ":" not in name:
        known = known_agents()
        raise ValueError(
            f"unknown agent {name!r}{_nearest(name, known)}; known agents: {', '.join(known)} (or give module:factory)"
        )
    return spec


def _nearest(name: str, known: tuple[str, ...]) -> str:
    """` (did you mean 'openai'?)` for a near miss such as `opneai`, else nothing."""
    import difflib

    close = difflib.get_close_matches(name, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --- importing -------------------------------------------------------------------------------


def install_command(extra: str) -> str:
    """How to add acp-server's `extra` to this install: `pip install -e '.[hermes]'` when it runs
    from a clone (its directory spelled out when it is not the current one), else
    `pip install 'acp-server[hermes]'`."""
    clone = Path(__file__).resolve().parent.parent
    if not (clone / "pyproject.toml").is_file():  # an installed package: no source tree around it
        return f"pip install {shlex.quote(f'acp-server[{extra}]')}"
    where = "." if clone == Path.cwd().resolve() else str(clone)
    return f"pip install -e {shlex.quote(f'{where}[{extra}]')}"


def load_object(target: str, *, agent: str | None = None, install: str | None = None) -> Any:
    """Import `module:attribute` (the module may also live in the current directory); `install`
    is the command that installs a missing dependency (else: pip install the package)."""
    label = f"agent {agent or target!r}"
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"{label}: {target!r} is not of the form module:factory")
    module = _import(module_name, label, install)
    obj: Any = module
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"{label}: module {module_name!r} has no attribute {attribute!r}") from None
    return obj


def _import(module_name: str, label: str, install: str | None) -> Any:
    try:
        return _import_with_cwd(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and not _is_part_of(module_name, missing):
            package = missing.split(".")[0]
            raise ValueError(
                f"{label} needs the Python package {package!r}, which is not installed "
                f"({install or f'pip install {shlex.quote(package)}'})"
            ) from exc
        raise ValueError(f"{label}: no module named {missing or module_name!r}") from exc
    except Exception as exc:
        raise ValueError(f"{label}: importing {module_name!r} failed: {type(exc).__name__}: {exc}") from exc


def _import_with_cwd(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # A console script's sys.path lacks the cwd; `--agent mymod:f` should work like `python -m`.
        cwd = os.getcwd()
        if exc.name != module_name.split(".")[0] or cwd in sys.path or "" in sys.path:
            raise
        sys.path.append(cwd)
        importlib.invalidate_caches()
        return importlib.import_module(module_name)


def _is_part_of(module_name: str, missing: str) -> bool:
    """Whether the missing module is the one asked for or one of its parent packages."""
    return module_name == missing or module_name.startswith(missing + ".")


def _dist(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return dist.name if dist is not None else "an unknown distribution"


# --- building --------------------------------------------------------------------------------


def build(obj: Any, *, agent: str, target: str, settings: Mapping[str, Any]) -> RuntimeAdapter:
    """An adapter from what a name points to: an adapter, a factory or class, or a run function."""
    if is_adapter(obj):
        _accepts(None, agent, settings)
        return obj
    if not callable(obj):
        raise ValueError(
            f"{_label(agent, target)} is {_kind(obj)}, which is neither an adapter "
            f"({_missing(obj)}) nor a factory or run function"
        )
    if is_run_function(obj):
        _accepts(None, agent, settings)
        return _wrap(obj, target)
    made = _call_factory(obj, agent=agent, target=target, settings=settings)
    if is_adapter(made):
        return made
    if is_run_function(made):
        return _wrap(made, f"{target}()")
    raise ValueError(
        f"{_label(agent, target)}: the factory returned {_kind(made)}, which is neither an adapter "
        f"({_missing(made)}) nor a run(prompt, session) function"
    )


def is_adapter(obj: Any) -> TypeGuard[RuntimeAdapter]:
    """Whether `obj` is an adapter instance: every member of the protocol, not a class."""
    return not inspect.isclass(obj) and not _missing_members(obj)


def _missing_members(obj: Any) -> list[str]:
    missing = [m for m in ADAPTER_MEMBERS[1:] if not callable(getattr(obj, m, None))]
    if not isinstance(getattr(obj, "name", None), str):
        missing.insert(0, "name")
    return missing


def _missing(obj: Any) -> str:
    return "it lacks " + ", ".join(_missing_members(obj)) + "; deriving adapters.callable.SimpleAdapter adds them"


def is_run_function(obj: Any) -> bool:
    """Run functions take (prompt, session); factories and classes take keyword settings only."""
    if inspect.isclass(obj) or not callable(obj):
        return False
    try:
        parameters = list(inspect.signature(obj).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    takes_two = len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in parameters)
    return takes_two and any(p.default is p.empty for p in positional)


def _call_factory(factory: Callable[..., Any], *, agent: str, target: str, settings: Mapping[str, Any]) -> Any:
    _accepts(factory, agent, settings)
    try:
        return factory(**settings)
    except ValueError:
        raise  # meant for the user already (a bad scenario file, a missing setting)
    except Exception as exc:
        raise ValueError(f"{_label(agent, target)}: the factory failed: {type(exc).__name__}: {exc}") from exc


def _accepts(factory: Callable[..., Any] | None, agent: str, settings: Mapping[str, Any]) -> None:
    """Refuse settings the factory would not receive (None: nothing is called with settings):
    silently dropping `--script` would leave someone wondering why their scenarios never play."""
    if not settings:
        return  # nothing to refuse; reading a signature costs milliseconds of every start
    accepted = _keyword_names(factory) if factory is not None else set[str]()
    if accepted is None:
        return
    for key in settings:
        if key not in accepted:
            if key == "script":
                raise ValueError(
                    f"a script applies only to the scripted agent (a scenario file) or the python "
                    f"agent (module:function), not {agent!r}"
                )
            if key == "command":
                listed = ", ".join(sorted(ACP_AGENTS))
                raise ValueError(f"a command after `--` applies only to the ACP agents ({listed}), not {agent!r}")
            raise ValueError(f"agent {agent!r} does not take a {key!r} setting")


def _keyword_names(factory: Callable[..., Any]) -> set[str] | None:
    """The keyword parameters of `factory`; None when it takes any (**kwargs) or cannot be told."""
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    return {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def _wrap(run: Callable[..., Any], source: str) -> RuntimeAdapter:
    from adapters.callable import CallableAdapter

    return CallableAdapter(run, source=source)


def _label(agent: str, target: str) -> str:
    return f"agent {agent!r}" if agent == target else f"agent {agent!r} ({target})"


def _kind(obj: Any) -> str:
    return f"{obj!r} ({type(obj).__name__})" if isinstance(obj, int | float | str | None) else type(obj).__name__


# --- the built-in factories that need a setting ----------------------------------------------


def scripted_agent(script: str | None = None) -> RuntimeAdapter:
    """The scripted agent; without a scenario file it echoes every prompt."""
    from adapters.scripted import ScriptedAdapter

    return ScriptedAdapter(script)


def python_agent(script: str | None = None) -> RuntimeAdapter:
    """A plain `run(prompt, session)` function named by `--script module:function`."""
    if script is None:
        raise ValueError(
            "the python agent needs --script module:function, naming a def run(prompt, session) -> str | Iterator[str]"
        )
    run = load_object(script, agent="python")
    if not is_run_function(run):
        raise ValueError(f"agent 'python': {script} is not a run(prompt, session) function")
    return _wrap(run, script)
