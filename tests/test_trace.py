"""`--trace FILE`: every frame in both directions, in order, as redacted JSON lines; and logging
that keeps library loggers (aiosqlite logs every statement) at WARNING unless asked for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from stdio_server import StdioServer

from journal.redact import redact

SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123"
SCRIPT = {
    "scenarios": [
        {
            "match": "",
            "steps": [
                {"say": "Writing it.\n"},
                {
                    "tool": "Write notes.txt",
                    "kind": "edit",
                    "input": {"path": "notes.txt", "api_key": SECRET},
                    "ask": True,
                    "write_file": {"path": "notes.txt", "content": "hello\n"},
                },
                {"say": "Done."},
            ],
        }
    ]
}


class RecordingServer(StdioServer):
    """Remembers every line sent, to compare with the trace."""

    sent: list[bytes]

    def send_raw(self, data: bytes) -> None:
        self.__dict__.setdefault("sent", []).append(data)
        super().send_raw(data)


def run_traced_session(tmp_path: Path, *extra: str) -> tuple[RecordingServer, list[dict[str, Any]]]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    trace = tmp_path / "trace.jsonl"
    args = ("--agent", "scripted", "--script", str(script), "--trace", str(trace), *extra)
    server = RecordingServer(*args, cwd=str(tmp_path))
    try:
        sid = server.start_session(str(tmp_path))
        prompt = [{"type": "text", "text": f"use the key {SECRET} please"}]
        assert server.call("session/prompt", {"sessionId": sid, "prompt": prompt}) == {"stopReason": "end_turn"}
        server.send_raw(f"this is not JSON, token={SECRET}\n".encode())
        assert server.next_frame() is not None  # the parse error
        server.close_stdin()
        assert server.wait() == 0
        server.remaining_frames()
    finally:
        server.kill()
    text = trace.read_text()
    assert SECRET not in text
    return server, [json.loads(line) for line in text.splitlines()]


def test_the_trace_holds_every_frame_in_both_directions_in_order_with_secrets_redacted(tmp_path):
    server, lines = run_traced_session(tmp_path)
    incoming = [line for line in lines if line["dir"] == "in"]
    outgoing = [line for line in lines if line["dir"] == "out"]
    assert [line.get("frame", line.get("raw")) for line in incoming] == [
        redact(json.loads(sent)) for sent in server.sent[:-1]
    ] + ["this is not JSON, token=[REDACTED]"]
    assert [line["frame"] for line in outgoing] == [redact(frame) for frame in server.frames]
    assert any(frame.get("method") == "session/request_permission" for frame in server.frames)
    times = [line["t"] for line in lines]
    assert times == sorted(times) and all(isinstance(t, float) for t in times)
    position = {(line["dir"], json.dumps(line.get("frame"))): index for index, line in enumerate(lines)}
    for index, line in enumerate(lines):
        frame = line.get("frame") or {}
        if "method" not in frame and "id" in frame and frame["id"] is not None:
            asked_by = "out" if line["dir"] == "in" else "in"
            (request,) = [
                other["frame"]
                for other in lines
                if other["dir"] == asked_by
                and (other.get("frame") or {}).get("id") == frame["id"]
                and "method" in other["frame"]
            ]
            assert position[(asked_by, json.dumps(request))] < index, f"{frame} is traced before its request"


def test_debug_logging_leaves_the_library_loggers_out_unless_they_are_asked_for(tmp_path):
    server, _lines = run_traced_session(tmp_path, "--log-level", "DEBUG")
    log = server.stderr.decode()
    assert "acp_server" in log or "journal" in log
    assert " aiosqlite:" not in log and " asyncio:" not in log
    server, _lines = run_traced_session(tmp_path, "--log-level", "DEBUG", "--log-libraries", "aiosqlite")
    assert " aiosqlite:" in server.stderr.decode()


def test_an_unwritable_trace_file_is_a_start_up_error(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", "--agent", "echo", "--trace", str(tmp_path / "missing" / "t.jsonl")],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "ACP_SERVER_DB": str(tmp_path / "j.db")},
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "--trace: cannot append to" in done.stderr


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_the_prompt_client_passes_the_trace_on_to_its_server(tmp_path, how):
    trace = tmp_path / "trace.jsonl"
    flag = ["--trace", str(trace)] if how == "flag" else []
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", "prompt", "--agent", "echo", *flag, "hello"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        env={**os.environ, **({"ACP_SERVER_TRACE": str(trace)} if how == "environment" else {})},
    )
    assert done.returncode == 0, done.stderr
    methods = [json.loads(line)["frame"].get("method") for line in trace.read_text().splitlines()]
    assert methods[:3] == ["initialize", None, "session/new"]
    assert "session/prompt" in methods
