"""The fake model of bench/hermes_bench.py in a process of its own: tests/fake_openai.py on
127.0.0.1, answering every chat with DELTAS deltas of "abc". Prints its base URL, then serves
until its stdin closes.

In the bench's own process the fake would share a GIL with the client reading the subject's
frames, so a subject that streams frames while it runs (acp-server) would slow its own model,
and Hermes alone (which prints one line at the end of a turn) would not: a real model is
another machine.

    python bench/_fake_model.py DELTAS
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fake_openai import FakeOpenAI, reply


def main() -> None:
    deltas = int(sys.argv[1])
    with FakeOpenAI() as fake:
        fake.responder = lambda body: reply("abc" * deltas, usage={"prompt_tokens": 10, "completion_tokens": 5})
        print(fake.base_url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
