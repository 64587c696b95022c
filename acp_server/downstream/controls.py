"""The agent's modes, config options and commands of a session, read from what it answered
(`session/new`, `session/load`, `session/resume`, `session/set_config_option`) and from its
`current_mode_update`, `config_option_update` and `available_commands_update`, into the
`SessionControls` the handlers show. Read tolerantly: what does not fit is left out.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from adapters.base import ConfigChoice, ConfigOption, ModeChoice, SessionControls, SlashCommand

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
        if isinstance(mode.get("id"), str) and isinstance(mode.get("name"), str):
            modes.append(ModeChoice(mode["id"], mode["name"], _text(mode.get("description"))))
    current = state.get("currentModeId")
    return replace(controls, modes=tuple(modes), current_mode=current if isinstance(current, str) else None)


def updated(controls: SessionControls, update: Json) -> SessionControls:
    """The controls after one of the agent's session updates."""
    kind = update.get("sessionUpdate")
    if kind == "current_mode_update" and isinstance(update.get("currentModeId"), str):
        return replace(controls, current_mode=update["currentModeId"])
    if kind == "config_option_update" and isinstance(update.get("configOptions"), list):
        return replace(controls, config_options=options(update["configOptions"]))
    if kind == "available_commands_update" and isinstance(update.get("availableCommands"), list):
        return replace(controls, commands=commands(update["availableCommands"]))
    return controls


def options(value: Any) -> tuple[ConfigOption, ...]:
    """Select options (flat or grouped choices) with a current value among their choices;
    boolean options are left out, as the editor was not told they may come."""
    found: list[ConfigOption] = []
    for item in _list(value):
        option = _object(item)
        identifier, name, current = option.get("id"), option.get("name"), option.get("currentValue")
        if option.get("type", "select") != "select" or not isinstance(identifier, str) or not isinstance(name, str):
            continue
        choices = _choices(option.get("options"))
        if not isinstance(current, str) or current not in {c.value for c in choices}:
            continue
        category = option.get("category")
        found.append(
            ConfigOption(
                identifier,
                name,
                choices,
                current,
                _text(option.get("description")),
                category if isinstance(category, str) else None,
            )
        )
    return tuple(found)


def commands(value: Any) -> tuple[SlashCommand, ...]:
    found: list[SlashCommand] = []
    for item in _list(value):
        command = _object(item)
        name, description = command.get("name"), command.get("description")
        if not isinstance(name, str) or not name or any(c.isspace() or c == "/" for c in name):
            continue
        hint = _text(_object(command.get("input")).get("hint"))
        found.append(SlashCommand(name, description if isinstance(description, str) else "", hint))
    return tuple(found)


def _choices(value: Any) -> tuple[ConfigChoice, ...]:
    found: list[ConfigChoice] = []
    for item in _list(value):
        choice = _object(item)
        if isinstance(choice.get("group"), str):  # a group: its own choices, in place
            found.extend(_choices(choice.get("options")))
        elif isinstance(choice.get("value"), str) and isinstance(choice.get("name"), str):
            found.append(ConfigChoice(choice["value"], choice["name"], _text(choice.get("description"))))
    return tuple(found)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _object(value: Any) -> Json:
    return cast(Json, value) if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return cast(list[Any], value) if isinstance(value, list) else []
