"""Runner mode on the command line: the front (`acp-server --runner`), the runner itself
(`acp-server runner serve`, started by a front or by `runner start`), and `acp-server runner
start|status|stop` (`acp-server pair` is in `cli.pair`).

A runner is named after the options that change what it does (everything in the option table
but logging, runner mode itself and where it listens), so fronts with different options get
different runners, and `runner start --listen` makes the runner a front finds listen.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from acp_server.cli.settings import SERVER_OPTIONS, SWITCH_ON, add_server_options, agent_command_args

if TYPE_CHECKING:
    from acp_server.acp.prompting import AgentOptions
    from acp_server.rpc.trace import Trace
    from acp_server.runner.listen import ListenAddress
    from adapters.base import RuntimeAdapter

NOT_HASHED = frozenset({"log_level", "log_file", "log_libraries", "runner", "listen", "tls_cert", "tls_key"})
CONTROL_TIMEOUT = 10.0  # seconds `status` waits for each runner; `stop` waits longer (turns end)
STOP_TIMEOUT = 30.0

Build = Callable[[], "tuple[RuntimeAdapter, AgentOptions]"]


def runner_on(args: argparse.Namespace) -> bool:
    value = getattr(args, "runner", None)
    return value is not None and str(value).strip().lower() in SWITCH_ON


def add_command(commands: Any) -> None:
    runner = commands.add_parser(
        "runner",
        help="list or stop the background runners of runner mode (--runner)",
        description="Runner mode keeps turns going when the editor goes away; see docs/runner.md.",
    )
    actions = runner.add_subparsers(dest="runner_command", metavar="ACTION", required=True)
    status = actions.add_parser("status", help="list the running runners")
    status.add_argument("--json", action="store_true", help="print a JSON list of objects")
    stop = actions.add_parser("stop", help="cancel the runners' live turns cleanly, then stop them")
    stop.add_argument("--pid", type=int, help="stop only the runner with this pid (runner status lists them)")
    serve = actions.add_parser("serve", help="be a runner (fronts start this; not for editors)")
    add_server_options(serve, defaults=False)
    start = actions.add_parser(
        "start",
        help="start (or find) the runner of these server options; with --listen HOST:PORT it serves remote clients",
        description="Exits 0 once the runner runs (and listens). A front with the same server options and "
        "--runner reaches the same runner. `acp-server pair` gives a remote client its token.",
    )
    add_server_options(start, defaults=False)


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def runner_config(args: argparse.Namespace) -> dict[str, object]:
    config: dict[str, object] = {}
    for flag, _spec in SERVER_OPTIONS:
        dest = _dest(flag)
        if dest not in NOT_HASHED:
            config[dest] = getattr(args, dest, None)
    from journal.store import default_path

    config["db"] = os.path.abspath(str(config.get("db") or default_path()))
    for path_option in ("script", "trace"):
        value = config.get(path_option)
        if isinstance(value, str) and value and ":" not in value:
            config[path_option] = os.path.abspath(value)
    command = agent_command_args(args)
    if command:
        config["agent_command"] = command[1:]
    return config


def runner_argv(args: argparse.Namespace) -> list[str]:
    """`runner serve` with every server option spelled out (the front's cwd and env may differ)."""
    argv = ["runner", "serve"]
    for flag, _spec in SERVER_OPTIONS:
        dest = _dest(flag)
        value = runner_config(args).get(dest, getattr(args, dest, None))
        if dest in ("tls_cert", "tls_key") and value is not None:
            value = os.path.abspath(str(value))
        if dest != "runner" and value is not None:
            argv += [flag, str(value)]
    return argv + agent_command_args(args)


def run_front(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import anyio

    from acp_server.runner.front import RunnerStartError, ensure_runner, relay
    from acp_server.runner.paths import place_for

    argv = runner_argv(args)
    try:
        address = listen_address(args)
    except ValueError as exc:
        print(f"acp-server: {exc}", file=sys.stderr)
        return 2
    try:
        place = place_for(runner_config(args))  # OSError: no private directory for its socket
        if not ensure_runner(place, argv) and address is not None:
            ask(place.control, b"listen " + json.dumps(address.as_json()).encode(), CONTROL_TIMEOUT)
        anyio.run(relay, place, lambda: ensure_runner(place, argv))
    except (RunnerStartError, OSError) as exc:
        print(f"acp-server: {exc}", file=sys.stderr)
        return 1
    return 0


def listen_address(args: argparse.Namespace) -> ListenAddress | None:
    """`--listen` (or ACP_SERVER_LISTEN) with its TLS files; ValueError saying what is wrong."""
    from acp_server.runner.listen import parse_listen

    value = getattr(args, "listen", None)
    if not value:
        return None
    return parse_listen(value, tls_cert=getattr(args, "tls_cert", None), tls_key=getattr(args, "tls_key", None))


def run_runner_command(args: argparse.Namespace, parser: argparse.ArgumentParser, *, build: Build) -> int:
    if args.runner_command == "serve":
        return _serve_runner(args, parser, build)
    if args.runner_command == "start":
        return _start(args)
    if args.runner_command == "status":
        return _status(as_json=args.json)
    return _stop(args.pid)


def _serve_runner(args: argparse.Namespace, parser: argparse.ArgumentParser, build: Build) -> int:
    import anyio

    from acp_server.runner.daemon import Runner
    from acp_server.runner.front import READY
    from acp_server.runner.hub import Hub, RunnerJournal
    from acp_server.runner.paths import place_for

    if args.runner_idle <= 0 or args.detached_wait <= 0:
        parser.error("--runner-idle and --detached-wait must be positive numbers of seconds")
    try:
        address = listen_address(args)
    except ValueError as exc:
        print(f"acp-server: {exc}", file=sys.stderr)
        return 2
    adapter, options = build()
    place = place_for(runner_config(args))
    from acp_server.cli.sweep import sweep
    from acp_server.runner.paths import data_dir

    sweep(logs=data_dir(), root=place.root, keep=place.key)
    os.chdir("/")  # hold no directory of the front's open

    def announce() -> None:
        os.write(1, READY)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)  # nothing but the ready line goes to the front that started us
        os.close(devnull)

    trace = open_trace(args.trace)

    async def serve() -> None:
        journal = await RunnerJournal.open(str(place.config["db"]))
        try:
            hub = Hub(
                adapter=adapter,
                options=options,
                journal=journal,
                detached_wait=args.detached_wait,
                adapter_for=adapter_of_launch,
            )
            runner = Runner(
                hub=hub,
                place=place,
                idle=args.runner_idle,
                max_frame_bytes=args.max_frame_bytes,
                trace=trace,
                listen=address,
                broken=lambda: _start_failed(adapter),
            )
            await runner.run(announce)
        finally:
            await journal.close()

    try:
        anyio.run(serve)
    finally:
        if trace is not None:
            trace.close()
    return 0


def adapter_of_launch(launch: Mapping[str, Any]) -> RuntimeAdapter:
    """The agent a stored session was made with (its `launch`, kept by `settings.launch`), for
    the runner to continue it with; ValueError or OSError when it cannot be built here."""
    from adapters.registry import create_adapter

    settings = {key: launch.get(key) for key in ("script", "model", "base_url")}
    command = launch.get("command")
    words = tuple(str(word) for word in cast(list[Any], command)) if isinstance(command, list) else None
    return create_adapter(str(launch["agent"]), **settings, command=words)


def _start_failed(adapter: object) -> bool:
    """Whether the runner's agent is an ACP agent below whose last start failed."""
    from acp_server.downstream.runtime import AcpRuntime

    return isinstance(adapter, AcpRuntime) and adapter.start_failure is not None


def open_trace(path: str | None) -> Trace | None:
    """The runner's wire trace (all its connections), redacted as the journal is."""
    if not path:
        return None
    from acp_server.rpc.trace import Trace
    from journal.redact import redact, redact_text

    return Trace.open(path, redact=redact, redact_text=redact_text)


def _start(args: argparse.Namespace) -> int:
    """`runner start`: the runner of these options runs (and listens) when this returns 0."""
    from acp_server.runner.front import RunnerStartError, ensure_runner
    from acp_server.runner.paths import place_for

    try:
        address = listen_address(args)
    except ValueError as exc:
        print(f"acp-server: {exc}", file=sys.stderr)
        return 2
    try:
        place = place_for(runner_config(args))
        ensure_runner(place, runner_argv(args))
    except (RunnerStartError, OSError) as exc:
        print(f"acp-server: {exc}", file=sys.stderr)
        return 1
    command = b"listen " + json.dumps(address.as_json()).encode() if address is not None else b"status"
    status = ask(place.control, command, CONTROL_TIMEOUT)
    if status is None or "error" in status:
        print(f"acp-server: {(status or {}).get('error', 'the runner did not answer')}", file=sys.stderr)
        return 1
    listen = status.get("listen")
    where = f"listens on {listen['acpUrl']} (acp-server pair gives a client its token)" if listen else "runs"
    print(f"runner pid {status['pid']} {where}")
    return 0


def ask(path: Path, command: bytes, timeout: float) -> dict[str, Any] | None:
    """One control command's answer; None when nothing answers there (a stale file is removed)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(os.fspath(path))
        except (ConnectionRefusedError, FileNotFoundError):
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        sock.sendall(command + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    try:
        answer: object = json.loads(data)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None  # pyright: ignore[reportUnknownVariableType] -- JSON


def controls() -> list[Path]:
    from acp_server.runner.paths import runtime_dir

    return sorted(runtime_dir().glob("runner-*.ctl"))


def running(timeout: float = CONTROL_TIMEOUT) -> list[dict[str, Any]]:
    return [status for path in controls() if (status := ask(path, b"status", timeout)) is not None]


def _status(*, as_json: bool) -> int:
    runners = running()
    if as_json:
        print(json.dumps(runners))
        return 0
    if not runners:
        print("no runner is running")
    for runner in runners:
        config = runner.get("config", {})
        others = runner.get("agents", [])[1:]  # started for sessions made with other agents
        also = f" (and {', '.join(others)} for their sessions)" if others else ""
        print(
            f"pid {runner['pid']}  agent {config.get('agent')}{also}  sessions {runner['sessions']}  "
            f"live turns {runner['liveTurns']}  connections {runner['connections']}  "
            f"up {runner['uptime']:.0f} s\n  socket {runner['socket']}\n  log {runner['log']}"
        )
        if runner.get("listen"):
            listen = runner["listen"]
            print(f"  listens on {listen['acpUrl']} ({listen['remoteConnections']} remote connection(s))")
    return 0


def _stop(pid: int | None = None) -> int:
    """Stop every runner, or the one with `pid` (exit status 1 when none has it)."""
    paths = controls()
    if pid is not None:
        paths = [path for path in paths if (status := ask(path, b"status", CONTROL_TIMEOUT)) and status["pid"] == pid]
        if not paths:
            print(f"acp-server: no runner has pid {pid} (acp-server runner status lists them)", file=sys.stderr)
            return 1
    stopped = [answer for path in paths if (answer := ask(path, b"stop", STOP_TIMEOUT)) is not None]
    for answer in stopped:
        print(f"stopped runner pid {answer['pid']} (cancelled {answer['cancelled']} live turn(s))")
    if not stopped:
        print("no runner is running")
    return 0
