"""What the agent knows about models: context windows and the endpoint's model list.

The list comes from GET /models (≤2 s), is cached, and feeds the `model` config option;
a failed listing is cached for a minute so capabilities and health stay quick. Context
windows come from the config file, the listing's own metadata, or a small table.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from adapters.base import AgentError, ConfigChoice, ConfigOption
from adapters.haui_contract import response_style_option
from adapters.openai.client import Endpoint
from adapters.openai.jsonvalues import is_array, is_object

FAILED_LISTING_TTL = 60.0
EFFORTS = ("default", "low", "medium", "high")

# Longest prefix wins; OpenRouter-style "vendor/model" names are matched on the model part.
KNOWN_WINDOWS: dict[str, int] = {
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-turbo": 128_000,
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "deepseek-chat": 128_000,
    "deepseek-reasoner": 128_000,
}
_WINDOW_KEYS = ("context_length", "context_window", "max_model_len", "max_context_length")


def known_window(model: str | None) -> int | None:
    """The context window of a well-known model, by longest matching name prefix."""
    if not model:
        return None
    name = model.rsplit("/", 1)[-1].lower()
    matches = [prefix for prefix in KNOWN_WINDOWS if name.startswith(prefix)]
    return KNOWN_WINDOWS[max(matches, key=len)] if matches else None


def listed_window(entry: dict[str, Any]) -> int | None:
    """The window a /models entry states itself (OpenRouter, vLLM, LM Studio do)."""
    for key in _WINDOW_KEYS:
        value = entry.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def listed_vision(entry: dict[str, Any]) -> bool:
    """A /models entry that says it takes images: `vision: true`, `capabilities.vision`, or
    `image` among its (`architecture.`)`input_modalities`."""
    capabilities, architecture = entry.get("capabilities"), entry.get("architecture")
    modalities = entry.get("input_modalities")
    if modalities is None and is_object(architecture):
        modalities = architecture.get("input_modalities")
    return (
        entry.get("vision") is True
        or (is_object(capabilities) and capabilities.get("vision") is True)
        or (is_array(capabilities) and "vision" in capabilities)
        or (is_array(modalities) and "image" in modalities)
    )


class ModelCatalog:
    """The endpoint's models, fetched at most once (or once a minute while it fails)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        self._lock = threading.Lock()
        self._entries: list[dict[str, Any]] | None = None
        self._failed_at: float | None = None
        self.error: str | None = None

    def entries(self) -> list[dict[str, Any]] | None:
        """The listed models, or None when the endpoint did not answer (see `error`)."""
        with self._lock:
            if self._entries is not None:
                return self._entries
            if self._failed_at is not None and time.monotonic() - self._failed_at < FAILED_LISTING_TTL:
                return None
            try:
                self._entries = self._endpoint.list_models()
            except AgentError as exc:
                self._failed_at, self.error = time.monotonic(), str(exc)
                return None
            return self._entries

    def ids(self) -> list[str]:
        return [entry["id"] for entry in self.entries() or []]

    def vision(self, model: str | None) -> bool:
        """Whether the listing says `model` accepts images (metadata of vLLM, LM Studio, OpenRouter)."""
        return any(entry["id"] == model and listed_vision(entry) for entry in self._entries or [])

    def window(self, model: str | None) -> int | None:
        """The window the listing states for `model`, else the table's."""
        for entry in self._entries or []:
            if entry["id"] == model and (window := listed_window(entry)) is not None:
                return window
        return known_window(model)


def config_options(default_model: str | None, listed: list[str]) -> tuple[ConfigOption, ...]:
    """The `model` option (when any model is known), `reasoning_effort` and `response_style`."""
    options: list[ConfigOption] = []
    names = list(dict.fromkeys([default_model, *listed] if default_model else listed))
    if default_model:
        options.append(
            ConfigOption(
                id="model",
                name="Model",
                category="model",
                default=default_model,
                choices=tuple(ConfigChoice(name, name) for name in names),
                description="The model the endpoint runs for this session",
            )
        )
    options.append(
        ConfigOption(
            id="reasoning_effort",
            name="Reasoning effort",
            category="thought_level",
            default="default",
            choices=tuple(ConfigChoice(e, e.capitalize() if e != "default" else "Model default") for e in EFFORTS),
            description="How long a reasoning model thinks before answering",
        )
    )
    options.append(response_style_option())
    return tuple(options)
