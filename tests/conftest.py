"""What every test gets, so that tests run in parallel (pytest-xdist workers, see pyproject.toml)
never meet: a journal, runtime, data and config directory of its own. And the suite's one-time
setup: the project's bytecode, compiled once before the workers start."""

import compileall
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
# Each worker keeps pytest's rewritten test modules as bytecode (tests/__pycache__) even under
# PYTHONDONTWRITEBYTECODE: else every worker of every run rewrites and compiles them all again.
sys.dont_write_bytecode = False
# Hermes binds its log files to its home when first imported (at collection): a throw-away home
# of this process's own, never the user's ~/.hermes, which every worker would write.
IMPORT_HERMES_HOME = tempfile.mkdtemp(prefix="acpt-hermes-")
os.environ["HERMES_HOME"] = IMPORT_HERMES_HOME


def pytest_configure(config: pytest.Config) -> None:
    """Compile the project once, in the controller (xdist workers have `workerinput`), so the
    hundreds of `python -m acp_server` subprocesses load bytecode instead of each compiling the
    whole package again (they would under PYTHONDONTWRITEBYTECODE, which writes none)."""
    if hasattr(config, "workerinput"):
        return
    for package in ("acp_server", "adapters", "journal"):
        compileall.compile_dir(TESTS.parent / package, quiet=1)
    compileall.compile_dir(TESTS, maxlevels=0, quiet=1)  # the helpers subprocesses run or import


def pytest_unconfigure(config: pytest.Config) -> None:
    _unhook_hermes_logs()
    shutil.rmtree(IMPORT_HERMES_HOME, ignore_errors=True)


def _unhook_hermes_logs() -> None:
    """Hermes' log files live in the home removed above: a record logged after that (at exit)
    would print a `--- Logging error --- FileNotFoundError` traceback for each. Its handlers are
    taken off the loggers and its queue's listener stopped first."""
    hermes_logging = sys.modules.get("hermes_logging")
    if hermes_logging is None:
        return
    queue = getattr(hermes_logging, "_log_queue", None)
    loggers = [
        logging.getLogger(),
        *(x for x in logging.Logger.manager.loggerDict.values() if isinstance(x, logging.Logger)),
    ]
    for logger in loggers:
        for handler in list(logger.handlers):
            target = getattr(handler, "baseFilename", None)
            ours = isinstance(target, str) and target.startswith(IMPORT_HERMES_HOME)
            if ours or (queue is not None and getattr(handler, "queue", None) is queue):
                logger.removeHandler(handler)
    stop = getattr(hermes_logging, "_stop_queue_listener", None)
    if callable(stop):
        stop()


@pytest.fixture(autouse=True)
def private_places(tmp_path, monkeypatch):
    """Servers started by a test keep their journal, runners, logs and config in the test's own
    directories (Hermes' home too), never the user's (which every worker would share)."""
    monkeypatch.setenv("ACP_SERVER_DB", str(tmp_path / "acp-journal.db"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "hermes-home"))
    # A runner's socket path must stay under ~100 bytes: tmp_path is too long for it.
    runtime = tempfile.mkdtemp(prefix="acpt-run-", dir="/tmp")
    monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
    yield
    shutil.rmtree(runtime, ignore_errors=True)


@pytest.fixture(autouse=True)
def no_stream_outlives_its_turn():
    """A dense stream raises the process's GIL switch interval until its turn closes its sink
    (`bridge.LongSlices`): a test that leaves one open would slow every later test's loop."""
    bridge = sys.modules.get("acp_server.turns.bridge")  # not imported here: tests of imports
    before = 0 if bridge is None else bridge.LONG_SLICES.holders
    yield
    bridge = sys.modules.get("acp_server.turns.bridge")
    assert bridge is None or bridge.LONG_SLICES.holders == before, "a fast stream's sink was never closed"
