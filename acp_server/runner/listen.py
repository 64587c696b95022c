"""Where a runner's remote endpoint listens (`--listen HOST:PORT`, TLS files), and the server
that serves it inside the runner's event loop: Uvicorn over plain HTTP/1.1 on loopback, Hypercorn
where TLS is on (HTTP/2 by ALPN, HTTP/1.1 for clients that offer only that, such as the TS SDK).

Loopback by default: an address other than loopback is refused without `--tls-cert` and
`--tls-key`. Neither server's signal handling is used (the runner owns SIGTERM) and neither keeps
an access log (nothing with a request's URL or headers is logged).
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import socket
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import uvicorn

from adapters.frozen import frozen

if TYPE_CHECKING:
    from hypercorn.config import Config as HypercornConfig

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


class ListenError(ValueError):
    """A `--listen` value that cannot be used, said in one line."""


@frozen
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


class Server(Protocol):
    async def serve(self, sockets: list[socket.socket]) -> None: ...


class TlsServer:
    """Hypercorn on the bound socket: HTTP/2 for clients that negotiate it, HTTP/1.1 otherwise."""

    def __init__(self, app: Any, address: ListenAddress, *, max_frame_bytes: int) -> None:
        self.app = app
        self.address = address
        self.max_frame_bytes = max_frame_bytes

    def config(self, sock: socket.socket) -> HypercornConfig:
        from hypercorn.config import Config  # imported only by a runner serving TLS (its RSS)

        config = Config()
        config.bind = [f"fd://{sock.fileno()}"]
        config.certfile, config.keyfile = self.address.tls_cert, self.address.tls_key
        config.alpn_protocols = ["h2", "http/1.1"]
        config.accesslog = None  # a request line never reaches the log
        config.errorlog = logging.getLogger("hypercorn.error")  # the runner's log file, not stderr
        config.include_server_header = False
        config.websocket_max_message_size = self.max_frame_bytes
        config.websocket_ping_interval = 20.0
        config.graceful_timeout = 2.0
        return config

    async def serve(self, sockets: list[socket.socket]) -> None:
        """Until cancelled; then Hypercorn closes its connections within `graceful_timeout`."""
        import hypercorn.asyncio

        (sock,) = sockets
        stop = anyio.Event()
        try:
            await hypercorn.asyncio.serve(self.app, self.config(sock), shutdown_trigger=stop.wait, mode="asgi")  # pyright: ignore[reportUnknownMemberType] -- its WSGI branch is untyped
        finally:
            stop.set()


def endpoint_server(app: Any, address: ListenAddress, *, max_frame_bytes: int) -> Server:
    if address.tls:
        return TlsServer(app, address, max_frame_bytes=max_frame_bytes)
    config = uvicorn.Config(
        app,
        lifespan="off",
        log_config=None,  # the runner's logging, into its log file
        access_log=False,  # a request line never reaches the log
        server_header=False,
        proxy_headers=False,  # Host and the client address are the connection's own
        ws="websockets-sansio",
        # No per-message compression: each watcher's deflate ran on every frame in the runner's
        # one thread (the largest part of its CPU with 8 WebSocket watchers), slowing the turn
        # for every connection to save bandwidth on what is mostly a local or tailnet link.
        ws_per_message_deflate=False,
        ws_max_size=max_frame_bytes,
        ws_ping_interval=20.0,
        ws_ping_timeout=20.0,
        ssl_certfile=address.tls_cert,
        ssl_keyfile=address.tls_key,
        timeout_graceful_shutdown=2,
    )
    return EndpointServer(config)
