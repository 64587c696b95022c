"""A throw-away HERMES_HOME whose config.yaml points Hermes at the fake model on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

CONFIG = """\
model:
  default: gpt-4o
  provider: custom
  base_url: {base_url}
  context_length: 128000
agent:
  environment_probe: false
auxiliary:
  title_generation:
    enabled: {titles}
"""


def make_home(root: Path, base_url: str, *, titles: bool = False) -> Path:
    """`titles`: Hermes names sessions with an extra model request after the first exchange
    (its default); off unless a test is about it, so scripted answers meet the requests they
    were written for."""
    home = root / "hermes-home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(CONFIG.format(base_url=base_url, titles="true" if titles else "false"))
    (home / ".env").write_text("OPENAI_API_KEY=sk-test-0000000000\n")
    return home
