"""One Hermes goal end to end: `acp-server --agent hermes` over real pipes, on the fake model on
127.0.0.1 (tests/fake_openai.py), which answers turn N "Step N done." and Hermes' judge "done"
once the answer it is shown is turn `--turns`'s. Prints what `acp-server runs` and `acp-server
show` print of the session, then the figures: the turns, the time from `/goal` to its answer,
and the turns' times (each its run, from its prompt to the judge's verdict).

    .venv/bin/python bench/hermes_goal.py [--turns 5]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent.parent / "tests")]

from fake_endpoint import Stream  # noqa: E402
from fake_openai import FakeOpenAI, reply  # noqa: E402
from hermes_home import make_home  # noqa: E402

from bench._common import CHILD_ENV, PY, LineClient, child, deadline, install_cleanup  # noqa: E402

JUDGE = "You are a strict judge"


class Model:
    def __init__(self, turns: int) -> None:
        self.turns, self.done_at = 0, turns

    def __call__(self, body: dict[str, Any]) -> Stream:
        messages = body["messages"]
        if str(messages[0].get("content", "")).startswith(JUDGE):
            done = f"Step {self.done_at} done." in str(messages[-1]["content"])
            reason = f"{self.turns} of {self.done_at} steps are done"
            return reply(json.dumps({"done": done, "reason": reason}))
        self.turns += 1
        return reply(f"Step {self.turns} done.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=5, help="the turn the judge finds the goal done after")
    args = parser.parse_args()
    install_cleanup()
    with tempfile.TemporaryDirectory(prefix="hermes-goal-") as tmp, FakeOpenAI() as fake:
        fake.responder = Model(args.turns)
        env = CHILD_ENV | {"HERMES_HOME": str(make_home(Path(tmp), fake.base_url))}
        db = str(Path(tmp) / "journal.db")
        CHILD_ENV.update(env)
        with child([PY, "-m", "acp_server", "--agent", "hermes", "--db", db], "acp-server", tmp) as proc:
            client = LineClient(proc, "acp-server")
            with deadline(proc, 120, "the goal"):
                client.initialize()
                sid = client.new_session(tmp)
                started = time.monotonic()
                prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": f"/goal take {args.turns} steps"}]}
                answer = client.wait_for(client.send("session/prompt", prompt))
                elapsed = time.monotonic() - started
        for command in ("runs", "show"):
            shown = subprocess.run(
                [PY, "-m", "acp_server", command, sid, "--db", db], capture_output=True, text=True, check=True, env=env
            )
            print(f"$ acp-server {command} {sid[:12]}\n{shown.stdout}")
        with sqlite3.connect(db) as conn:
            runs = conn.execute("SELECT ended_at - started_at FROM runs ORDER BY seq_no").fetchall()
    turns = [seconds for (seconds,) in runs[1:]]
    print(
        f"{answer['stopReason']}: {len(turns)} turns in {elapsed:.2f} s from /goal to its answer; the /goal run "
        f"{runs[0][0] * 1000:.0f} ms, the first turn {turns[0] * 1000:.0f} ms (the session's first: Hermes loads), "
        f"the later ones {statistics.median(turns[1:]) * 1000:.0f} ms each (median, the judge's request included)"
    )


if __name__ == "__main__":
    main()
