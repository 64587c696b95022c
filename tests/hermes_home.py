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
"""


def make_home(root: Path, base_url: str) -> Path:
    home = root / "hermes-home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(CONFIG.format(base_url=base_url))
    (home / ".env").write_text("OPENAI_API_KEY=sk-test-0000000000\n")
    return home
