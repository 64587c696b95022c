"""A test run that loaded Hermes ends without a `--- Logging error --- FileNotFoundError`
traceback: the throw-away Hermes home its log files are in is removed at the end of the run,
and a record logged after that (at exit) must not reach them. A real pytest run in a subprocess,
with a plugin that sets Hermes' logging up as the adapter does and logs once at exit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = """
import atexit, logging, os, pathlib

def pytest_configure(config):
    import hermes_logging
    hermes_logging.setup_logging(hermes_home=pathlib.Path(os.environ["HERMES_HOME"]))
    atexit.register(lambda: logging.getLogger("tools").warning("logged at exit"))
"""


def test_a_run_that_loaded_hermes_prints_no_logging_error_at_exit(tmp_path):
    pytest.importorskip("hermes_logging")
    (tmp_path / "exit_logger.py").write_text(PLUGIN)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "exit_logger", "tests/test_display.py"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Logging error" not in done.stderr, done.stderr[-3000:]
