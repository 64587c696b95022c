"""Settings of the openai agent: where they come from and which one wins.

Each setting is taken from the constructor (the server's flags), the environment, the
`[openai]` section of the TOML config file, or a default, in that order, and remembers its
source for `health()`. Problems (bad TOML, unknown keys, wrong types) are collected rather
than raised, so the server starts and the editor is told on the first turn.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

from adapters.configfile import ConfigFileError, read_config
from adapters.configfile import config_path as config_path  # where the file is; callers import it from here too
from adapters.frozen import frozen
from adapters.openai.jsonvalues import is_object

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MAX_TURN_REQUESTS = 25
SECTION = "openai"

ENV_NAMES = {"base_url": "OPENAI_BASE_URL", "api_key": "OPENAI_API_KEY", "model": "ACP_SERVER_MODEL"}
DEFAULTS: dict[str, Any] = {
    "base_url": DEFAULT_BASE_URL,
    "api_key": None,
    "model": None,
    "max_turn_requests": DEFAULT_MAX_TURN_REQUESTS,
    "temperature": None,
    "context_window": None,
    "vision": None,
}


@frozen
class Settings:
    """The resolved settings; `sources` names where each came from ("flag", "env NAME",
    "file PATH" or "default")."""

    base_url: str
    api_key: str | None
    model: str | None
    max_turn_requests: int
    temperature: float | None
    context_window: int | None
    config_path: str
    vision: bool | None = None  # None: ask the model list
    sources: Mapping[str, str] = field(default_factory=dict[str, str])
    problems: tuple[str, ...] = ()

    @property
    def shown_path(self) -> str:
        """The config file path as a user would type it (`~` for the home directory)."""
        return shorten_home(self.config_path)

    def display(self) -> dict[str, tuple[str, str]]:
        """Every setting as (shown value, source) for `Health.settings`; the key is masked."""
        shown: dict[str, tuple[str, str]] = {}
        for name in DEFAULTS:
            value = getattr(self, name)
            text = mask_key(value) if name == "api_key" else ("not set" if value is None else str(value))
            shown[name] = (text, self.sources.get(name, "default"))
        exists = "found" if os.path.isfile(self.config_path) else "not found"
        shown["config_file"] = (self.shown_path, exists)
        return shown


def mask_key(key: str | None) -> str:
    """`set (sk-…1234)` for a key, never the key itself; short keys show no characters."""
    if not key:
        return "not set"
    if len(key) < 12:
        return "set"
    return f"set ({key[:3]}…{key[-4:]})"


def shorten_home(path: str) -> str:
    home = str(Path.home())
    return "~" + path[len(home) :] if path == home or path.startswith(home + os.sep) else path


def load_settings(
    *,
    flags: Mapping[str, Any],
    env: Mapping[str, str],
    config_file: str | os.PathLike[str] | None = None,
) -> Settings:
    """Resolve every setting: flags (non-None values) > environment > file > default."""
    path = config_path(env, config_file)
    file_values, problems = _read_file(path)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, default in DEFAULTS.items():
        values[name], sources[name] = _pick(name, default, flags, env, file_values, path)
    problems += _check(values, sources)
    for name in problems_of(problems) & set(DEFAULTS):
        values[name], sources[name] = DEFAULTS[name], "default"
    return Settings(
        base_url=str(values["base_url"]).rstrip("/"),
        api_key=values["api_key"] or None,
        model=values["model"] or None,
        max_turn_requests=int(values["max_turn_requests"]),
        temperature=None if values["temperature"] is None else float(values["temperature"]),
        context_window=values["context_window"],
        vision=values["vision"],
        config_path=path,
        sources=sources,
        problems=tuple(problems),
    )


def problems_of(problems: list[str]) -> set[str]:
    """The setting names that some problem is about (each problem starts with the name)."""
    return {problem.split(" ", 1)[0] for problem in problems}


def _pick(
    name: str,
    default: Any,
    flags: Mapping[str, Any],
    env: Mapping[str, str],
    file_values: Mapping[str, Any],
    path: str,
) -> tuple[Any, str]:
    if flags.get(name) is not None:
        return flags[name], "flag"
    env_name = ENV_NAMES.get(name)
    if env_name and env.get(env_name):
        return env[env_name], f"env {env_name}"
    if name in file_values:
        return file_values[name], f"file {shorten_home(path)}"
    return default, "default"


def _read_file(path: str) -> tuple[dict[str, Any], list[str]]:
    """The `[openai]` table of the config file; a missing file is not a problem."""
    shown = shorten_home(path)
    try:
        raw = read_config(path)
    except ConfigFileError as exc:
        return {}, [str(exc)]
    if raw is None:
        return {}, []
    import tomllib  # only when there is a file to parse: a server without one starts sooner

    try:
        data = tomllib.loads(raw.decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return {}, [f"config file {shown} is not valid TOML: {exc}"]
    section = data.get(SECTION, {})
    if not is_object(section):  # TOML keys are str, as JSON's are
        return {}, [f"config file {shown}: [{SECTION}] must be a table"]
    unknown = sorted(set(section) - set(DEFAULTS))
    problems = [
        f"config file {shown}: unknown key {key!r} in [{SECTION}]; known keys: {', '.join(DEFAULTS)}" for key in unknown
    ]
    return {k: v for k, v in section.items() if k in DEFAULTS}, problems


def _check(values: Mapping[str, Any], sources: Mapping[str, str]) -> list[str]:
    """Type and range checks; each problem starts with the setting's name and its source."""
    problems: list[str] = []

    def bad(name: str, wanted: str) -> None:
        problems.append(f"{name} from {sources[name]} must be {wanted}, got {values[name]!r}")

    for name in ("base_url", "api_key", "model"):
        if values[name] is not None and not isinstance(values[name], str):
            bad(name, "a string")
    base = values["base_url"]
    if isinstance(base, str) and not base.startswith(("http://", "https://")):
        bad("base_url", "an http:// or https:// URL")
    turns = values["max_turn_requests"]
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
        bad("max_turn_requests", "a whole number of at least 1")
    temp = values["temperature"]
    if temp is not None and (isinstance(temp, bool) or not isinstance(temp, int | float) or not 0 <= temp <= 2):
        bad("temperature", "a number from 0 to 2")
    window = values["context_window"]
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        bad("context_window", "a whole number of tokens")
    if values["vision"] is not None and not isinstance(values["vision"], bool):
        bad("vision", "true or false")
    return problems
