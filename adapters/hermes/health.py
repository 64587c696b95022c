"""`acp-server doctor` for Hermes: the provider resolved exactly as the adapter resolves it
(`setup.resolve`: HERMES_HOME's `.env` and `config.yaml`, Hermes' own `resolve_runtime_provider`),
then followed as Hermes' `AIAgent` follows it: an endpoint with a key makes its client, else
Hermes' provider router must find credentials (else every prompt fails "No LLM provider
configured"). The endpoint is asked `GET /models` (standard library), and the model's context
window is held against Hermes' 64K minimum. Only Hermes' configuration modules are imported (a
few tenths of a second), never `run_agent` (seconds); a Hermes home that does not exist is not made.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, cast

from dotenv import dotenv_values

from adapters.base import Health
from adapters.hermes import setup

TIMEOUT = 1.0  # seconds for the endpoint; doctor gives health() two (ten when hermes is selected)
OWN_CLIENT_MODES = frozenset({"anthropic_messages", "bedrock_converse"})  # clients Hermes builds its own way
PLACEHOLDER_KEY = "no-key-required"  # what Hermes sends a custom endpoint when it has no key for it
CONFIG_EXAMPLE = "model.provider: custom, model.base_url, model.api_key (docs/agents/hermes.md)"

Settings = dict[str, tuple[str, str]]


def home() -> Path:
    """HERMES_HOME as Hermes finds it (its `hermes_constants.get_hermes_home`, minus profiles)."""
    configured = os.environ.get("HERMES_HOME", "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".hermes"


def health(model_override: str | None = None) -> Health:
    root = home()
    shown: Settings = {"HERMES_HOME": (str(root), _home_source())}
    if not root.is_dir():  # Hermes would make one, with files in it: not for a check
        return Health(False, f"no Hermes home at {root}: create it with a config.yaml ({CONFIG_EXAMPLE})", shown)
    try:
        runtime = setup.resolve(model_override)
    except ValueError as exc:
        return Health(False, str(exc), shown | _config_rows(root))
    shown |= _runtime_rows(runtime, model_override)
    if not runtime.model:
        return Health(False, f"no model in {runtime.home}/config.yaml (model.default); run `hermes model`", shown)
    if runtime.api_mode in OWN_CLIENT_MODES:
        detail = f"provider {runtime.provider} ({runtime.api_mode}): Hermes checks it at the first turn"
        return Health(True, detail, shown)
    endpoint = (runtime.base_url, runtime.api_key) if runtime.base_url and runtime.api_key else _routed(runtime)
    if endpoint is None:
        return Health(False, _no_provider(runtime, root), shown)
    base_url, key = endpoint
    shown["endpoint"] = (base_url, shown["endpoint"][1] if runtime.base_url else "Hermes' provider router")
    small = _too_small(runtime.context_length, runtime.model, "model.context_length in config.yaml")
    if small:
        return Health(False, small, shown)
    ok, detail = _probe(base_url, key, runtime, shown)
    if not ok and "refused the API key" in detail:
        detail += _key_hint(root, runtime)
    return Health(ok, detail, shown)


# --- what Hermes resolved ----------------------------------------------------------------


def _config_rows(root: Path) -> Settings:
    path = root / "config.yaml"
    return {"config": (str(path) if path.exists() else "(no config.yaml)", "HERMES_HOME")}


def _runtime_rows(runtime: setup.Runtime, model_override: str | None) -> Settings:
    requested = runtime.requested if runtime.requested != "auto" else "auto (model.provider not set)"
    key = runtime.api_key or ""
    shown_key = "not set" if not key else f"none (Hermes sends {PLACEHOLDER_KEY})" if key == PLACEHOLDER_KEY else "set"
    context = runtime.context_length
    return {
        **_config_rows(Path(runtime.home)),
        "provider": (f"{runtime.provider} (asked: {requested})", "Hermes' provider resolution"),
        "model": (runtime.model or "(none)", "--model" if model_override else "config.yaml model.default"),
        "endpoint": (runtime.base_url or "(none)", f"Hermes ({runtime.source})"),
        "api key": (shown_key, f"Hermes ({runtime.source})"),
        "context length": (
            (f"{context:,}", "config.yaml model.context_length") if context else ("(probed by Hermes)", "-")
        ),
    }


def _routed(runtime: setup.Runtime) -> tuple[str, str] | None:
    """Where Hermes' AIAgent goes when the resolution gave no endpoint with a key: its provider
    router, called as the AIAgent calls it; None when it finds nothing (the AIAgent then fails)."""
    try:
        router = setup.hermes("agent.auxiliary_client")
        client, _model = router.resolve_provider_client(runtime.provider or "auto", model=runtime.model, raw_codex=True)
    except Exception:  # the router failing is the AIAgent failing, for the same reason
        return None
    if client is None:
        return None
    return str(client.base_url), str(client.api_key or "")


def _no_provider(runtime: setup.Runtime, root: Path) -> str:
    missing = "endpoint" if not runtime.base_url else "API key"
    text = (
        f"Hermes resolves provider {runtime.provider} without an {missing} and its provider router finds "
        'none: every prompt would fail with Hermes\' "No LLM provider configured"'
    )
    if runtime.requested == "auto" and runtime.base_url:
        text += f"; for an OpenAI-compatible endpoint set {CONFIG_EXAMPLE}"
    return text + _key_hint(root, runtime)


def _too_small(context: int | None, model: str, where: str) -> str | None:
    """Hermes' refusal of a model whose context window is below its minimum, before it happens."""
    minimum: int = setup.hermes("agent.model_metadata").MINIMUM_CONTEXT_LENGTH
    if context is None or context >= minimum:
        return None
    remedy = "the real value, if it is larger" if where.startswith("model.") else "the real value, if it under-reports"
    return (
        f"model {model} has a context window of {context:,} tokens ({where}), below Hermes' minimum of "
        f"{minimum:,}: Hermes refuses it at the first prompt; choose a model with at least {minimum // 1000}K, "
        f"or set model.context_length in config.yaml to {remedy}"
    )


def _key_hint(root: Path, runtime: setup.Runtime) -> str:
    """Keys in HERMES_HOME/.env that Hermes does not send here (it sends OPENAI_API_KEY only to
    api.openai.com, for example): how to hand one to the endpoint."""
    if runtime.api_key and runtime.api_key != PLACEHOLDER_KEY:
        return ""
    names = sorted(name for name in dotenv_values(root / ".env") if name.endswith("_API_KEY"))
    if not names:
        return ""
    listed = ", ".join(names)
    return (
        f"; {root / '.env'} sets {listed}, which Hermes does not send to this endpoint: name it in config.yaml "
        f"as model.api_key: ${{{names[0]}}}"
    )


def _home_source() -> str:
    return "environment HERMES_HOME" if os.environ.get("HERMES_HOME", "").strip() else "default ~/.hermes"


# --- the endpoint ---------------------------------------------------------------------------


def _probe(base_url: str, key: str, runtime: setup.Runtime, shown: Settings) -> tuple[bool, str]:
    if not base_url.startswith(("http://", "https://")):
        return False, f"endpoint {base_url!r} is not an http(s) URL"
    request = urllib.request.Request(base_url.rstrip("/") + "/models")  # noqa: S310 - http(s), checked above
    if key and key != PLACEHOLDER_KEY:
        request.add_header("Authorization", f"Bearer {key}")
    body: bytes = b""
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:  # noqa: S310
            status = answer.status
            body = answer.read(4 << 20)
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (OSError, ValueError) as exc:
        return False, f"{base_url} does not answer: {getattr(exc, 'reason', exc)}"
    if status in (401, 403):
        return False, f"{base_url} refused the API key (HTTP {status})"
    detail = f"{base_url} answered (HTTP {status}); model {runtime.model}"
    if runtime.context_length:
        return True, detail
    reported = _reported_context(body, runtime.model)
    if reported is None:
        return True, f"{detail}; set model.context_length to skip Hermes' context-length probes"
    shown["context length"] = (f"{reported:,}", "the endpoint's GET /models")
    small = _too_small(reported, runtime.model, "as the endpoint reports it")
    return (False, small) if small else (True, detail)


def _reported_context(body: bytes, model: str) -> int | None:
    """The context window the endpoint's model list gives `model`, read as Hermes reads a custom
    endpoint's list (its own `_extract_context_length`); None when it gives none."""
    try:
        listing: Any = json.loads(body)
    except ValueError:
        return None
    entries: Any = cast(dict[str, Any], listing).get("data") if isinstance(listing, dict) else None
    for entry in cast(list[Any], entries) if isinstance(entries, list) else []:
        if isinstance(entry, dict) and cast(dict[str, Any], entry).get("id") == model:
            found: Any = setup.hermes("agent.model_metadata")._extract_context_length(entry)
            return found if isinstance(found, int) else None
    return None
