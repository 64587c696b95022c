"""A small MCP server (the official `mcp` package) for the agents' MCP tests, and how to reach it.

Run as a script it serves over stdio, or with `http` over streamable HTTP on 127.0.0.1 (it
prints its port once it listens). Its environment shapes it: NOTES_LOG gets one process id per
start (tests count connections), NOTES_CALLS one tool name per call, NOTES_NAME is what `whoami`
answers, NOTES_EXTRA adds a tool `extra`, and NOTES_TOOLS (names, space-separated) adds tools
that claim to only read (`readOnlyHint`) and answer their own names.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SCRIPT = str(Path(__file__).resolve())


def stdio_server(name: str = "notes", **env: str) -> dict[str, Any]:
    """An ACP `McpServer` object that runs this server over stdio with `env`."""
    pairs = [{"name": key, "value": value} for key, value in env.items()]
    return {"name": name, "command": sys.executable, "args": [SCRIPT], "env": pairs}


@contextmanager
def http_server() -> Iterator[str]:
    """This server over streamable HTTP on 127.0.0.1; yields its URL."""
    process = subprocess.Popen([sys.executable, SCRIPT, "http"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())  # printed once the server listens
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait()


def started_pids(log: Path) -> list[int]:
    """The process ids of the server's starts, as it logged them in NOTES_LOG."""
    return [int(pid) for pid in log.read_text().split()] if log.exists() else []


def _note(variable: str, word: str) -> None:
    if os.environ.get(variable):
        with open(os.environ[variable], "a") as log:
            log.write(f"{word} ")


def serve() -> None:
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    _note("NOTES_LOG", str(os.getpid()))
    server = MCPServer("notes")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        _note("NOTES_CALLS", "add")
        return a + b

    @server.tool()
    def explode() -> str:
        """Always fails."""
        raise ToolError("broken on purpose")

    @server.tool()
    def whoami() -> str:
        """The name this server was started with."""
        return os.environ.get("NOTES_NAME", "")

    @server.tool()
    async def wait() -> str:
        """Does not answer within a test (for cancel tests)."""
        _note("NOTES_CALLS", "wait")
        await anyio.sleep(3600)
        return "too late"

    if os.environ.get("NOTES_EXTRA"):

        @server.tool()
        def extra() -> str:
            """Only there when NOTES_EXTRA is set."""
            return "extra"

    for name in os.environ.get("NOTES_TOOLS", "").split():
        read_only = ToolAnnotations(read_only_hint=True)
        server.add_tool(_answering(name), name=name, description=f"Reads {name}.", annotations=read_only)

    if sys.argv[1:2] == ["http"]:
        import socket

        import uvicorn

        # Listening before the port is announced: the test connects as soon as it reads the line.
        listener = socket.create_server(("127.0.0.1", 0))
        print(listener.getsockname()[1], flush=True)
        app = server.streamable_http_app(host="127.0.0.1")
        uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listener])
    else:
        server.run()


def _answering(name: str) -> Any:
    def tool() -> str:
        _note("NOTES_CALLS", name)
        return name

    return tool


if __name__ == "__main__":
    serve()
