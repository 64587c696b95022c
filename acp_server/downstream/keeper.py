"""The keeper: a small Python program between acp-server and an ACP agent, so the agent and
everything it starts die with acp-server, also when acp-server is SIGKILLed.

Local commands have a lifeline (`turns.lifeline`: the parent-death signal for one process); an
agent needs it for a whole tree: agents leave children behind (Gemini's relaunched node keeps
running when its parent is killed; claude-agent-acp and codex-acp keep running after their stdin
closes). The keeper arms the parent-death signal (SIGTERM) for itself, becomes a child subreaper
(orphans of the tree are re-parented to it, not to init), starts the agent in a process group of
its own and waits. When the agent exits, or the keeper gets SIGTERM (acp-server died or asked),
it ends the agent's group (SIGTERM, a grace, then SIGKILL) and every descendant left, then exits
with the agent's status. Elsewhere than Linux it still keeps the group, without the lifeline.
"""

from __future__ import annotations

import os
import sys

# The program the keeper runs (`python -I -S -c KEEPER PARENT GRACE ARGV...`): the standard
# library only, so it starts in a few milliseconds whatever the environment holds.
KEEPER = r"""
import os, signal, sys, time

# Every signal the keeper acts on stays blocked and is taken with sigwait: none interrupts it
# half-way (a handler's exception there once ended the keeper with a traceback, its last line
# read as the agent's failure) and none is lost before the keeper waits for it.
STOP = {signal.SIGTERM, signal.SIGHUP}
WATCHED = STOP | {signal.SIGCHLD}

def arm():
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        libc.prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans of the tree come to us
    except Exception:
        pass  # no prctl here: the agent keeps its group, without the lifeline

def children():
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            return [int(pid) for pid in f.read().split()]
    except OSError:
        return []

def kill(pid, group):
    try:
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)
    except OSError:
        pass

def reap(agent=None):
    # Reaps every child that has exited: (all gone, the agent's exit status if it was among them).
    status = None
    while True:
        try:
            pid, raw = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True, status
        if pid == 0:
            return False, status
        if pid == agent:
            status = os.waitstatus_to_exitcode(raw)

def end(agent, grace):
    try:
        os.killpg(agent, signal.SIGTERM)
    except OSError:
        pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not reap()[0] and not STOP & signal.sigpending():
        time.sleep(0.02)  # a second SIGTERM or SIGHUP cuts the grace short
    for _ in range(50):  # each round kills what the last one orphaned
        kill(agent, True)
        for pid in children():
            kill(pid, True)
            kill(pid, False)
        time.sleep(0.01)
        if reap()[0]:
            return

def main():
    parent, grace, argv = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
    signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
    arm()
    if os.getppid() != parent:
        os._exit(137)  # acp-server died before the lifeline was armed: start nothing
    try:
        agent = os.posix_spawnp(argv[0], argv, os.environ, setpgroup=0, setsigmask=())
    except OSError as exc:
        print(f"cannot start {argv[0]}: {exc.strerror or exc}", file=sys.stderr, flush=True)
        os._exit(127)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # the agent alone holds the pipes: acp-server sees EOF when it exits
    os.dup2(null, 1)
    status = 1
    while signal.sigwait(WATCHED) == signal.SIGCHLD:
        _, exited = reap(agent)
        if exited is not None:
            status = exited
            break
    end(agent, grace)
    os._exit(status if status >= 0 else 128 - status)

main()
"""


def keeper_argv(argv: tuple[str, ...], *, grace: float) -> list[str]:
    """The command that runs `argv` under a keeper tied to this process; `grace` is how long
    the agent's group gets between SIGTERM and SIGKILL when it is ended."""
    return [sys.executable, "-I", "-S", "-c", KEEPER, str(os.getpid()), f"{grace:g}", *argv]
