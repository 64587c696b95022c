"""A stand-in ACP server for the `prompt` client's tests: it answers each method with what the
test wrote (malformed answers included) and, during `session/prompt`, first sends the test's
requests to the client, recording the client's responses to a file, one JSON line each.

Usage: python answering_server.py PLAN.json, where the plan is
`{"answers": {method: result}, "requests": [{"method", "params"}], "record": path}`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

DEFAULTS: dict[str, Any] = {
    "initialize": {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []},
    "session/new": {"sessionId": "s1"},
    "session/prompt": {"stopReason": "end_turn"},
}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def ask_client(requests: list[dict[str, Any]], record: str) -> None:
    with open(record, "a", encoding="utf-8") as out:
        for n, request in enumerate(requests):
            send({"jsonrpc": "2.0", "id": f"ask-{n}", **request})
            for line in sys.stdin:
                message = json.loads(line)
                if message.get("id") == f"ask-{n}" and "method" not in message:
                    out.write(json.dumps(message) + "\n")
                    break


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        plan = json.load(f)
    answers = {**DEFAULTS, **plan.get("answers", {})}
    for line in sys.stdin:
        message = json.loads(line)
        method = message.get("method")
        if "id" not in message or method is None:
            continue
        if method == "session/prompt":
            ask_client(plan.get("requests", []), plan.get("record", "/dev/null"))
        send({"jsonrpc": "2.0", "id": message["id"], "result": answers.get(method, {})})


if __name__ == "__main__":
    main()
