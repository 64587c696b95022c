"""`acp-server doctor` as a user runs it: a real subprocess, real entry points on PYTHONPATH."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from acp_server.cli.doctor import EXIT_UNHEALTHY

AGENTS = """
import threading

from adapters.base import Health
from adapters.callable import SimpleAdapter


class Sick(SimpleAdapter):
    name = "sick"

    def health(self):
        return Health(False, "cannot reach the model server", {"model": ("m1", "config file ~/agent.toml")})


class Stuck(SimpleAdapter):
    name = "stuck"

    def health(self):
        threading.Event().wait()


class Fine(SimpleAdapter):
    name = "fine"

    def health(self):
        return Health(True, "all good", {"model": ("m2", "environment FINE_MODEL")})
"""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A directory with agent modules and an installed distribution declaring two agents."""
    root = tmp_path / "site"
    root.mkdir()
    (root / "doctor_agents.py").write_text(textwrap.dedent(AGENTS))
    info = root / "doctor_agents_acp-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: doctor-agents-acp\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[acp_server.agents]\nstuck = doctor_agents:Stuck\nfine = doctor_agents:Fine\n"
    )
    return root


def doctor(*args: str, cwd: Path, path: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ACP_SERVER_") or k == "ACP_SERVER_DB"}
    if path is not None:
        environ["PYTHONPATH"] = str(path)
    return subprocess.run(
        [sys.executable, "-m", "acp_server", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**environ, **env},
        timeout=30,
    )


def rows(output: str) -> dict[str, list[str]]:
    """The agent table as name -> [status, detail], the selected one under '> name'."""
    parsed = {}
    for line in output.split("\n\n")[0].splitlines()[2:]:
        name, *cells = re.split(r"\s{2,}", line[2:].strip(), maxsplit=2)
        parsed[line[:2].strip() + (" " if line.startswith(">") else "") + name] = cells
    return parsed


def settings(output: str) -> dict[str, tuple[str, str]]:
    """The settings table as name -> (value, source)."""
    block = output.split("Settings in effect for")[1].split("\n\n")[0].splitlines()[2:]
    return {name: (value, source) for name, value, source in (re.split(r"\s{2,}", line.strip()) for line in block)}


def test_the_default_openai_agent_without_a_key_is_unhealthy_and_says_what_to_set(tmp_path: Path):
    result = doctor("doctor", cwd=tmp_path, OPENAI_API_KEY="", OPENAI_BASE_URL="https://api.openai.com/v1")
    assert result.returncode == 1
    status, detail = rows(result.stdout)["> openai"]
    assert status == "unhealthy" and "OPENAI_API_KEY" in detail


def test_every_registered_agent_gets_a_row_and_a_healthy_selection_exits_zero(tmp_path: Path):
    result = doctor("--agent", "echo", "doctor", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    table = rows(result.stdout)
    assert table["> echo"][0] == "ok"
    assert table["scripted"][0] == "ok"
    assert table["python"] == [
        "unavailable",
        "the python agent needs --script module:function, naming a def run(prompt, session) -> str | Iterator[str]",
    ]
    assert "openai" in table
    assert result.stdout.rstrip().endswith("The selected agent 'echo' is healthy.")


def test_each_setting_says_whether_it_came_from_a_flag_the_environment_or_the_default(tmp_path: Path):
    script = tmp_path / "s.json"
    script.write_text('{"scenarios": [{"match": "x", "steps": [{"say": "y"}]}]}')
    result = doctor(
        "--max-workers",
        "3",
        "doctor",
        "--script",
        str(script),
        cwd=tmp_path,
        ACP_SERVER_AGENT="scripted",
        ACP_SERVER_LOG_LEVEL="ERROR",
    )
    assert result.returncode == 0, result.stderr
    assert rows(result.stdout)["> scripted"] == ["ok", "1 scenario loaded"]
    shown = settings(result.stdout)
    assert shown["agent"] == ("scripted", "environment ACP_SERVER_AGENT")
    assert shown["script"] == (str(script), "flag --script")
    assert shown["max-workers"] == ("3", "flag --max-workers")
    assert shown["log-level"] == ("ERROR", "environment ACP_SERVER_LOG_LEVEL")
    assert shown["db"] == (os.environ["ACP_SERVER_DB"], "environment ACP_SERVER_DB")
    assert shown["permission-timeout"] == ("-", "default")


def test_a_check_that_hangs_shows_timed_out_without_failing_another_selected_agent(tmp_path: Path, site: Path):
    result = doctor("doctor", "--agent", "fine", cwd=tmp_path, path=site)
    assert result.returncode == 0, result.stderr
    table = rows(result.stdout)
    assert table["stuck"] == ["timed out", "health() did not answer within 2 s"]
    assert table["> fine"] == ["ok", "all good"]
    assert settings(result.stdout)["fine: model"] == ("m2", "environment FINE_MODEL")


def test_the_exit_status_is_non_zero_when_the_selected_agent_hangs(tmp_path: Path, site: Path):
    result = doctor("--agent", "stuck", "doctor", cwd=tmp_path, path=site)
    assert result.returncode == EXIT_UNHEALTHY
    assert result.stdout.rstrip().endswith(
        "The selected agent 'stuck' is timed out: health() did not answer within 10 s"
    )


def test_an_unhealthy_module_factory_agent_fails_the_doctor_and_shows_its_settings(tmp_path: Path, site: Path):
    result = doctor("doctor", "--agent", "doctor_agents:Sick", cwd=site)
    assert result.returncode == EXIT_UNHEALTHY
    assert rows(result.stdout)["> doctor_agents:Sick"] == ["unhealthy", "cannot reach the model server"]
    assert settings(result.stdout)["doctor_agents:Sick: model"] == ("m1", "config file ~/agent.toml")
    assert "is unhealthy: cannot reach the model server" in result.stdout


def test_a_selected_agent_that_cannot_be_loaded_fails_the_doctor(tmp_path: Path):
    result = doctor("doctor", "--agent", "python", cwd=tmp_path)
    assert result.returncode == EXIT_UNHEALTHY
    assert rows(result.stdout)["> python"][0] == "unavailable"
    assert rows(result.stdout)["echo"][0] == "ok"
