"""What the terminal's ACP client serves from this machine: the server's `fs/read_text_file` and
`fs/write_text_file` from the local disk, and permission questions asked on the terminal (stdin
when it is one, else /dev/tty). Shared by `prompt` and `attach`.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio

from acp_server.protocol.answers import PermissionOption, ReadTextFileParams, WriteTextFileParams
from acp_server.protocol.models import parse
from acp_server.rpc.errors import INTERNAL_ERROR, RESOURCE_NOT_FOUND, RpcError
from acp_server.turns.files import replace_text
from adapters.base import ToolRefused
from adapters.excerpt import read_lines
from adapters.printable import printable


def question(title: str, kind: str) -> str:
    """The question's line: the title and kind cannot move the cursor, erase or forge a line."""
    return f"Permission requested: {printable(title, one_line=True)} ({printable(kind, one_line=True)})"


# --- the local file system ----------------------------------------------------------------


async def read_text_file(params: dict[str, Any]) -> dict[str, Any]:
    """`fs/read_text_file`: the file's text, from 1-based `line` for at most `limit` lines."""
    request = parse(ReadTextFileParams, params)  # -32602 naming the fields, if malformed
    return {"content": await anyio.to_thread.run_sync(_read, request.path, request.line, request.limit)}


async def write_text_file(params: dict[str, Any]) -> dict[str, Any]:
    """`fs/write_text_file`: creates or replaces the file (and missing parent directories)."""
    request = parse(WriteTextFileParams, params)
    await anyio.to_thread.run_sync(_write, request.path, request.content)
    return {}


def _read(path: str, line: int | None, limit: int | None) -> str:
    try:
        with open(path, "rb") as f:
            return read_lines(f, line=line, limit=limit, name=path, errors="strict")
    except ToolRefused as exc:
        raise RpcError(INTERNAL_ERROR, str(exc)) from None
    except FileNotFoundError:
        raise RpcError(RESOURCE_NOT_FOUND, f"Resource not found: {path}", {"uri": path}) from None
    except UnicodeDecodeError:
        raise RpcError(INTERNAL_ERROR, f"Cannot read {path}: not UTF-8 text") from None
    except OSError as exc:
        raise RpcError(INTERNAL_ERROR, f"Cannot read {path}: {exc.strerror or exc}") from None


def _write(path: str, content: str) -> None:
    try:
        replace_text(path, content)
    except ToolRefused as exc:
        raise RpcError(INTERNAL_ERROR, str(exc)) from None


# --- asking on the terminal ---------------------------------------------------------------


class Terminal:
    """Where permission questions go: stdin and stderr when stdin is a terminal, else /dev/tty."""

    def __init__(self, fd: int, *, owned: bool) -> None:
        self._fd = fd
        self._owned = owned

    @classmethod
    def open(cls) -> Terminal | None:
        if sys.stdin.isatty():
            return cls(sys.stdin.fileno(), owned=False)
        try:
            return cls(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY), owned=True)
        except OSError:
            return None

    def close(self) -> None:
        if self._owned:
            os.close(self._fd)

    def write(self, text: str) -> None:
        if self._owned:
            os.write(self._fd, text.encode())
        else:
            sys.stderr.write(text)
            sys.stderr.flush()

    async def ask(self, title: str, kind: str, options: list[PermissionOption]) -> str | None:
        """The chosen optionId; None when the terminal reached end of input."""
        menu = "".join(f"  {n}) {printable(o.name or o.option_id, one_line=True)}\n" for n, o in enumerate(options, 1))
        self.write(f"{question(title, kind)}\n{menu}")
        while True:
            self.write(f"Choose 1-{len(options)}: ")
            answer = await self._read_line()
            if answer is None:
                self.write("\n")
                return None
            if answer.strip().isdecimal() and 1 <= int(answer) <= len(options):
                return options[int(answer) - 1].option_id
            self.write("Please answer with one of the numbers shown.\n")

    async def _read_line(self) -> str | None:
        # The terminal is in canonical mode: once readable, one read returns the typed line.
        await anyio.wait_readable(self._fd)
        data = os.read(self._fd, 4096)
        return data.decode(errors="replace") if data else None
