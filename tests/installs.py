"""The third-party clients the end-to-end tests drive: found, or installed once, or skipped.

Node.js packages come from tests/clients (package.json, pinned by package-lock.json) through
`npm ci`, run here when what is installed differs from the lockfile. Without Node/npm or a
reachable registry a test skips with the reason; under CI (`CI` set to a true value) it fails
instead, except when .ci/run could not install Node.js and says why in `ACP_TEST_NO_NODE`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

try:
    import fcntl
except ImportError:  # not POSIX: installs are not serialized across concurrent runs
    fcntl = None  # type: ignore[assignment]

CLIENTS = Path(__file__).resolve().parent / "clients"
IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
NPM_TIMEOUT = 300  # seconds for `npm ci`; it normally takes a few


def unavailable(reason: str, *, node: bool = False) -> NoReturn:
    """Skip with a visible reason; in CI a missing client runtime is a failure, except Node.js when
    .ci/run found it could not install it (it says why in ACP_TEST_NO_NODE)."""
    if node and (why := os.environ.get("ACP_TEST_NO_NODE")):
        pytest.skip(f"{reason} ({why})")
    if IN_CI:
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


@contextlib.contextmanager
def install_lock(name: str) -> Iterator[None]:
    """Serialize installs across concurrent pytest runs on this machine."""
    if fcntl is None:
        yield
        return
    path = Path(tempfile.gettempdir()) / f"acp-server-tests-{os.getuid()}-{name}.lock"
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


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


# --- `hermes acp` ------------------------------------------------------------------------------

# Hermes' ACP extra pins the ACP SDK at a version other than the test extras' (0.12.1, for the
# SDK benchmarks), and `hermes acp` will not start with that. So `hermes acp` runs from a venv of
# its own layered on this one: this environment's packages (Hermes included), and the SDK pinned.
HERMES_ACP_SDK = "agent-client-protocol==0.9.0"
PIP_TIMEOUT = 300


def hermes_acp() -> tuple[str, ...]:
    """The command that starts `hermes acp` (Hermes' own ACP adapter), installing its SDK once."""
    import sys

    try:
        import acp_adapter  # noqa: F401 (Hermes installed here, with its ACP adapter)
    except ImportError:
        unavailable("hermes-agent is not installed (pip install 'acp-server[hermes]')")
    venv = Path(tempfile.gettempdir()) / f"acp-server-tests-{os.getuid()}-hermes-acp"
    python = venv / "bin" / "python"
    ready = venv / "ready"
    with install_lock("hermes-acp"):
        if not ready.exists() or ready.read_text() != HERMES_ACP_SDK:
            # Every site directory of this interpreter (a .pth in one adds another: list them all).
            bases = [path for path in sys.path if path.endswith("site-packages") and os.path.isdir(path)]
            _layered_venv(venv, sys.executable, bases)
            ready.write_text(HERMES_ACP_SDK)
    # Hermes' entry puts this environment's site-packages first on sys.path; importing the SDK
    # before it keeps the pinned one.
    return (str(python), "-c", "import acp; from acp_adapter.entry import main; main()")


def _layered_venv(venv: Path, python: str, bases: list[str]) -> None:
    subprocess.run([python, "-m", "venv", "--without-pip", "--clear", str(venv)], check=True)
    purelib = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "zz-base.pth").write_text("".join(f"{base}\n" for base in bases))
    command = [python, "-m", "pip", "install", "--quiet", "--no-deps", "--target", purelib, HERMES_ACP_SDK]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        unavailable(f"installing {HERMES_ACP_SDK} took longer than {PIP_TIMEOUT} s (no registry?)")
    if done.returncode != 0:
        unavailable(f"cannot install {HERMES_ACP_SDK} for `hermes acp` (no registry?): {done.stderr[-1500:]}")
