"""Hostile input against one long-lived server process: malformed and hostile frames get the
right error codes, nothing but JSON is written, the server never dies, and it still serves a
normal prompt afterwards. `ACP_FUZZ_EXAMPLES=5000` runs a larger campaign."""

from __future__ import annotations

import json
import os
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stdio_server import StdioServer

from acp_server.rpc.errors import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR

MAX_FRAME = 4096
EXAMPLES = int(os.environ.get("ACP_FUZZ_EXAMPLES", "150"))
METHODS = [
    "initialize",
    "authenticate",
    "session/new",
    "session/load",
    "session/resume",
    "session/list",
    "session/close",
    "session/delete",
    "session/prompt",
    "session/cancel",
    "session/set_mode",
    "session/set_config_option",
    "$/cancel_request",
    "_vendor/x",
    "unknown/method",
    "",
    "session/update",
]

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=20,
)
ids = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=20),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(), max_size=2),
)
params = st.one_of(
    json_value,
    st.fixed_dictionaries(
        {},
        optional={
            "sessionId": st.one_of(st.text(max_size=20), json_value),
            "cwd": st.one_of(st.just("/tmp"), json_value),
            "mcpServers": st.one_of(st.just([]), json_value),
            "prompt": st.one_of(st.just([{"type": "text", "text": "x"}]), json_value),
            "protocolVersion": json_value,
            "modeId": json_value,
            "configId": json_value,
            "value": json_value,
            "requestId": json_value,
            "cursor": json_value,
        },
    ),
)
envelopes = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.one_of(st.just("2.0"), json_value),
        "id": ids,
        "method": st.one_of(st.sampled_from(METHODS), json_value),
        "params": params,
        "result": json_value,
        "error": json_value,
    },
)


def encoded(message) -> bytes:
    return json.dumps(message).encode()


frames = st.one_of(
    envelopes.map(encoded),
    json_value.map(encoded),
    st.binary(max_size=200).filter(lambda b: b"\n" not in b),
    st.integers(min_value=1, max_value=3000).map(lambda depth: b"[" * depth + b"]" * depth),
    st.integers(min_value=MAX_FRAME + 1, max_value=3 * MAX_FRAME).map(lambda n: b'{"pad": "' + b"x" * n + b'"}'),
    st.sampled_from(
        [
            b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": NaN}}',
            b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}\xff',
            b"\xef\xbb\xbf{}",
            b"   ",
            b"null",
            b"[]",
            b'"\\ud800"',
        ]
    ),
)


def expected_null_id_errors(frame: bytes) -> set[int] | None:
    """The error codes a frame may get with `id: null`, when that can be told from its bytes.
    Nesting deeper than the parser's stack is a parse error, however valid the JSON."""
    if len(frame) > MAX_FRAME:
        return {INVALID_REQUEST}
    if not frame.strip():
        return None
    try:
        value = json.loads(frame.decode("utf-8"), parse_constant=lambda name: 1 / 0)
    except (ValueError, RecursionError, ZeroDivisionError):
        return {PARSE_ERROR}
    if frame.count(b"[") + frame.count(b"{") > 300:
        return {PARSE_ERROR, INVALID_REQUEST} if not isinstance(value, dict) else {PARSE_ERROR}
    return {INVALID_REQUEST} if not isinstance(value, dict) else None


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = tmp_path_factory.mktemp("fuzz")
    srv = StdioServer("--agent", "echo", "--max-frame-bytes", str(MAX_FRAME), "--db", str(home / "j.db"), cwd=str(home))
    srv.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    yield srv
    srv.kill()


def answered_id(message) -> tuple[bool, object]:
    """Whether the server must answer this message with its own id (every request, valid or not,
    whose id could be read), and that id."""
    if not isinstance(message, dict) or "id" not in message:
        return False, None
    key = message["id"]
    if not (key is None or isinstance(key, str) or (type(key) is int and -(2**63) <= key < 2**63)):
        return False, None
    is_response = "method" not in message and ("result" in message or "error" in message)
    return not is_response, key


def exchange(server: StdioServer, frame: bytes) -> list[dict]:
    """Send `frame`, wait for its own answer when it is a request, then a ping; return every frame
    written before the ping's answer."""
    try:
        message = json.loads(frame, parse_constant=lambda name: 1 / 0)
    except (ValueError, RecursionError, ZeroDivisionError):
        message = None
    expects, key = answered_id(message)
    if expects and isinstance(message.get("method"), str):
        server.methods[key] = message["method"]
    server.send_raw(frame + b"\n")
    seen = []
    if expects and len(frame) <= MAX_FRAME:
        seen += read_until(server, frame, lambda answer: "method" not in answer and answer.get("id") == key)
    ping = f"ping-{uuid.uuid4().hex}"
    server.methods[ping] = "authenticate"
    server.send({"jsonrpc": "2.0", "id": ping, "method": "authenticate", "params": {"methodId": "x"}})
    seen += read_until(server, frame, lambda answer: answer.get("id") == ping)
    assert seen[-1] == {"jsonrpc": "2.0", "id": ping, "result": {}}
    return seen[:-1]


def read_until(server: StdioServer, frame: bytes, done) -> list[dict]:
    seen = []
    while True:
        answer = server.next_frame(timeout=20)
        if answer is None:
            server.wait(timeout=10)
            raise AssertionError(
                f"the server closed its output after {frame[:300]!r}; its stderr ends with:\n"
                f"{server.stderr.decode(errors='replace')[-3000:]}"
            )
        seen.append(answer)
        if done(answer):
            return seen


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(frame=frames)
def test_hostile_frames_get_precise_errors_and_never_break_the_server(server, frame):
    answers = exchange(server, frame)
    assert server.process.poll() is None, "the server died"
    assert all(a.get("error", {}).get("code") != INTERNAL_ERROR for a in answers), answers
    codes = expected_null_id_errors(frame)
    if codes is not None:
        assert len(answers) == 1 and answers[0]["id"] is None and answers[0]["error"]["code"] in codes, answers
    expects, key = answered_id(json.loads(frame) if codes is None and frame.strip() else None)
    if expects:
        assert [a.get("id") for a in answers] == [key], answers


def test_after_the_campaign_a_normal_prompt_still_works(server, tmp_path):
    sid = server.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
    result = server.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "still here"}]})
    assert result == {"stopReason": "end_turn"}
    texts = [
        f["params"]["update"]["content"]["text"]
        for f in server.frames
        if f.get("method") == "session/update"
        and f["params"]["sessionId"] == sid
        and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    ]
    assert texts == ["still here"]
