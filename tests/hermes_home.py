"""A throw-away HERMES_HOME whose config.yaml points Hermes at the fake model on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI

CONFIG = """\
model:
  default: gpt-4o
  provider: custom
  base_url: {base_url}
  context_length: 128000
{model_extra}agent:
  environment_probe: false
auxiliary:
  title_generation:
    enabled: {titles}
{extra}"""
# What `hermes acp` needs besides (tests of Hermes behind acp-server as an ACP agent): the key in
# the config itself, and no Tirith scanner (a binary it would fetch from the network).
ACP_MODEL = "  api_key: sk-test-0000000000\n"
ACP_EXTRA = "security:\n  tirith_enabled: false\n"


def make_home(root: Path, base_url: str, *, titles: bool = False, acp: bool = False) -> Path:
    """`titles`: Hermes names sessions with an extra model request after the first exchange
    (its default); off unless a test is about it, so scripted answers meet the requests they
    were written for. `acp`: the settings `hermes acp` needs too."""
    home = root / "hermes-home"
    home.mkdir(parents=True, exist_ok=True)
    config = CONFIG.format(
        base_url=base_url,
        titles="true" if titles else "false",
        model_extra=ACP_MODEL if acp else "",
        extra=ACP_EXTRA if acp else "",
    )
    (home / "config.yaml").write_text(config)
    (home / ".env").write_text("OPENAI_API_KEY=sk-test-0000000000\n")
    return home


@contextmanager
def hermes_model(root: Path, monkeypatch: pytest.MonkeyPatch, *, titles: bool = False) -> Iterator[FakeOpenAI]:
    """The fake model on 127.0.0.1, and HERMES_HOME set to a throw-away home pointing at it."""
    with FakeOpenAI() as server:
        monkeypatch.setenv("HERMES_HOME", str(make_home(root, server.base_url, titles=titles)))
        yield server
