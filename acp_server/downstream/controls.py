"""The agent's modes, config options and commands of a session, read from what it answered
(`session/new`, `session/load`, `session/resume`, `session/set_config_option`) and from its
`current_mode_update`, `config_option_update` and `available_commands_update`, into the
`SessionControls` the handlers show. Read tolerantly: what does not fit is left out. What the
editor is shown is redacted (`journal.redact`): names, descriptions and hints; an id or a value
that holds a secret is left out, since a redacted one would name nothing at the agent.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from adapters.base import ConfigChoice, ConfigOption, ModeChoice, SessionControls, SlashCommand
from journal.redact import redact_text

Json = dict[str, Any]


def from_answer(answer: Any, before: SessionControls | None = None) -> SessionControls:
    """The controls a session answer carries; parts it leaves out stay as `before` had them."""
    result = _object(answer)
    controls = before or SessionControls()
    if isinstance(result.get("modes"), dict):
        controls = with_modes(controls, cast(Json, result["modes"]))
    if isinstance(result.get("configOptions"), list):
        controls = replace(controls, config_options=options(result["configOptions"]))
    return controls


def with_modes(controls: SessionControls, state: Json) -> SessionControls:
    modes: list[ModeChoice] = []
    for item in _list(state.get("availableModes")):
        mode = _object(item)
        if (mode_id := _id(mode.get("id"))) and isinstance(mode.get("name"), str):
            modes.append(ModeChoice(mode_id, redact_text(mode["name"]), _text(mode.get("description"))))
    return replace(controls, modes=tuple(modes), current_mode=_id(state.get("currentModeId")))


def updated(controls: SessionControls, update: Json) -> SessionControls:
    """The controls after one of the agent's session updates."""
    kind = update.get("sessionUpdate")
    if kind == "current_mode_update" and _id(update.get("currentModeId")):
        return replace(controls, current_mode=update["currentModeId"])
    if kind == "config_option_update" and isinstance(update.get("configOptions"), list):
        return replace(controls, config_options=options(update["configOptions"]))
    if kind == "available_commands_update" and isinstance(update.get("availableCommands"), list):
        return replace(controls, commands=commands(update["availableCommands"]))
    return controls


def options(value: Any) -> tuple[ConfigOption, ...]:
    """Select options (flat or grouped choices) with a current value among their choices, and
    boolean ones (kept as "true" or "false"; shown only to an editor that opted in)."""
    found: list[ConfigOption] = []
    for item in _list(value):
        option = _object(item)
        identifier, name, current = option.get("id"), option.get("name"), option.get("currentValue")
        identifier = _id(identifier)
        if identifier is None or not isinstance(name, str):
            continue
        if option.get("type") == "boolean":
            if isinstance(current, bool):
                found.append(_boolean(identifier, name, current, option))
            continue
        if option.get("type", "select") != "select":
            continue
        choices = _choices(option.get("options"))
        if not isinstance(current, str) or current not in {c.value for c in choices}:
            continue
        category = option.get("category")
        found.append(
            ConfigOption(
                identifier,
                redact_text(name),
                choices,
                current,
                _text(option.get("description")),
                category if isinstance(category, str) else None,
            )
        )
    return tuple(found)


def _boolean(identifier: str, name: str, current: bool, option: Json) -> ConfigOption:
    category = option.get("category")
    return ConfigOption(
        identifier,
        redact_text(name),
        (),
        "true" if current else "false",
        _text(option.get("description")),
        category if isinstance(category, str) else None,
        kind="boolean",
    )


def set_params(controls: SessionControls, option_id: str, value: str) -> Json:
    """`session/set_config_option`'s params for a value of ours: a boolean option's as a boolean."""
    option = next((o for o in controls.config_options if o.id == option_id), None)
    if option is not None and option.kind == "boolean":
        return {"configId": option_id, "type": "boolean", "value": value == "true"}
    return {"configId": option_id, "value": value}


def commands(value: Any) -> tuple[SlashCommand, ...]:
    found: list[SlashCommand] = []
    for item in _list(value):
        command = _object(item)
        name, description = command.get("name"), command.get("description")
        name = _id(name)
        if name is None or any(c.isspace() or c == "/" for c in name):
            continue
        hint = _text(_object(command.get("input")).get("hint"))
        found.append(SlashCommand(name, redact_text(description) if isinstance(description, str) else "", hint))
    return tuple(found)


def _choices(value: Any) -> tuple[ConfigChoice, ...]:
    found: list[ConfigChoice] = []
    for item in _list(value):
        choice = _object(item)
        if isinstance(choice.get("group"), str):  # a group: its own choices, in place
            found.extend(_choices(choice.get("options")))
        elif (value := _id(choice.get("value"))) and isinstance(choice.get("name"), str):
            found.append(ConfigChoice(value, redact_text(choice["name"]), _text(choice.get("description"))))
    return tuple(found)


def _text(value: Any) -> str | None:
    return redact_text(value) if isinstance(value, str) and value else None


def _id(value: Any) -> str | None:
    """An id or value the editor may be shown and send back: a string holding no secret."""
    return value if isinstance(value, str) and value and redact_text(value) == value else None


def _object(value: Any) -> Json:
    return cast(Json, value) if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return cast(list[Any], value) if isinstance(value, list) else []
