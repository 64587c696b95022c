"""A program on a real pseudo-terminal (its stdin, stdout and stderr), as a person runs it:
wait for what it shows, type lines, read the rest and its exit status."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

ACP = [sys.executable, "-m", "acp_server"]
TIMEOUT = 30


class Terminal:
    """`acp-server ARGS... setup` with a pseudo-terminal as its stdin, stdout and stderr."""

    def __init__(self, *args: str) -> None:
        self.master, slave = os.openpty()
        self.process = subprocess.Popen(
            [*ACP, *args, "setup"], stdin=slave, stdout=slave, stderr=slave, start_new_session=True
        )
        os.close(slave)
        self.seen = b""

    def expect(self, text: str) -> str:
        """Everything shown up to and including `text`."""
        deadline = time.monotonic() + TIMEOUT
        while text.encode() not in self.seen:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {text!r} within {TIMEOUT} s; the terminal shows {self.seen.decode()!r}"
            if select.select([self.master], [], [], remaining)[0]:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:  # EIO: the program ended and closed the terminal
                    chunk = b""
                assert chunk, f"the terminal closed before {text!r}; it shows {self.seen.decode()!r}"
                self.seen += chunk
        return self.seen.decode()

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    def finish(self) -> int:
        """The exit status, once everything it printed has been read."""
        try:
            while select.select([self.master], [], [], TIMEOUT)[0] and (chunk := os.read(self.master, 4096)):
                self.seen += chunk
        except OSError:
            pass
        code = self.process.wait(TIMEOUT)
        os.close(self.master)
        return code
