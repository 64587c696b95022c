"""`acp-server doctor --agent hermes` as a user runs it: a real subprocess, a throw-away
HERMES_HOME and the fake model on 127.0.0.1. The check resolves the provider with Hermes' own
configuration modules, so it answers within doctor's budget without importing Hermes' agent.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("run_agent", reason="the hermes extra is not installed")

from fake_openai import FakeOpenAI
from hermes_home import make_home
from test_doctor import doctor, rows, settings

ROOT = Path(__file__).resolve().parent.parent


def test_doctor_reports_hermes_configuration_provider_model_and_that_the_endpoint_answers(tmp_path: Path):
    with FakeOpenAI() as fake:
        home = make_home(tmp_path, fake.base_url)
        result = doctor("--agent", "hermes", "doctor", cwd=tmp_path, HERMES_HOME=str(home))
        asked = [r.path for r in fake.requests]
    assert result.returncode == 0, result.stdout + result.stderr
    status, detail = rows(result.stdout)["> hermes"]
    assert status == "ok" and detail.startswith(f"{fake.base_url} answered (HTTP 200); model gpt-4o")
    shown = settings(result.stdout)
    assert shown["hermes: HERMES_HOME"] == (str(home), "environment HERMES_HOME")
    assert shown["hermes: provider"] == ("custom (asked: custom)", "Hermes' provider resolution")
    assert shown["hermes: model"] == ("gpt-4o", "config.yaml model.default")
    assert shown["hermes: endpoint"] == (fake.base_url, "Hermes (env/config)")
    assert asked == ["/v1/models"]
    assert "sk-test" not in result.stdout + result.stderr


def test_doctor_says_when_hermes_endpoint_does_not_answer(tmp_path: Path):
    with FakeOpenAI() as fake:
        base_url = fake.base_url
    home = make_home(tmp_path, base_url)  # the fake has stopped: nothing listens there now
    result = doctor("--agent", "hermes", "doctor", cwd=tmp_path, HERMES_HOME=str(home))
    assert result.returncode == 1
    status, detail = rows(result.stdout)["> hermes"]
    assert status == "unhealthy" and detail.startswith(f"{base_url} does not answer")


def test_doctor_says_when_hermes_has_no_model(tmp_path: Path):
    home = tmp_path / "hermes-home"
    home.mkdir()
    (home / "config.yaml").write_text("model:\n  provider: custom\n  base_url: http://127.0.0.1:9/v1\n")
    result = doctor("--agent", "hermes", "doctor", cwd=tmp_path, HERMES_HOME=str(home))
    status, detail = rows(result.stdout)["> hermes"]
    assert (result.returncode, status) == (1, "unhealthy")
    assert detail == f"no model in {home}/config.yaml (model.default); run `hermes model`"


def test_the_health_check_imports_hermes_configuration_but_not_its_agent(tmp_path: Path):
    """Importing Hermes' agent costs seconds of CPU: more than doctor's two-second budget on a busy
    machine; its configuration and provider resolution, a few tenths of a second."""
    with FakeOpenAI() as fake:
        home = make_home(tmp_path, fake.base_url)
        script = (
            "import sys; from adapters.hermes import HermesAdapter; "
            "health = HermesAdapter(warm=False).health(); "
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('run_agent', 'tools', 'model_tools')); "
            "print(health.ok, 'hermes_cli.runtime_provider' in sys.modules, heavy)"
        )
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={"HERMES_HOME": str(home), "PATH": "/usr/bin:/bin"},
            timeout=60,
            check=False,
        )
    assert done.stdout.strip() == "True True []", done.stderr[-2000:]
