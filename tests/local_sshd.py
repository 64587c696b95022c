"""An OpenSSH server of a test's own on 127.0.0.1: a throw-away host key and client key, a free
port, this user's login by key alone, and a client config (`ssh -F`) that reaches it as `HOST`
and sends the XDG directories along, so a remote front on this machine finds the test's runner
directory, data directory and config. None of the user's own ssh files is read or written."""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

HOST = "acp-remote-test"
SENT = "XDG_RUNTIME_DIR XDG_DATA_HOME XDG_CONFIG_HOME"
START_TIMEOUT = 30.0


def sshd_program() -> str | None:
    return shutil.which("sshd") or next(
        (p for p in ("/usr/sbin/sshd", "/usr/local/sbin/sshd") if os.access(p, os.X_OK)), None
    )


def missing() -> str | None:
    """Why no sshd can be started here, or None."""
    if sshd_program() is None:
        return "sshd is not installed (apt-get install openssh-server; .ci/run installs it)"
    if shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        return "the OpenSSH client (ssh, ssh-keygen) is not installed"
    if os.geteuid() == 0 and not os.path.isdir("/run/sshd"):
        return "sshd run as root needs its privilege separation directory /run/sshd (mkdir -m 755 /run/sshd)"
    return None


@dataclass
class LocalSshd:
    process: subprocess.Popen[bytes]
    client_config: Path

    @property
    def ssh(self) -> str:
        """The `--ssh` command that reaches it as HOST."""
        return f"ssh -F {self.client_config}"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start(directory: Path) -> LocalSshd:
    for name in ("host_key", "client_key"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(directory / name)], check=True, timeout=60
        )
    (directory / "authorized_keys").write_text((directory / "client_key.pub").read_text())
    for _attempt in range(3):  # the free port may be taken between finding it and sshd binding it
        port = _free_port()
        process = subprocess.Popen(
            [str(sshd_program()), "-D", "-e", "-f", str(_server_config(directory, port))],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        if _listening(process, port):
            return LocalSshd(process, _client_config(directory, port))
        process.kill()
        process.wait()
    raise AssertionError("sshd did not start on 127.0.0.1 (three free ports tried)")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _server_config(directory: Path, port: int) -> Path:
    path = directory / "sshd_config"
    path.write_text(
        f"ListenAddress 127.0.0.1\nPort {port}\nHostKey {directory / 'host_key'}\n"
        f"AuthorizedKeysFile {directory / 'authorized_keys'}\nPidFile {directory / 'sshd.pid'}\n"
        "UsePAM no\nStrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        f"PermitRootLogin prohibit-password\nAcceptEnv {SENT}\n"
    )
    return path


def _client_config(directory: Path, port: int) -> Path:
    host_key = (directory / "host_key.pub").read_text().split()
    (directory / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    path = directory / "ssh_config"
    path.write_text(
        f"Host {HOST}\n  HostName 127.0.0.1\n  Port {port}\n  User {getpass.getuser()}\n"
        f"  IdentityFile {directory / 'client_key'}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {directory / 'known_hosts'}\n  GlobalKnownHostsFile /dev/null\n"
        f"  StrictHostKeyChecking yes\n  SendEnv {SENT}\n  LogLevel ERROR\n"
    )
    return path


def _listening(process: subprocess.Popen[bytes], port: int) -> bool:
    """Whether sshd said it listens on `port` (it logs that line once bound) before it ended."""
    said = threading.Event()
    wanted = f"Server listening on 127.0.0.1 port {port}".encode()

    def watch() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            if wanted in line:
                said.set()
        said.set()  # ended: `process.poll()` tells which

    threading.Thread(target=watch, daemon=True).start()
    return said.wait(START_TIMEOUT) and process.poll() is None
