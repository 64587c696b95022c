"""`acp-server doctor`: every registered agent's health in a table, then the settings in effect
for the selected agent and where each came from (flag, environment, config file, default).

Each agent is loaded and checked in its own daemon thread, so a check that hangs shows as
"timed out" instead of holding the command. The selected agent, when it is an ACP agent below
(claude, codex, ...), is started until it answers `initialize`, within the runtime's own
deadline: a program that is there but will not run (npx offline) says why and how to install it.
The other ACP agents are only looked for ("found"): starting them could fetch packages or make
their homes. The exit status is 1 only when the agent the current settings select is unhealthy.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from acp_server.cli.settings import SERVER_OPTIONS, add_server_options, agent_settings, env_name
from adapters.base import Health, RuntimeAdapter, health_of
from adapters.frozen import frozen
from adapters.printable import printable
from adapters.registry import agent_specs, create_adapter

HEALTH_BUDGET = 2.0  # seconds each health() may take
# The agent the user asked about gets longer: its configuration import is CPU-bound (tenths of
# a second idle, seconds on a busy machine), and a slow answer is more use than "timed out".
SELECTED_BUDGET = 10.0
LOAD_BUDGET = 5.0  # seconds importing and building an agent may take
EXIT_UNHEALTHY = 1


@frozen
class Row:
    name: str
    status: str  # ok, unhealthy, unavailable (could not be built), timed out
    detail: str
    health: Health | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class Check:
    """Builds one agent and asks its health in a daemon thread."""

    def __init__(self, name: str, settings: Mapping[str, Any], *, selected: bool = False) -> None:
        self.name = name
        self._settings = settings
        self._selected = selected
        self._loaded = threading.Event()
        self._checked = threading.Event()
        self._check_started = 0.0
        self._budget = HEALTH_BUDGET
        self._row: Row | None = None
        threading.Thread(target=self._work, name=f"doctor-{name}", daemon=True).start()

    def _work(self) -> None:
        try:
            adapter = create_adapter(self.name, **self._settings)
            self._budget = _budget(adapter) if self._selected else HEALTH_BUDGET
        except Exception as exc:
            self._row = Row(self.name, "unavailable", _text(exc))
            self._checked.set()
            return
        finally:
            self._check_started = time.monotonic()
            self._loaded.set()
        try:
            health = _health(adapter) if self._selected else health_of(adapter)
            detail = " ".join(health.detail.split())
            status = "ok" if health.ok else "unhealthy"
            if health.ok and not self._selected and _started_by_doctor(adapter):
                status, detail = "found", f"{detail}; not started here (doctor --agent {self.name} starts it)"
            self._row = Row(self.name, status, detail, health)
        except Exception as exc:
            self._row = Row(self.name, "unhealthy", f"health() raised {_text(exc)}")
        finally:
            self._checked.set()

    def row(self, loading_deadline: float) -> Row:
        if not self._loaded.wait(max(0.0, loading_deadline - time.monotonic())):
            return Row(self.name, "timed out", f"loading took over {LOAD_BUDGET:g} s")
        if not self._checked.wait(max(0.0, self._check_started + self._budget - time.monotonic())):
            return Row(self.name, "timed out", f"health() did not answer within {self._budget:g} s")
        assert self._row is not None
        return self._row


def _budget(adapter: object) -> float:
    """The time the selected agent's check gets: an ACP agent below is started, with its own start
    deadline."""
    from acp_server.downstream.runtime import START_CHECK, AcpRuntime

    return START_CHECK + HEALTH_BUDGET if isinstance(adapter, AcpRuntime) else SELECTED_BUDGET


def _started_by_doctor(adapter: object) -> bool:
    from acp_server.downstream.runtime import AcpRuntime

    return isinstance(adapter, AcpRuntime)


def _health(adapter: RuntimeAdapter) -> Health:
    """health(), or for an ACP agent below, its start: a program that is there may not run."""
    from acp_server.downstream.runtime import AcpRuntime

    return adapter.start_check() if isinstance(adapter, AcpRuntime) else health_of(adapter)


def check_agents(selected: str, settings: Mapping[str, Any]) -> list[Row]:
    """One row per registered agent (plus the selected one when it is a module:factory path)."""
    names = [spec.name for spec in agent_specs()]
    if selected not in names:
        names.append(selected)
    checks = [Check(name, settings, selected=True) if name == selected else Check(name, {}) for name in names]
    deadline = time.monotonic() + LOAD_BUDGET
    return [check.row(deadline) for check in checks]


def option_sources(argv: Sequence[str], environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Where each server option's value came from: a flag (before or after `doctor`), an
    ACP_SERVER_* variable, or the default."""
    parser = argparse.ArgumentParser(add_help=False)
    add_server_options(parser, defaults=False)
    commands = parser.add_subparsers(dest="command")
    add_server_options(commands.add_parser("doctor", add_help=False), defaults=False)
    given, _ = parser.parse_known_args(list(argv))
    sources: dict[str, str] = {}
    for flag, _spec in SERVER_OPTIONS:
        dest, env = flag.lstrip("-").replace("-", "_"), env_name(flag)
        if hasattr(given, dest):
            sources[dest] = f"flag {flag}"
        elif env in environ:
            sources[dest] = f"environment {env}"
        else:
            sources[dest] = "default"
    return sources


def settings_in_effect(args: argparse.Namespace, argv: Sequence[str], row: Row) -> list[tuple[str, str, str]]:
    sources = option_sources(argv)
    table: list[tuple[str, str, str]] = []
    for flag, _spec in SERVER_OPTIONS:
        dest = flag.lstrip("-").replace("-", "_")
        table.append((flag.lstrip("-"), _shown(dest, getattr(args, dest, None)), sources[dest]))
    if row.health is not None:
        table += [(f"{row.name}: {key}", value, source) for key, (value, source) in row.health.settings.items()]
    return table


def run_doctor(args: argparse.Namespace, argv: Sequence[str]) -> int:
    rows = check_agents(args.agent, agent_settings(args))
    selected = next(row for row in rows if row.name == args.agent)
    print(
        f"Agents (health checks get {HEALTH_BUDGET:g} s each, the selected one {SELECTED_BUDGET:g} s;"
        " a selected ACP agent is started; > marks it)"
    )
    print(
        _table(
            ("AGENT", "STATUS", "DETAIL"),
            [(r.name, r.status, r.detail) for r in rows],
            marks=[r.name == args.agent for r in rows],
        )
    )
    print()
    print(f"Settings in effect for {args.agent}")
    print(_table(("SETTING", "VALUE", "FROM"), settings_in_effect(args, argv, selected)))
    print()
    if selected.ok:
        print(f"The selected agent {args.agent!r} is healthy.")
        return 0
    print(f"The selected agent {args.agent!r} is {selected.status}: {printable(selected.detail, one_line=True)}")
    return EXIT_UNHEALTHY


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]], marks: Sequence[bool] = ()) -> str:
    # An agent's health detail may quote what the agent wrote: each cell printable on one line.
    rows = [tuple(printable(cell, one_line=True) for cell in row) for row in rows]
    widths = [max(len(line[i]) for line in (header, *rows)) for i in range(len(header) - 1)]

    def line(cells: tuple[str, ...], mark: bool = False) -> str:
        padded = [cell.ljust(width) for cell, width in zip(cells, widths, strict=False)]
        return ("> " if mark else "  ") + "  ".join([*padded, cells[-1]]).rstrip()

    marked = list(marks) or [False] * len(rows)
    return "\n".join([line(header), *(line(row, mark) for row, mark in zip(rows, marked, strict=True))])


def _shown(dest: str, value: Any) -> str:
    if value is None and dest == "db":
        from journal.store import default_path

        return f"{default_path()}"
    return "-" if value is None else str(value)


def _text(exc: BaseException) -> str:
    text = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())
