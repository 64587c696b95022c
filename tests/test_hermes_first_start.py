"""Hermes the first time, as a newcomer meets it: the docs' `config.yaml` works as written,
`doctor` says what the agent will do (healthy exactly when a prompt works, Hermes' own reason when
it will not), Hermes' errors reach the client as themselves, and its log lines stay off stderr.
Real subprocesses (`acp-server prompt`, `acp-server doctor`), the fake model on 127.0.0.1 and a
throw-away HOME and HERMES_HOME; no provider key of the machine's environment is passed on.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("run_agent", reason="the hermes extra is not installed")

from fake_openai import FakeOpenAI, reply
from test_doctor import rows, settings

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-readme-0123456789"
NEWCOMER = "model:\n  default: gpt-4o\n  base_url: {base_url}\n"  # the config that failed every prompt
SMALL = "model:\n  default: gpt-4o\n  provider: custom\n  base_url: {base_url}\n  context_length: 32000\n"
UNSIZED = "model:\n  default: gpt-4o\n  provider: custom\n  base_url: {base_url}\n"
QUIET = "agent:\n  environment_probe: false\nauxiliary:\n  title_generation:\n    enabled: false\n"
NO_PROVIDER = "No LLM provider configured. Run `hermes model` to select a provider"
MINIMUM = "which is below the minimum 64,000 required by Hermes Agent"


def readme_config() -> str:
    """The first yaml block of the docs' Hermes page, as a user copies it."""
    section = (ROOT / "docs" / "agents" / "hermes.md").read_text(encoding="utf-8")
    match = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert match, "the Hermes section shows no config.yaml"
    return match.group(1)


def hermes_home(tmp_path: Path, config: str, env_file: str = "") -> Path:
    home = tmp_path / "hermes-home"
    home.mkdir()
    (home / "config.yaml").write_text(config)
    (home / ".env").write_text(env_file)
    return home


def acp_server(tmp_path: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ACP_SERVER_") and not k.endswith(("_API_KEY", "_BASE_URL", "_TOKEN"))
    }
    environ |= {"HOME": str(tmp_path), "HERMES_HOME": str(home), "XDG_DATA_HOME": str(tmp_path / "data")}
    return subprocess.run(
        [sys.executable, "-m", "acp_server", "--agent", "hermes", "--db", str(tmp_path / "journal.db"), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environ,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def prompt(tmp_path: Path, home: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return acp_server(tmp_path, home, "prompt", *flags, "hi")


def doctor(tmp_path: Path, home: Path) -> tuple[subprocess.CompletedProcess[str], str, str]:
    done = acp_server(tmp_path, home, "doctor")
    status, detail = rows(done.stdout)["> hermes"]
    return done, status, detail


def test_the_documented_config_yaml_works_as_written_and_doctor_says_so(tmp_path: Path):
    with FakeOpenAI(models=["my-model"]) as fake:
        fake.responder = lambda body: reply("Hello from the endpoint.")
        config = readme_config().replace("https://llm.example.com/v1", fake.base_url)
        home = hermes_home(tmp_path, config, f"LLM_API_KEY={KEY}\n")
        checked, status, detail = doctor(tmp_path, home)
        done = prompt(tmp_path, home)
        chats = [r for r in fake.requests if r.route.endswith("/chat/completions")]
    assert (checked.returncode, status) == (0, "ok"), checked.stdout + checked.stderr
    assert detail == f"{fake.base_url} answered (HTTP 200); model my-model"
    shown = settings(checked.stdout)
    assert shown["hermes: api key"][0] == "set" and shown["hermes: provider"][0] == "custom (asked: custom)"
    assert shown["hermes: context length"] == ("131,072", "config.yaml model.context_length")
    # The config as written has Hermes name the session after the turn, from the same endpoint:
    # whether that title comes before `prompt` exits is a race, and then it is shown as such.
    answer, *late = done.stdout.splitlines(keepends=True)
    assert (done.returncode, answer) == (0, "Hello from the endpoint.\n"), done.stderr
    assert late in ([], ["[title] Hello from the endpoint.\n"])
    assert chats and chats[0].headers.get("authorization") == f"Bearer {KEY}"  # the key from .env reached it
    assert chats[0].body["model"] == "my-model"
    assert done.stderr == ""  # none of Hermes' INFO and WARNING lines at the default log level
    assert KEY not in checked.stdout + checked.stderr


@pytest.mark.parametrize(
    ("config", "said", "hermes_says"),
    [
        pytest.param(NEWCOMER, '"No LLM provider configured"', NO_PROVIDER, id="base_url-without-provider"),
        pytest.param(SMALL, "32,000 tokens (model.context_length in config.yaml)", MINIMUM, id="small-context"),
        pytest.param(UNSIZED, "32,768 tokens (as the endpoint reports it)", MINIMUM, id="endpoint-reports-small"),
    ],
)
def test_doctor_finds_unhealthy_what_fails_every_prompt_and_the_prompt_shows_hermes_own_reason(
    tmp_path: Path, config: str, said: str, hermes_says: str
):
    with FakeOpenAI() as fake:
        fake.models = [{"id": "gpt-4o", "object": "model", "context_length": 32768}]
        fake.responder = lambda body: reply("never")
        home = hermes_home(tmp_path, config.format(base_url=fake.base_url) + QUIET, "OPENAI_API_KEY=sk-env-0000\n")
        checked, status, detail = doctor(tmp_path, home)
        done = prompt(tmp_path, home)
        chats = [r for r in fake.requests if r.route.endswith("/chat/completions")]
    assert (checked.returncode, status) == (1, "unhealthy"), checked.stdout + checked.stderr
    assert said in detail
    assert done.returncode == 1 and not chats
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {'Model gpt-4o has a context window' if hermes_says == MINIMUM else NO_PROVIDER}")
    assert hermes_says in last and "RuntimeError" not in done.stderr, done.stderr


def test_doctor_names_the_key_in_hermes_env_that_hermes_would_not_send(tmp_path: Path):
    with FakeOpenAI() as fake:
        home = hermes_home(tmp_path, NEWCOMER.format(base_url=fake.base_url), "OPENAI_API_KEY=sk-env-0000\n")
        _checked, _status, detail = doctor(tmp_path, home)
    assert "set model.provider: custom, model.base_url, model.api_key" in detail
    assert f"{home / '.env'} sets OPENAI_API_KEY, which Hermes does not send to this endpoint" in detail
    assert "model.api_key: ${OPENAI_API_KEY}" in detail and "sk-env" not in detail


def test_doctor_makes_no_hermes_home_where_there_is_none(tmp_path: Path):
    missing = tmp_path / "no-hermes-here"
    _checked, status, detail = doctor(tmp_path, missing)
    assert (status, detail.split(":")[0]) == ("unhealthy", f"no Hermes home at {missing}")
    assert not missing.exists()
    _checked = acp_server(tmp_path, missing, "--agent", "echo", "doctor")  # hermes is checked, not selected
    assert not missing.exists() and not (tmp_path / ".hermes").exists()


def test_hermes_log_lines_come_to_stderr_only_when_asked_for_and_always_reach_its_own_log(tmp_path: Path):
    with FakeOpenAI() as fake:
        fake.responder = lambda body: reply("Hi.")
        home = hermes_home(tmp_path, SMALL.replace("32000", "128000").format(base_url=fake.base_url) + QUIET)
        ours = prompt(tmp_path, home, "--log-level", "INFO")
        asked = prompt(tmp_path, home, "--log-level", "INFO", "--log-libraries", "hermes")
    assert ours.returncode == 0 and asked.returncode == 0, ours.stderr + asked.stderr

    def loggers(stderr: str) -> set[Any]:
        return {m.group(1).split(".")[0] for m in re.finditer(r"^\S+ \S+ (?:INFO|WARNING) (\S+):", stderr, re.M)}

    assert "acp_server" in loggers(ours.stderr) and not loggers(ours.stderr) & {"run_agent", "tools", "agent"}
    assert {"run_agent", "agent"} <= loggers(asked.stderr)
    assert " INFO run_agent:" in (home / "logs" / "agent.log").read_text()  # Hermes' own log is left whole
