"""The fake model of bench/hermes_bench.py in a process of its own: tests/fake_openai.py on
127.0.0.1, answering every chat with DELTAS deltas of "abc", the whole stream in one write.
Prints its base URL, then serves until its stdin closes.

A real model is another machine; this one shares two cores with the subject. Written chunk by
chunk (a JSON encoding and a write each) it used a fifth of a core, and a subject with more
threads of its own (acp-server's loop and journal, the client reading its frames) left it less
of one: the model, not the subject, then set the pace. The same in the bench's own process,
where it would share a GIL with that client. Written at once, the subject reads as fast as it
parses, and the ratio to Hermes alone is the subject's.

    python bench/_fake_model.py DELTAS
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fake_openai import FakeOpenAI, reply


def main() -> None:
    deltas = int(sys.argv[1])
    with FakeOpenAI() as fake:
        stream = reply("abc" * deltas, usage={"prompt_tokens": 10, "completion_tokens": 5})
        fake.responder = lambda body: replace(stream, burst=True)
        print(fake.base_url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
