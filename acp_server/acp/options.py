"""Session modes and config options as ACP shows them, and validation of changes to them.

The mode is the server's own permission mode, offered both as ACP modes and as a `mode`
config option (the protocol is moving from the first to the second; both stay in sync). Every
other option is one the adapter declared; values are checked against its choices, except
`haui`, the server's own switch for drawing HAUI reply blocks (default: `--haui`).

An adapter may offer a session controls of its own (`SessionControls`: an ACP agent below
us, with its modes and options). Then ACP modes are the agent's, and the server's permission
mode stays the `mode` option, named "Permissions" in a category of its own (`_permissions`)
so that editors put the agent's modes in their mode selector; the agent's options follow ours,
an id the server uses itself (`mode`, `haui`) shown as `agent-<id>`. An agent's boolean option
is shown only to a client that opted in (`session.configOptions.boolean`), left out for others.
"""

from __future__ import annotations

from typing import Any

from acp_server.protocol.results import SessionConfigChoice, SessionConfigOption, SessionMode, SessionModeState
from acp_server.rpc.errors import FieldProblem, RpcError, invalid_params
from acp_server.turns.policy import DEFAULT_MODE, MODE_IDS, MODES
from acp_server.turns.rich import HAUI_OPTION, HAUI_VALUES, haui_on
from adapters.base import AdapterCapabilities, ConfigOption, SessionControls

MODE_OPTION = "mode"
OWN_OPTIONS = frozenset({MODE_OPTION, HAUI_OPTION})
AGENT_PREFIX = "agent-"


def modes_state(current: str | None, controls: SessionControls | None = None) -> SessionModeState:
    if controls is not None and controls.modes:
        return SessionModeState(
            current_mode_id=controls.current_mode or controls.modes[0].id,
            available_modes=[SessionMode(id=m.id, name=m.name, description=m.description) for m in controls.modes],
        )
    return SessionModeState(
        current_mode_id=current or DEFAULT_MODE,
        available_modes=[SessionMode(id=m.id, name=m.name, description=m.description) for m in MODES],
    )


def agent_modes(controls: SessionControls | None) -> bool:
    """Whether ACP modes are the agent's (it offers some of its own)."""
    return controls is not None and bool(controls.modes)


def shown_id(option_id: str) -> str:
    """The id under which the editor sees an agent's option."""
    return AGENT_PREFIX + option_id if option_id in OWN_OPTIONS else option_id


def agent_option(controls: SessionControls | None, config_id: str) -> ConfigOption | None:
    """The agent's own option the editor calls `config_id`, if it is one."""
    if controls is None:
        return None
    return next((o for o in controls.config_options if shown_id(o.id) == config_id), None)


def _select(option: ConfigOption, current: str, *, shown: str | None = None) -> SessionConfigOption:
    if option.kind == "boolean":
        return SessionConfigOption(
            id=shown or option.id,
            name=option.name,
            category=option.category or None,
            description=option.description or None,
            current_value=current == "true",
            options=None,
            type="boolean",
        )
    choices = [
        SessionConfigChoice(value=c.value, name=c.name, description=c.description or None) for c in option.choices
    ]
    return SessionConfigOption(
        id=shown or option.id,
        name=option.name,
        category=option.category or None,
        description=option.description or None,
        current_value=current,
        options=choices,
    )


def haui_option(values: dict[str, Any], *, default: bool) -> SessionConfigOption:
    return SessionConfigOption(
        id=HAUI_OPTION,
        name="Rich replies",
        description="Draw the agent's HAUI blocks (stats, tables, charts) as Markdown; off shows them as written.",
        current_value="on" if haui_on(values, default) else "off",
        options=[
            SessionConfigChoice(value="on", name="On", description="Blocks drawn as tables, lists and quotes"),
            SessionConfigChoice(value="off", name="Off", description="Fences passed through untouched"),
        ],
    )


def config_options(
    caps: AdapterCapabilities,
    mode: str | None,
    values: dict[str, Any],
    *,
    haui: bool = True,
    controls: SessionControls | None = None,
    boolean: bool = False,
) -> list[SessionConfigOption]:
    """The complete list, in the order clients should show it: the mode first, `haui` last."""
    theirs = agent_modes(controls)
    described = SessionConfigOption(
        id=MODE_OPTION,
        name="Permissions" if theirs else "Mode",
        category="_permissions" if theirs else "mode",
        description="How cautious the agent is: what it may do without asking.",
        current_value=mode or DEFAULT_MODE,
        options=[SessionConfigChoice(value=m.id, name=m.name, description=m.description) for m in MODES],
    )
    adapters = [_select(o, str(values.get(o.id, o.default))) for o in caps.config_options if o.id not in OWN_OPTIONS]
    shown = [o for o in controls.config_options if boolean or o.kind != "boolean"] if controls else []
    agents = [_select(o, o.default, shown=shown_id(o.id)) for o in shown]
    return [described, *adapters, *agents, haui_option(values, default=haui)]


def effective_config(caps: AdapterCapabilities, values: dict[str, Any]) -> dict[str, Any]:
    """Every declared option with its value (the default until the user picks one)."""
    return {o.id: values.get(o.id, o.default) for o in caps.config_options}


def check_mode(mode_id: str, controls: SessionControls | None = None) -> str:
    ids = {m.id for m in controls.modes} if controls is not None and controls.modes else MODE_IDS
    if mode_id not in ids:
        raise _invalid("modeId", f"must be one of {', '.join(sorted(ids))}")
    return mode_id


def check_value(caps: AdapterCapabilities, config_id: str, value: Any, controls: SessionControls | None = None) -> str:
    """The validated value for `config_id`, or -32602 naming what is wrong. An agent's boolean
    option takes a boolean, kept as "true" or "false"."""
    theirs = agent_option(controls, config_id)
    if theirs is not None and theirs.kind == "boolean":
        if not isinstance(value, bool):
            raise _invalid("value", f"must be a boolean ({config_id} is on or off)")
        return "true" if value else "false"
    if not isinstance(value, str):
        raise _invalid("value", "must be one of the option's value ids (a string)")
    if theirs is not None:
        if value not in {c.value for c in theirs.choices}:
            raise _invalid("value", f"is not one of the choices of {config_id}")
        return value
    if config_id == MODE_OPTION:
        if value not in MODE_IDS:
            raise _invalid("value", f"must be one of {', '.join(sorted(MODE_IDS))}")
        return value
    if config_id == HAUI_OPTION:
        if value not in HAUI_VALUES:
            raise _invalid("value", "must be on or off")
        return value
    option = next((o for o in caps.config_options if o.id == config_id), None)
    if option is None:
        raise _invalid("configId", "is not an option of this agent")
    if value not in {c.value for c in option.choices}:
        raise _invalid("value", f"is not one of the choices of {config_id}")
    return value


def _invalid(field: str, problem: str) -> RpcError:
    return invalid_params(FieldProblem(field, problem))
