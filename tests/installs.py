"""The third-party clients the end-to-end tests drive: found, or installed once, or skipped.

Node.js packages come from tests/clients (package.json, pinned by package-lock.json) through
`npm ci`, run here when what is installed differs from the lockfile. Without Node/npm or a
reachable registry a test skips with the reason; under CI (`CI` set to a true value) it fails
instead, except when .ci/run could not install Node.js and says why in `ACP_TEST_NO_NODE`.

Nothing is downloaded for a test outside CI unless `ACP_TEST_DOWNLOADS=1` says so: a newcomer's
`pytest` fetches nothing beyond the Python test dependencies, and a test whose client or agent
is not there yet skips, saying how to opt in (`may_download`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest
from install_lock import install_lock

CLIENTS = Path(__file__).resolve().parent / "clients"
IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
NPM_TIMEOUT = 300  # seconds for `npm ci`; it normally takes a few
OPT_IN = "ACP_TEST_DOWNLOADS"
DOWNLOADS_ALLOWED = IN_CI or os.environ.get(OPT_IN, "").strip().lower() not in ("", "0", "false", "no")


def may_download(what: str) -> None:
    """Go on when the suite may download `what` (under CI, or opted in); else skip, saying how."""
    if not DOWNLOADS_ALLOWED:
        pytest.skip(f"{what} is not installed; set {OPT_IN}=1 to let the tests download it (CI does)")


def unavailable(reason: str, *, node: bool = False) -> NoReturn:
    """Skip with a visible reason; in CI a missing client runtime is a failure, except Node.js when
    .ci/run found it could not install it (it says why in ACP_TEST_NO_NODE)."""
    if node and (why := os.environ.get("ACP_TEST_NO_NODE")):
        pytest.skip(f"{reason} ({why})")
    if IN_CI:
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


def locked_version(package: str) -> str:
    lock = json.loads((CLIENTS / "package-lock.json").read_text())
    return lock["packages"][f"node_modules/{package}"]["version"]


def installed_version(package: str) -> str | None:
    try:
        return json.loads((CLIENTS / "node_modules" / package / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def _missing(packages: tuple[str, ...]) -> list[str]:
    return [p for p in packages if installed_version(p) != locked_version(p)]


def node_packages(*packages: str) -> str:
    """The `node` executable, once Node >= 18 is there and `packages` are installed as locked."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None:
        unavailable(f"Node.js is not installed: {', '.join(packages)} need node >= 18 and npm", node=True)
    major = subprocess.run([node, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    if not major.startswith("v") or int(major[1:].split(".")[0]) < 18:
        unavailable(f"Node.js {major or '?'} is too old: {', '.join(packages)} need node >= 18", node=True)
    if _missing(packages):
        may_download(f"{', '.join(packages)} (tests/clients, npm ci)")
        if npm is None:
            unavailable("npm is not installed: cannot install tests/clients' dependencies (npm ci)", node=True)
        with install_lock("npm"):
            if _missing(packages):
                _npm_ci(npm)
        if missing := _missing(packages):
            unavailable(f"{', '.join(missing)} still not installed as locked after npm ci")
    return node


def _npm_ci(npm: str) -> None:
    command = [npm, "ci", "--prefix", str(CLIENTS), "--no-audit", "--no-fund"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=NPM_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        unavailable(f"`npm ci --prefix tests/clients` took longer than {NPM_TIMEOUT} s (no registry?)")
    if done.returncode != 0:
        unavailable(f"`npm ci --prefix tests/clients` failed (no registry?): {done.stderr[-1500:]}")
