"""`acp-server doctor` for Hermes without importing Hermes (its modules cost seconds of CPU):
reads `HERMES_HOME`'s `config.yaml` and `.env` itself (PyYAML, python-dotenv: Hermes' own
dependencies) and asks the configured endpoint `GET /models` with the standard library. The
provider resolution here is a summary of Hermes' own; the first turn runs the real one.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import yaml
from dotenv import dotenv_values

from adapters.base import Health

TIMEOUT = 1.0  # seconds for the endpoint; doctor gives health() two
# Providers whose endpoint is fixed, and the key Hermes sends them (others: Hermes resolves them).
ENDPOINTS: Mapping[str, tuple[str, str]] = {
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "nous": ("https://inference-api.nousresearch.com/v1", "NOUS_API_KEY"),
    "openai": ("https://api.openai.com/v1", "OPENAI_API_KEY"),
}


def home() -> Path:
    """HERMES_HOME as Hermes finds it (its `hermes_constants.get_hermes_home`, minus profiles)."""
    configured = os.environ.get("HERMES_HOME", "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".hermes"


def health(model_override: str | None = None) -> Health:
    root = home()
    try:
        config = _config(root / "config.yaml")
    except (OSError, yaml.YAMLError) as exc:
        return Health(False, f"cannot read {root / 'config.yaml'}: {exc}", {"HERMES_HOME": (str(root), _home_source())})
    dotenv = {k: v for k, v in dotenv_values(root / ".env").items() if v is not None}
    env = {**os.environ, **dotenv}  # HERMES_HOME/.env wins over the shell, as in Hermes
    raw: Any = config.get("model")
    fields = cast(dict[str, Any], raw) if isinstance(raw, dict) else {}
    model = model_override or str(fields.get("default") or fields.get("name") or (raw if isinstance(raw, str) else ""))
    provider = str(fields.get("provider") or env.get("HERMES_INFERENCE_PROVIDER") or "auto").strip().lower()
    base_url, key_name = _endpoint(provider, fields)
    key = str(fields.get("api_key") or "") or (env.get(key_name, "") if key_name else "")
    key_source = "config.yaml model.api_key" if fields.get("api_key") else key_name or "-"
    shown = {
        "HERMES_HOME": (str(root), _home_source()),
        "config": (str(root / "config.yaml") if config else "(no config.yaml)", "HERMES_HOME"),
        "provider": (provider, "config.yaml model.provider" if fields.get("provider") else "default"),
        "model": (model or "(none)", "--model" if model_override else "config.yaml model.default"),
        "endpoint": (base_url or "(resolved by Hermes at the first turn)", "config.yaml model.base_url"),
        "api key": ("set" if key else "not set", key_source),
    }
    if not model:
        return Health(False, f"no model in {root}/config.yaml (model.default); run `hermes model`", shown)
    if not base_url:
        return Health(True, f"provider {provider}, model {model} (its endpoint is not checked here)", shown)
    return Health(*_probe(base_url, key, model, bool(fields.get("context_length"))), shown)


def _config(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    loaded: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    return cast(dict[str, Any], loaded) if isinstance(loaded, dict) else {}


def _endpoint(provider: str, fields: Mapping[str, Any]) -> tuple[str | None, str | None]:
    base_url = fields.get("base_url")
    fixed = ENDPOINTS.get(provider)
    if isinstance(base_url, str) and base_url.strip():
        return base_url.strip(), fixed[1] if fixed else None
    return (fixed[0], fixed[1]) if fixed else (None, None)


def _home_source() -> str:
    return "environment HERMES_HOME" if os.environ.get("HERMES_HOME", "").strip() else "default ~/.hermes"


def _probe(base_url: str, key: str, model: str, sized: bool) -> tuple[bool, str]:
    if not base_url.startswith(("http://", "https://")):
        return False, f"endpoint {base_url!r} is not an http(s) URL"
    request = urllib.request.Request(base_url.rstrip("/") + "/models")  # noqa: S310 - http(s), checked above
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:  # noqa: S310
            status = answer.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (OSError, ValueError) as exc:
        return False, f"{base_url} does not answer: {getattr(exc, 'reason', exc)}"
    if status in (401, 403):
        return False, f"{base_url} refused the API key (HTTP {status})"
    note = "" if sized else "; set model.context_length to skip Hermes' context-length probes"
    return True, f"{base_url} answered (HTTP {status}); model {model}{note}"
