"""The README's test command downloads nothing beyond the Python test dependencies: outside CI,
a test whose real agent is not installed yet skips, saying how to opt in (`ACP_TEST_DOWNLOADS=1`),
and leaves the install cache untouched; under CI (`.ci/run` sets CI=true) it installs as before.
Checked by running the suite's own agent tests in a subprocess against an empty cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import installs
from agents import REAL_AGENTS

ROOT = Path(__file__).resolve().parent.parent


def pytest_run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-n", "0", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )


def test_outside_ci_an_agent_test_with_its_agent_missing_skips_saying_how_to_opt_in(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("CI", installs.OPT_IN)}
    env["ACP_TEST_CACHE"] = str(cache)
    done = pytest_run("tests/test_agents_direct.py", "-k", "a_prompt_streams_the_models_text", env=env)
    assert done.returncode == 0, done.stdout[-3000:]
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skipped, done.stdout[-3000:]
    assert len(skipped) == len(REAL_AGENTS), done.stdout[-3000:]  # each real agent's, none run
    assert all("set ACP_TEST_DOWNLOADS=1 to let the tests download it (CI does)" in line for line in skipped)
    assert "about 1 GB" in done.stdout
    assert list(cache.iterdir()) == []  # nothing was fetched, nothing half-made


def test_ci_and_the_opt_in_allow_downloads_and_nothing_else_does():
    code = "import installs; print(installs.DOWNLOADS_ALLOWED)"
    tests = str(ROOT / "tests")

    def allowed(**extra: str) -> str:
        env = {k: v for k, v in os.environ.items() if k not in ("CI", installs.OPT_IN)} | extra
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=tests, env=env, check=True
        ).stdout.strip()

    assert allowed() == "False"
    assert allowed(CI="true") == "True"
    assert allowed(ACP_TEST_DOWNLOADS="1") == "True"
    assert allowed(CI="false", ACP_TEST_DOWNLOADS="0") == "False"
