"""Where a runner's remote endpoint listens (`--listen HOST:PORT`, TLS files), and the Uvicorn
server that serves it inside the runner's event loop.

Loopback by default: an address other than loopback is refused without `--tls-cert` and
`--tls-key`. Uvicorn's own signal handling is left out (the runner owns SIGTERM) and so is its
access log (nothing with a request's URL or headers is logged).
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import uvicorn

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


class ListenError(ValueError):
    """A `--listen` value that cannot be used, said in one line."""


@dataclass(frozen=True, slots=True)
class ListenAddress:
    host: str
    port: int
    tls_cert: str | None = None
    tls_key: str | None = None

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    def as_json(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "tlsCert": self.tls_cert, "tlsKey": self.tls_key}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ListenAddress:
        return cls(str(raw["host"]), int(raw["port"]), raw.get("tlsCert"), raw.get("tlsKey"))


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_listen(value: str, *, tls_cert: str | None = None, tls_key: str | None = None) -> ListenAddress:
    """`HOST:PORT` or `[V6]:PORT` (port 0: any free port); raises ListenError saying what is wrong."""
    host, sep, port_text = value.strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ListenError(f"--listen takes HOST:PORT (such as 127.0.0.1:8765), not {value!r}")
    if (tls_cert is None) != (tls_key is None):
        raise ListenError("--tls-cert and --tls-key go together: give both or neither")
    if tls_cert is None and not is_loopback(host):
        raise ListenError(
            f"--listen {value} is not a loopback address: give --tls-cert and --tls-key to serve it over TLS"
        )
    return ListenAddress(host, int(port_text), tls_cert, tls_key)


def bind(address: ListenAddress) -> socket.socket:
    """The listening socket (bound here, so that port 0 is known before anyone is told)."""
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    return socket.create_server((address.host, address.port), family=family, reuse_port=False)


class EndpointServer(uvicorn.Server):
    """Uvicorn without its signal handlers: the runner's SIGTERM handling stays the runner's."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None]:
        yield


def endpoint_server(app: Any, address: ListenAddress, *, max_frame_bytes: int) -> EndpointServer:
    config = uvicorn.Config(
        app,
        lifespan="off",
        log_config=None,  # the runner's logging, into its log file
        access_log=False,  # a request line never reaches the log
        server_header=False,
        proxy_headers=False,  # Host and the client address are the connection's own
        ws="websockets-sansio",
        ws_max_size=max_frame_bytes,
        ws_ping_interval=20.0,
        ws_ping_timeout=20.0,
        ssl_certfile=address.tls_cert,
        ssl_keyfile=address.tls_key,
        timeout_graceful_shutdown=2,
    )
    return EndpointServer(config)
