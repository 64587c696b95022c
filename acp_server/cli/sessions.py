"""Finding a stored session for `prompt --session` and `attach`, as the journal commands find one
(its id, or any unique prefix), and who runs its turn now: the process that owns its running run,
and whether that process is one of this user's runners (runner mode), found by its control socket.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

import anyio

from acp_server.cli.inspect import NotFoundError, find_session
from acp_server.cli.runner import runner_config, runner_on, running
from adapters.frozen import frozen

if TYPE_CHECKING:
    from journal.records import RunRecord, SessionRecord
    from journal.store import Journal

POLL = 0.1  # seconds between looks at the journal: another process writes it, nothing to wait on
RECOVER_EVERY = 10  # looks between checks that the run's owner is still alive


class SessionError(Exception):
    """The session cannot be used as asked; the message says why, in one line."""


@frozen
class Found:
    session: SessionRecord
    running: RunRecord | None  # its turn running now (its owner alive), if any


async def find(args: argparse.Namespace) -> Found:
    """The session `args.session` names, and its running run (runs of dead processes are settled
    first, as every journal reader does)."""
    from journal.states import RunState
    from journal.store import Journal, default_path

    journal = await Journal.open(args.db or default_path())
    try:
        session = await find_session(journal, args.session)
        runs = await journal.runs(session.id)
    except NotFoundError as exc:
        raise SessionError(str(exc)) from None
    finally:
        await journal.close()
    return Found(session, next((run for run in reversed(runs) if run.status is RunState.RUNNING), None))


def runner_of(pid: int | None) -> dict[str, Any] | None:
    """The status of this user's runner with that pid, if one answers."""
    return next((status for status in running() if status.get("pid") == pid), None) if pid else None


def session_to_continue(args: argparse.Namespace) -> Found:
    """The session `prompt --session` continues. A turn running in it elsewhere would run beside
    the new one: only the runner this command reaches may have one (the prompt waits behind it)."""
    found = anyio.run(find, args)
    run = found.running
    if run is None:
        return found
    if runner_on(args):
        from acp_server.runner.paths import place_for

        ours = runner_of(run.owner_pid)
        if ours is not None and ours.get("key") == place_for(runner_config(args)).key:
            return found
    where = "a runner of other options" if runner_of(run.owner_pid) else "another acp-server"
    raise SessionError(
        f"session {found.session.id} has a turn running in process {run.owner_pid} ({where}); a prompt "
        f"now would run beside it: wait for it to end (acp-server attach {found.session.id} shows it)"
    )


async def wait_for_end(journal: Journal, run: RunRecord, *, gone: anyio.Event) -> RunRecord | None:
    """The run's record once it is no longer running (its owner may die instead: checked now
    and then, and at once when the connection to it closes)."""
    looks = 0
    while True:
        current = await journal.get_run(run.id)
        if current is None or current.status.value != "running":
            return current
        looks += 1
        if gone.is_set() or looks % RECOVER_EVERY == 0:
            await journal.recover_runs(run.session_id)
        await anyio.sleep(POLL)
