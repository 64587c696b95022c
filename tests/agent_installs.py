"""The real ACP agents the tests run: installed once from their locks, cached, found again.

The npm agents (tests/agents/package.json, pinned by package-lock.json) are installed with
`npm ci` into one directory; each Python agent gets a venv of its own built from its pinned
requirements (tests/agents/hermes.txt, fast-agent.txt: their ACP SDKs clash with the test
extra's, and fast-agent needs Python >= 3.12). Each lives under the cache directory
(`$ACP_TEST_CACHE`, default ~/.cache/acp-server-tests) in a folder named after its lock's
hash, so a changed lock installs anew and worktrees share installs; a file lock serializes
installs across concurrent runs. Run as a script (.ci/run does), it installs them all and
says which it could not; it needs nothing but the standard library.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from install_lock import install_lock

LOCKS = Path(__file__).resolve().parent / "agents"
NPM_TIMEOUT = 600  # seconds for `npm ci`; about a minute here
PIP_TIMEOUT = 1800  # seconds for one venv; 3 to 6 minutes here on a busy machine
NODE_MAJOR = 20  # @google/gemini-cli's engines


class InstallError(Exception):
    """An agent cannot be installed here; the message says why."""


@dataclass(frozen=True, slots=True)
class PythonAgent:
    requirements: str  # the pinned requirements file in tests/agents
    executable: str  # its entry point in the venv's bin
    pythons: tuple[str, ...]  # the interpreters it runs on, preferred first


NODE_AGENTS = ("claude-agent-acp", "codex-acp", "gemini")  # entry points in node_modules/.bin
PYTHON_AGENTS = {
    "hermes": PythonAgent("hermes.txt", "hermes", ("3.11", "3.12", "3.13")),
    "fast-agent": PythonAgent("fast-agent.txt", "fast-agent", ("3.12", "3.13")),
}


def cache_root() -> Path:
    if root := os.environ.get("ACP_TEST_CACHE"):
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "acp-server-tests"


def executable(name: str) -> Path:
    """The agent's entry point, installing it first when needed; InstallError says why not."""
    if name in NODE_AGENTS:
        return _node_modules() / ".bin" / name
    if name in PYTHON_AGENTS:
        agent = PYTHON_AGENTS[name]
        return _venv(name, agent) / "bin" / agent.executable
    raise InstallError(f"no such agent: {name}")


def installed(name: str) -> bool:
    """Whether the agent's install for its current lock is finished in the cache (nothing is
    run or fetched to find out)."""
    marker = ".acp-server-installed"
    if name in NODE_AGENTS:
        files = (LOCKS / "package.json", LOCKS / "package-lock.json")
        return (cache_root() / f"agents-npm-{_digest(*files)}" / marker).exists()
    if name in PYTHON_AGENTS:
        digest = _digest(LOCKS / PYTHON_AGENTS[name].requirements)
        return bool(glob.glob(str(cache_root() / f"agents-{name}-py*-{digest}" / marker)))
    return False


def _digest(*files: Path) -> str:
    return hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:12]


def _install_once(home: Path, name: str, install: Callable[[Path], None]) -> Path:
    """`install(home)` unless a finished install is there; a failed one is removed."""
    marker = home / ".acp-server-installed"
    with install_lock(f"agents-{name}"):
        if not marker.exists():
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            try:
                install(home)
            except BaseException:
                shutil.rmtree(home, ignore_errors=True)
                raise
            marker.write_text("")
    return home


def _run(command: list[str], *, timeout: int, what: str) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise InstallError(f"{what} took longer than {timeout} s (no registry?)") from None
    if done.returncode != 0:
        raise InstallError(f"{what} failed (no registry?): {(done.stderr or done.stdout)[-1500:]}")


# --- npm -------------------------------------------------------------------------------------


def _node_modules() -> Path:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise InstallError(f"Node.js >= {NODE_MAJOR} and npm are needed for {', '.join(NODE_AGENTS)}")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    if not version.startswith("v") or int(version[1:].split(".")[0]) < NODE_MAJOR:
        raise InstallError(f"Node.js {version or '?'} is too old: {', '.join(NODE_AGENTS)} need >= {NODE_MAJOR}")
    files = (LOCKS / "package.json", LOCKS / "package-lock.json")

    def install(home: Path) -> None:
        for file in files:
            shutil.copy(file, home / file.name)
        command = [npm, "ci", "--prefix", str(home), "--no-audit", "--no-fund"]
        _run(command, timeout=NPM_TIMEOUT, what="`npm ci` of tests/agents/package-lock.json")

    return _install_once(cache_root() / f"agents-npm-{_digest(*files)}", "npm", install) / "node_modules"


# --- Python venvs ----------------------------------------------------------------------------


def _venv(name: str, agent: PythonAgent) -> Path:
    python, version = _interpreter(agent.pythons, for_what=name)
    requirements = LOCKS / agent.requirements

    def install(home: Path) -> None:
        _run([python, "-m", "venv", str(home)], timeout=120, what=f"creating a venv for {name}")
        pip = [str(home / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        what = f"pip install -r tests/agents/{requirements.name}"
        _run([*pip, "-r", str(requirements)], timeout=PIP_TIMEOUT, what=what)

    return _install_once(cache_root() / f"agents-{name}-py{version}-{_digest(requirements)}", name, install)


def _interpreter(versions: tuple[str, ...], *, for_what: str) -> tuple[str, str]:
    """A Python of one of `versions`: this one, or one on PATH, or one pyenv installed."""
    candidates = [sys.executable]
    for version in versions:
        candidates += [shutil.which(f"python{version}") or "", *sorted(glob.glob(_pyenv(version)), reverse=True)]
    for candidate in filter(None, candidates):
        probe = [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            found = subprocess.run(probe, capture_output=True, text=True, timeout=30, check=False).stdout.strip()
            if found in versions:
                return candidate, found
    raise InstallError(f"{for_what} needs Python {' or '.join(versions)}; none found (PATH, pyenv)")


def _pyenv(version: str) -> str:
    root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    return f"{root}/versions/{version}.*/bin/python{version}"


def main() -> int:
    """Install every agent; say which could not be. Never fails: the tests report."""
    for name in (*NODE_AGENTS, *PYTHON_AGENTS):
        try:
            print(f"agents: {name}: {executable(name)}", flush=True)
        except InstallError as exc:
            print(f"agents: WARNING: {name} is not installed: {exc}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
