"""The raw floor of bench/compare.py: no protocol library, no journal, no agent. It answers
`initialize` and `session/new` minimally and, for a prompt whose text is `stream N TEXT`, writes
N compact `agent_message_chunk` session/update frames (the same bytes each time, prepared once)
and the prompt's response to its stdout pipe as fast as it can. What is left of the time is
the pipe and the client.

    .venv/bin/python bench/raw_floor.py
"""

from __future__ import annotations

import json
import sys


def frame(message: dict) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def main() -> None:
    # Buffered whatever PYTHONUNBUFFERED says: a 64 KiB buffer, flushed after each response.
    out = open(sys.stdout.fileno(), "wb", buffering=1 << 16, closefd=False)  # noqa: SIM115
    session_id = "sess_0123456789abcdef0123456789abcdef"
    for line in sys.stdin.buffer:
        request = json.loads(line)
        method, request_id = request.get("method"), request.get("id")
        if request_id is None:
            continue
        if method == "initialize":
            result: dict = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
        elif method == "session/new":
            result = {"sessionId": session_id}
        elif method == "session/prompt":
            text = "\n".join(b.get("text", "") for b in request["params"]["prompt"])
            words = text.split(" ", 2)
            count, delta = (int(words[1]), words[2]) if words[0] == "stream" and len(words) == 3 else (1, text)
            chunk = frame(
                {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {
                        "sessionId": request["params"]["sessionId"],
                        "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": delta}},
                    },
                }
            )
            write = out.write
            for _ in range(count):
                write(chunk)
            result = {"stopReason": "end_turn"}
        else:
            out.write(
                frame({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}})
            )
            out.flush()
            continue
        out.write(frame({"jsonrpc": "2.0", "id": request_id, "result": result}))
        out.flush()


if __name__ == "__main__":
    main()
