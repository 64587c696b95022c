"""How a local command dies with a killed server: Linux's parent-death signal, set by a launcher.

A command that outlived a SIGKILLed server could look, after a restart, like a tool that ran
twice. `preexec_fn` is unsafe in a threaded process, so a launcher sets the signal after exec:
`setpriv --pdeathsig` (util-linux), else a tiny Python program; either then checks that the
server did not die first, and execs `/bin/sh -c`. Elsewhere commands run without a lifeline.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys

import anyio

log = logging.getLogger(__name__)

# The child learns its parent after the signal is armed: if that is no longer the server, the
# server died in between and no signal will come, so the command must not start at all.
_SH_CHECK = '[ "$PPID" = "$1" ] || exit 137; exec /bin/sh -c "$2"'
_PY_LAUNCHER = """\
import os, sys
try:
    import ctypes
    ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
except Exception:
    pass  # no prctl (unusual libc, sandbox): run without a lifeline rather than not at all
if os.getppid() != int(sys.argv[1]):
    os._exit(137)
os.execv("/bin/sh", ["/bin/sh", "-c", sys.argv[2]])
"""


def setpriv_launcher(setpriv: str) -> tuple[str, ...]:
    return (setpriv, "--pdeathsig", "KILL", "--", "/bin/sh", "-c", _SH_CHECK, "sh")


def python_launcher(python: str) -> tuple[str, ...]:
    return (python, "-I", "-S", "-c", _PY_LAUNCHER)


def wrap(launcher: tuple[str, ...], command: str, *, parent: int) -> list[str]:
    """The argv that runs `command` through `launcher`, tied to the process `parent`."""
    if not launcher:
        return ["/bin/sh", "-c", command]
    return [*launcher, str(parent), command]


class Lifeline:
    """Picks the launcher once per process: setpriv when it works here, else Python, else none.

    The parent-death signal fires when the *thread* that forked the command exits, not the
    process. Commands are spawned by asyncio on the event loop's thread, which lives as long as
    the server; never spawn them from a worker thread (anyio retires idle workers after 10 s).
    """

    def __init__(self) -> None:
        self._launcher: tuple[str, ...] | None = None

    async def argv(self, command: str) -> list[str]:
        if self._launcher is None:
            self._launcher = await _choose()
        return wrap(self._launcher, command, parent=os.getpid())


async def _choose() -> tuple[str, ...]:
    if not sys.platform.startswith("linux"):
        log.info("no parent-death signal on %s: a command may outlive a server that was killed", sys.platform)
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is not None and await _works(setpriv_launcher(setpriv)):
        return setpriv_launcher(setpriv)
    if sys.executable:
        log.info("setpriv --pdeathsig is not available; commands start through a Python launcher")
        return python_launcher(sys.executable)
    log.warning("neither setpriv nor a Python interpreter: a command may outlive a server that was killed")
    return ()


async def _works(launcher: tuple[str, ...]) -> bool:
    # Old setpriv has no --pdeathsig; some sandboxes refuse the prctl.
    try:
        with anyio.fail_after(10):
            done = await anyio.run_process(
                wrap(launcher, "exit 0", parent=os.getpid()),
                check=False,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
    except (OSError, TimeoutError):
        return False
    return done.returncode == 0


LIFELINE = Lifeline()
