"""Hermes' own configuration, found exactly as `hermes acp` finds it: `HERMES_HOME` (default
`~/.hermes`), its `.env` and `config.yaml`, and Hermes' runtime-provider resolution. Builds the
keyword arguments of one `AIAgent`. Imports Hermes lazily (seconds); `health.py` does not.
"""

from __future__ import annotations

import importlib
import logging
import threading
from dataclasses import field
from pathlib import Path
from typing import Any

from adapters.frozen import frozen

log = logging.getLogger(__name__)

BASE_TOOLSETS = ("hermes-acp", "clarify")  # hermes acp's tool surface, plus clarify (we can ask)
_env_lock = threading.Lock()
_env_loaded: set[str] = set()
_recall: dict[str, Any] = {}  # HERMES_HOME -> a read-only SessionDB, or None without a state.db


@frozen
class Runtime:
    """What one AIAgent is built with; `api_key` never leaves this object except into Hermes."""

    home: str
    model: str
    provider: str | None
    api_mode: str | None
    base_url: str | None
    api_key: str | None = field(repr=False)
    command: str | None
    args: tuple[str, ...]
    context_length: int | None  # config.yaml's model.context_length, which Hermes takes over any probe
    config_mcp: tuple[str, ...]  # MCP servers named in config.yaml (`mcp.configured` loads the enabled ones)
    source: str
    requested: str = "auto"  # the provider config.yaml asked for (model.provider), or "auto"


def hermes(module: str) -> Any:
    """A Hermes module, typed as Any: Hermes ships no type information."""
    return importlib.import_module(module)


def load_environment() -> str:
    """Load HERMES_HOME/.env once per home (process-wide, as `hermes acp` does); returns the home."""
    home = str(hermes("hermes_constants").get_hermes_home())
    with _env_lock:
        if home not in _env_loaded:
            loaded = hermes("hermes_cli.env_loader").load_hermes_dotenv(hermes_home=home)
            log.info("Hermes home %s; loaded %s", home, [str(p) for p in loaded] or "no .env")
            _env_loaded.add(home)
    return home


def resolve(model_override: str | None = None) -> Runtime:
    """Config plus provider resolution; raises ValueError with Hermes' reason when it fails."""
    home = load_environment()
    config: dict[str, Any] = hermes("hermes_cli.config").load_config() or {}
    model_cfg = config.get("model")
    model, provider, context_length = "", None, None
    if isinstance(model_cfg, dict):
        model = str(model_cfg.get("default") or model_cfg.get("name") or "")  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        provider = model_cfg.get("provider")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        raw = model_cfg.get("context_length")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        context_length = raw if isinstance(raw, int) and raw > 0 else None
    elif isinstance(model_cfg, str):
        model = model_cfg.strip()
    try:
        runtime: dict[str, Any] = hermes("hermes_cli.runtime_provider").resolve_runtime_provider(
            requested=provider if isinstance(provider, str) else None
        )
    except Exception as exc:
        raise ValueError(f"Hermes could not resolve its provider: {exc}") from exc
    servers: dict[str, Any] = config.get("mcp_servers") or {}
    return Runtime(
        home=home,
        model=model_override or model,
        provider=runtime.get("provider"),
        api_mode=runtime.get("api_mode"),
        base_url=runtime.get("base_url"),
        api_key=runtime.get("api_key"),
        command=runtime.get("command"),
        args=tuple(runtime.get("args") or ()),
        context_length=context_length,
        config_mcp=tuple(servers),
        source=str(runtime.get("source") or "config"),
        requested=str(runtime.get("requested_provider") or (provider if isinstance(provider, str) else "") or "auto"),
    )


def agent_kwargs(runtime: Runtime, *, session_id: str, mcp_names: tuple[str, ...]) -> dict[str, Any]:
    """AIAgent's constructor arguments: quiet, no tool delay, our toolsets, no session store."""
    toolsets = [*BASE_TOOLSETS, *(f"mcp-{name}" for name in mcp_names)]
    return {
        "platform": "acp",
        "model": runtime.model,
        "provider": runtime.provider,
        "api_mode": runtime.api_mode,
        "base_url": runtime.base_url,
        "api_key": runtime.api_key,
        "command": runtime.command,
        "args": list(runtime.args),
        "enabled_toolsets": list(dict.fromkeys(toolsets)),
        "quiet_mode": True,
        "tool_progress_mode": "off",
        "tool_delay": 0.0,
        "session_id": session_id,
        "session_db": None,  # our journal keeps the conversation; see `detach_state_db`
    }


def detach_state_db(agent: Any, home: str) -> None:
    """Hermes writes no acp-server session into HERMES_HOME/state.db: `_persist_disabled` is
    Hermes' own hard stop for every state.db write and lazy open (its review forks use it).
    `session_search` still reads the user's other Hermes sessions, read-only."""
    agent._persist_disabled = True
    agent._get_session_db_for_recall = lambda: _recall_db(home)


def _recall_db(home: str) -> Any:
    path = Path(home) / "state.db"
    with _env_lock:
        if home not in _recall:
            _recall[home] = hermes("hermes_state").SessionDB(db_path=path, read_only=True) if path.exists() else None
        return _recall[home]
