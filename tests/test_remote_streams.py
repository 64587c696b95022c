"""The runner's Streamable HTTP profile spoken by a raw HTTP client on 127.0.0.1 (httpx): SSE
events carry ids, and a session stream dropped mid-turn is resumed with `Last-Event-ID`, no
reload, every update exactly once; where TLS is on the same profile is served over HTTP/2 (and
HTTP/1.1 still); WebSocket frames go uncompressed. Every frame the runner writes is checked
against the schema."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
import websockets
from runner_fronts import cli, runners, scripted_runner
from schema_check import check_agent_frame
from test_remote_endpoint import self_signed

DEADLINE = 60
INIT = {"protocolVersion": 1, "clientCapabilities": {}}
WORDS = [f"w{i} " for i in range(300)]
SCRIPT = {
    "scenarios": [
        {"match": "slow", "steps": [step for word in WORDS for step in ({"say": word}, {"sleep": 0.005})]},
        {"match": "", "steps": [{"say": "short "}, {"say": "reply"}]},
    ]
}


@pytest.fixture
def runner_env(tmp_path, monkeypatch):
    with scripted_runner(tmp_path, monkeypatch, SCRIPT) as options:
        yield options


def listening(*options: str) -> tuple[str, str]:
    """`runner start --listen` with `options`; its /acp address and a full token."""
    done = cli("runner", "start", "--listen", "127.0.0.1:0", *options)
    assert done.returncode == 0, done.stderr
    (status,) = runners()
    paired = cli("pair", "--json")
    assert paired.returncode == 0, paired.stderr
    return status["listen"]["acpUrl"], json.loads(paired.stdout)["token"]


class HttpClient:
    """One ACP connection over Streamable HTTP: POSTs, and SSE streams read event by event."""

    def __init__(self, client: httpx.AsyncClient, url: str, token: str) -> None:
        self.client, self.url = client, url
        self.headers = {"Authorization": f"Bearer {token}"}
        self.methods: dict[int, str] = {}
        self.next_id = 0
        self.versions: set[str] = set()

    async def initialize(self) -> dict[str, Any]:
        self.methods[0] = "initialize"
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}
        answer = await self.client.post(self.url, json=body, headers=self.headers)
        assert answer.status_code == 200, answer.text
        self.versions.add(answer.http_version)
        self.headers["Acp-Connection-Id"] = answer.headers["acp-connection-id"]
        frame = answer.json()
        check_agent_frame(frame, "initialize")
        return frame

    async def send(self, method: str, params: dict[str, Any], session: str | None = None) -> int:
        self.next_id += 1
        self.methods[self.next_id] = method
        headers = {**self.headers, **({"Acp-Session-Id": session} if session else {})}
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        answer = await self.client.post(self.url, json=body, headers=headers)
        assert answer.status_code == 202, answer.text
        self.versions.add(answer.http_version)
        return self.next_id

    async def events(
        self, session: str | None = None, last_event_id: str | None = None
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """(id, frame) for each event of a stream, until the caller stops reading it."""
        headers = {**self.headers, "Accept": "text/event-stream"}
        if session:
            headers["Acp-Session-Id"] = session
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        async with self.client.stream("GET", self.url, headers=headers) as stream:
            assert stream.status_code == 200, await stream.aread()
            self.versions.add(stream.http_version)
            event_id, data = "", ""
            async for line in stream.aiter_lines():
                if line.startswith("id: "):
                    event_id = line[4:]
                elif line.startswith("data: "):
                    data = line[6:]
                elif not line and data:
                    frame = json.loads(data)
                    check_agent_frame(frame, None if "method" in frame else self.methods.get(frame.get("id")))
                    yield event_id, frame
                    event_id, data = "", ""


async def answer_on(events: AsyncIterator[tuple[str, dict[str, Any]]], request_id: int) -> dict[str, Any]:
    async for _event_id, frame in events:
        if frame.get("id") == request_id and "method" not in frame:
            return frame
    raise AssertionError("the stream ended before the answer")


def within_deadline(work: Any, *args: Any) -> Any:
    """Run `work(*args)` in a fresh event loop, failing after DEADLINE seconds."""

    async def bounded() -> Any:
        with anyio.fail_after(DEADLINE):
            return await work(*args)

    return anyio.run(bounded)


def chunk(frame: dict[str, Any]) -> str | None:
    update = frame.get("params", {}).get("update", {}) if frame.get("method") == "session/update" else {}
    return update["content"]["text"] if update.get("sessionUpdate") == "agent_message_chunk" else None


async def new_session(http: HttpClient, cwd: str) -> tuple[str, AsyncIterator[tuple[str, dict[str, Any]]]]:
    """A new session; its id and the connection's stream, open."""
    own = http.events()
    made = await http.send("session/new", {"cwd": cwd, "mcpServers": []})
    answer = await answer_on(own, made)
    return answer["result"]["sessionId"], own


def test_a_session_stream_dropped_mid_turn_resumes_from_last_event_id_with_every_update_once(tmp_path, runner_env):
    url, token = listening(*runner_env)

    async def drop_and_resume() -> tuple[list[str], dict[str, Any], list[str]]:
        async with httpx.AsyncClient(timeout=30) as client:
            http = HttpClient(client, url, token)
            await http.initialize()
            session_id, own = await new_session(http, str(tmp_path))
            seen: list[tuple[str, str | None]] = []  # (event id, delta text) as read
            stream = http.events(session_id)
            prompted = await http.send(
                "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "slow"}]}, session_id
            )
            async for event_id, frame in stream:
                seen.append((event_id, chunk(frame)))
                if sum(1 for _, text in seen if text is not None) == 20:
                    break  # the stream drops mid-turn...
            await stream.aclose()
            # ...and the last ten deltas the server wrote were lost on the way (as events in flight
            # are when a link drops): the client resumes after the tenth it got.
            while sum(1 for _, text in seen if text is not None) > 10 or seen[-1][1] is None:
                seen.pop()
            resumed = http.events(session_id, last_event_id=seen[-1][0])
            async for event_id, frame in resumed:
                seen.append((event_id, chunk(frame)))
                if frame.get("id") == prompted:
                    await resumed.aclose()
                    await own.aclose()
                    texts = [text for _, text in seen if text is not None]
                    return texts, frame, [event_id for event_id, _ in seen]
        raise AssertionError("the resumed stream ended before the prompt's answer")

    texts, answer, ids = within_deadline(drop_and_resume)
    assert answer["result"]["stopReason"] == "end_turn"
    assert "".join(texts) == "".join(WORDS)  # every delta once, in order: none lost, none twice
    assert [int(i) for i in ids] == list(range(int(ids[0]), int(ids[0]) + len(ids)))


def test_a_second_reader_without_last_event_id_is_refused_and_an_id_no_longer_kept_gets_409(tmp_path, runner_env):
    url, token = listening(*runner_env)

    async def attempts() -> tuple[int, int]:
        async with httpx.AsyncClient(timeout=30) as client:
            http = HttpClient(client, url, token)
            await http.initialize()
            _session_id, own = await new_session(http, str(tmp_path))
            headers = {**http.headers, "Accept": "text/event-stream"}
            second = await client.get(url, headers=headers)
            future = await client.get(url, headers={**headers, "Last-Event-ID": "999999"})
            await own.aclose()
            return second.status_code, future.status_code

    assert within_deadline(attempts) == (409, 409)


def test_with_tls_on_the_endpoint_speaks_http2_and_still_http1(tmp_path, runner_env):
    cert, key = self_signed(tmp_path)
    url, token = listening("--tls-cert", cert, "--tls-key", key, *runner_env)
    trusted = ssl.create_default_context(cafile=cert)

    async def a_turn(http2: bool) -> tuple[set[str], str]:
        async with httpx.AsyncClient(timeout=30, verify=trusted, http1=not http2, http2=http2) as client:
            http = HttpClient(client, url, token)
            await http.initialize()
            session_id, own = await new_session(http, str(tmp_path))
            stream = http.events(session_id)
            prompted = await http.send(
                "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}, session_id
            )
            texts = []
            async for _event_id, frame in stream:
                if (text := chunk(frame)) is not None:
                    texts.append(text)
                if frame.get("id") == prompted:
                    break
            await stream.aclose()
            await own.aclose()
            return http.versions, "".join(texts)

    assert within_deadline(a_turn, True) == ({"HTTP/2"}, "short reply")
    assert within_deadline(a_turn, False) == ({"HTTP/1.1"}, "short reply")


def test_websocket_frames_are_not_compressed_per_watcher(runner_env):
    """A client offering permessage-deflate (as websockets and browsers do) is not given it: the
    runner would compress every frame once per watcher, in the thread that feeds the editor."""
    url, token = listening(*runner_env)

    async def negotiated() -> tuple[str | None, dict[str, Any]]:
        auth = {"Authorization": f"Bearer {token}"}
        async with websockets.connect(url.replace("http", "ws", 1), additional_headers=auth) as socket:
            assert "permessage-deflate" in (socket.request.headers.get("Sec-WebSocket-Extensions") or "")
            await socket.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}))
            answer = json.loads(await socket.recv())
            check_agent_frame(answer, "initialize")
            return socket.response.headers.get("Sec-WebSocket-Extensions"), answer

    extensions, answer = within_deadline(negotiated)
    assert extensions is None
    assert answer["result"]["protocolVersion"] == 1
