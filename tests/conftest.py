import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(autouse=True)
def private_journal(tmp_path, monkeypatch):
    """Servers started by a test keep their journal in the test's directory, never the user's."""
    monkeypatch.setenv("ACP_SERVER_DB", str(tmp_path / "acp-journal.db"))
