"""The runner's remote endpoint over real sockets: `acp-server runner start --listen` on a free
port, the official TypeScript SDK's `experimental/ws-client` and `experimental/http-client`
running turns through it (every frame checked against the schema), a stdio front and a remote
client on one runner, and who may come in: tokens (401), Origin and Host (403), read-only
tokens (a JSON-RPC error), `pair --revoke`, and a non-loopback address without TLS."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import ssl
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from installs import CLIENTS, node_packages, unavailable
from runner_fronts import Front, cli, ended, runners, scripted_runner, wait_until
from schema_check import check_agent_frame

from acp_server.runner.tokens import READ_ONLY_REFUSED

SDK = "@agentclientprotocol/sdk"
CLIENT = CLIENTS / "remote-client.mjs"
WORDS = [f"w{i} " for i in range(200)]
SCRIPT = {
    "scenarios": [
        {"match": "stream", "steps": [{"say": word} for word in WORDS]},
        {
            "match": "slow",
            "steps": [
                *(
                    step
                    for n, word in enumerate(WORDS)
                    for step in ([{"say": word}, {"sleep": 0.01}] if n % 10 == 9 else [{"say": word}])
                ),
                {"say": "THE END"},
            ],
        },
        {"match": "long", "steps": [step for n in range(3000) for step in ({"say": f"s{n} "}, {"sleep": 0.01})]},
        {"match": "", "steps": [{"say": "short "}, {"say": "reply"}]},
    ]
}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientCapabilities": {}},
}


@pytest.fixture
def runner_env(tmp_path, monkeypatch):
    with scripted_runner(tmp_path, monkeypatch, SCRIPT) as options:
        yield options


def start(options: tuple[str, ...], listen: str = "127.0.0.1:0") -> str:
    """`runner start --listen`; the runner's /acp address."""
    done = cli("runner", "start", "--listen", listen, *options)
    assert done.returncode == 0, done.stderr
    (status,) = runners()
    return status["listen"]["acpUrl"]


def pair(*flags: str) -> dict[str, Any]:
    done = cli("pair", "--json", *flags)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def remote_client(transport: str, url: str, token: str, cwd: Path, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Run tests/clients/remote-client.mjs; its summary, with every frame it received checked."""
    node = node_packages(SDK)
    flags = []
    if transport == "ws" and _no_global_websocket(node):
        flags = ["--experimental-websocket"]
        if _no_global_websocket(node, *flags):
            unavailable("this Node.js has no WebSocket (Node >= 20.10 is needed)", node=True)
    config = {"transport": transport, "url": url, "cwd": str(cwd), "steps": steps}
    env = {**os.environ, "ACP_TOKEN": token}  # never in argv
    done = subprocess.run(
        [node, *flags, str(CLIENT), json.dumps(config)], capture_output=True, text=True, timeout=90, env=env
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["problems"] == [], summary["problems"]
    for frame in summary["received"]:
        answered = None if "method" in frame else summary["sent"].get(str(frame.get("id")))
        check_agent_frame(frame, answered)
    return summary


def _no_global_websocket(node: str, *flags: str) -> bool:
    probe = subprocess.run([node, *flags, "-e", "process.exit(typeof WebSocket === 'function' ? 0 : 1)"], check=False)
    return probe.returncode != 0


def new_session(cwd: Path) -> dict[str, Any]:
    return {"call": "session/new", "params": {"cwd": "$CWD", "mcpServers": []}}


def prompt(text: str) -> dict[str, Any]:
    return {"call": "session/prompt", "params": {"sessionId": "$SESSION", "prompt": [{"type": "text", "text": text}]}}


def results(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {step["call"]: step for step in summary["results"]}


def streamed_text(summary: dict[str, Any]) -> str:
    chunks = [u["update"] for u in summary["updates"] if u["update"]["sessionUpdate"] == "agent_message_chunk"]
    return "".join(chunk["content"]["text"] for chunk in chunks)


@pytest.mark.parametrize("transport", ["ws", "http"])
def test_a_ts_sdk_remote_client_runs_a_streamed_turn_on_a_runner_started_with_listen(tmp_path, runner_env, transport):
    url = start(runner_env)
    token = pair()["token"]
    summary = remote_client(transport, url, token, tmp_path, [new_session(tmp_path), prompt("stream please")])
    answered = results(summary)
    assert answered["initialize"]["result"]["protocolVersion"] == 1
    assert answered["session/prompt"]["result"]["stopReason"] == "end_turn"
    assert streamed_text(summary) == "".join(WORDS)  # every delta, once, in order


def test_a_stdio_front_and_a_remote_client_reach_one_runner_and_see_the_same_sessions(tmp_path, runner_env):
    url = start(runner_env)
    front = Front(*runner_env)
    try:
        session_id = front.start_session(str(tmp_path))
        front.call("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "hello"}]})
    finally:
        front.close_stdin()
        front.wait()
    assert len(runners()) == 1  # the listen address is not part of which runner a configuration gets
    load = {"call": "session/load", "params": {"sessionId": session_id, "cwd": "$CWD", "mcpServers": []}}
    listing = {"call": "session/list", "params": {}}
    summary = remote_client("http", url, pair()["token"], tmp_path, [listing, load, {"waitText": "short reply"}])
    listed = results(summary)["session/list"]["result"]["sessions"]
    assert [s["sessionId"] for s in listed] == [session_id]
    assert "error" not in results(summary)["session/load"]
    assert streamed_text(summary) == "short reply"  # the front's turn, replayed to the remote client


def test_a_read_only_token_loads_and_lists_but_its_prompts_and_changes_are_refused(tmp_path, runner_env):
    url = start(runner_env)
    made = remote_client("ws", url, pair()["token"], tmp_path, [new_session(tmp_path), prompt("hi")])
    session_id = made["sessionId"]
    watcher = pair("--read-only")
    steps = [
        {"call": "session/list", "params": {}},
        {"call": "session/load", "params": {"sessionId": session_id, "cwd": "$CWD", "mcpServers": []}},
        prompt("may I?"),
        {"call": "session/set_mode", "params": {"sessionId": "$SESSION", "modeId": "ask"}},
        {"call": "session/set_config_option", "params": {"sessionId": "$SESSION", "configId": "mode", "value": "ask"}},
        {"call": "session/cancel", "params": {"sessionId": "$SESSION"}},
        new_session(tmp_path),
    ]
    steps = json.loads(json.dumps(steps).replace("$SESSION", session_id))  # the watcher made no session
    for transport in ("ws", "http"):
        watched = [steps[0], steps[1], {"waitText": "short reply"}]
        summary = remote_client(transport, url, watcher["token"], tmp_path, watched)
        assert [s["sessionId"] for s in results(summary)["session/list"]["result"]["sessions"]] == [session_id]
        assert streamed_text(summary) == "short reply"
        summary = remote_client(transport, url, watcher["token"], tmp_path, steps)
        refused = [step for step in summary["results"] if "error" in step]
        assert [step["call"] for step in refused] == [s["call"] for s in steps[2:]]
        for step in refused:
            assert step["error"]["code"] == READ_ONLY_REFUSED
            assert step["error"]["data"] == {"method": step["call"], "readOnly": True}
    after = remote_client("http", url, pair()["token"], tmp_path, [steps[0]])
    assert len(results(after)["session/list"]["result"]["sessions"]) == 1  # nothing was created or run


async def _post(url: str, body: Any, verify: ssl.SSLContext | bool = True, **headers: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10, verify=verify) as client:
        return await client.post(url, json=body, headers=headers)


def _ws_status(url: str, **headers: str) -> int | None:
    """The HTTP status a WebSocket upgrade gets (None: it was accepted)."""

    async def attempt() -> int | None:
        try:
            async with websockets.connect(url.replace("http", "ws", 1), additional_headers=headers) as socket:
                await socket.send(json.dumps(INITIALIZE))
                json.loads(await asyncio.wait_for(socket.recv(), 10))
        except websockets.InvalidStatus as refused:
            return refused.response.status_code
        return None

    return asyncio.run(attempt())


def test_requests_and_upgrades_without_a_valid_token_get_401(runner_env):
    url = start(runner_env)
    token = pair()["token"]
    assert asyncio.run(_post(url, INITIALIZE)).status_code == 401
    assert asyncio.run(_post(url, INITIALIZE, Authorization="Bearer " + "x" * len(token))).status_code == 401
    assert asyncio.run(_post(url, INITIALIZE, Authorization=f"Bearer {token}")).status_code == 200
    assert _ws_status(url) == 401
    assert _ws_status(url, Authorization="Bearer wrong") == 401
    assert _ws_status(url, Authorization=f"Bearer {token}") is None


def test_a_foreign_origin_or_host_gets_403_and_the_servers_own_origin_is_fine(runner_env):
    url = start(runner_env)
    auth = {"Authorization": f"Bearer {pair()['token']}"}
    own = url.removesuffix("/acp")
    port = own.rpartition(":")[2]
    assert asyncio.run(_post(url, INITIALIZE, Origin="http://evil.example", **auth)).status_code == 403
    assert asyncio.run(_post(url, INITIALIZE, Origin="null", **auth)).status_code == 403
    assert asyncio.run(_post(url, INITIALIZE, Host=f"evil.example:{port}", **auth)).status_code == 403  # rebinding
    assert asyncio.run(_post(url, INITIALIZE, Origin=own, **auth)).status_code == 200
    assert asyncio.run(_post(url, INITIALIZE, Host=f"localhost:{port}", **auth)).status_code == 200
    assert _ws_status(url, Origin="http://evil.example", **auth) == 403
    assert _ws_status(url, Origin=own, **auth) is None


def test_the_streamable_http_endpoint_answers_with_the_rfds_status_codes_and_only_to_the_token_that_opened_it(
    runner_env,
):
    url = start((*runner_env, "--max-frame-bytes", "65536"))
    auth = {"Authorization": f"Bearer {pair()['token']}"}
    another = {"Authorization": f"Bearer {pair()['token']}"}  # valid, but did not open the connection

    async def exchange() -> None:
        async with httpx.AsyncClient(timeout=10, headers=auth) as client:
            opened = await client.post(url, json=INITIALIZE)
            assert opened.status_code == 200
            check_agent_frame(opened.json(), "initialize")
            connection = {"Acp-Connection-Id": opened.headers["acp-connection-id"]}
            listing = {"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}}
            assert (await client.post(url, json=listing)).status_code == 400  # no Acp-Connection-Id
            assert (await client.post(url, json=INITIALIZE, headers=connection)).status_code == 400
            assert (await client.post(url, content=b"{}", headers=connection)).status_code == 415
            huge = {**listing, "params": {"cwd": "x" * 70000}}
            assert (await client.post(url, json=huge, headers=connection)).status_code == 413  # --max-frame-bytes
            batch = await client.post(url, json=[listing], headers=connection)
            assert (batch.status_code, batch.json()["error"]["code"]) == (400, -32600)
            prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}}
            assert (await client.post(url, json=prompt, headers=connection)).status_code == 400  # no Acp-Session-Id
            assert (await client.get(url, headers=connection)).status_code == 406
            assert (await client.post(url, json=listing, headers={**connection, **another})).status_code == 404
            events = {**connection, "Accept": "text/event-stream"}
            async with client.stream("GET", url, headers=events) as stream:
                assert stream.status_code == 200
                assert stream.headers["content-type"].startswith("text/event-stream")
                assert (await client.get(url, headers=events)).status_code == 409  # one reader per stream
                assert (await client.post(url, json=listing, headers=connection)).status_code == 202
                async for line in stream.aiter_lines():
                    if line.startswith("data: "):
                        answer = json.loads(line.removeprefix("data: "))
                        check_agent_frame(answer, "session/list")
                        assert answer["id"] == 1
                        break
            assert (await client.delete(url, headers=connection)).status_code == 202
            assert (await client.post(url, json=listing, headers=connection)).status_code == 404
            assert (await client.delete(url, headers=connection)).status_code == 404

    asyncio.run(exchange())


def test_pair_revoke_ends_every_token_and_closes_the_connections_they_opened(runner_env):
    url = start(runner_env)
    token = pair()["token"]
    auth = {"Authorization": f"Bearer {token}"}

    async def revoked_while_open() -> None:
        async with websockets.connect(url.replace("http", "ws", 1), additional_headers=auth) as socket:
            await socket.send(json.dumps(INITIALIZE))
            check_agent_frame(json.loads(await asyncio.wait_for(socket.recv(), 10)), "initialize")
            done = await asyncio.to_thread(cli, "pair", "--revoke")
            assert done.returncode == 0, done.stderr
            assert "closed 1 remote connection" in done.stdout
            with pytest.raises(websockets.ConnectionClosed):
                await asyncio.wait_for(socket.recv(), 10)

    asyncio.run(revoked_while_open())
    assert asyncio.run(_post(url, INITIALIZE, **auth)).status_code == 401
    assert _ws_status(url, **auth) == 401


def test_tokens_are_kept_as_0600_digests_and_never_reach_the_log_or_argv(runner_env):
    start(runner_env)
    token = pair()["token"]
    assert len(token) >= 43  # 32 random bytes, base64url
    (status,) = runners()
    tokens = Path(status["log"]).with_suffix(".tokens")
    assert stat.S_IMODE(tokens.stat().st_mode) == 0o600
    assert token not in tokens.read_text()
    used = asyncio.run(_post(status["listen"]["acpUrl"], INITIALIZE, Authorization=f"Bearer {token}"))
    assert used.status_code == 200
    assert token not in Path(status["log"]).read_text()
    assert token not in Path(f"/proc/{status['pid']}/cmdline").read_bytes().decode(errors="replace")


def test_a_non_loopback_listen_without_tls_is_refused_in_one_line_with_exit_status_2(runner_env):
    done = cli("runner", "start", "--listen", "0.0.0.0:8765", *runner_env)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "--tls-cert" in done.stderr
    assert runners() == []
    nobody = cli("pair")
    assert nobody.returncode == 1
    assert "no runner listens" in nobody.stderr


def test_acp_server_listen_makes_the_runner_a_front_starts_listen(tmp_path, runner_env, monkeypatch):
    monkeypatch.setenv("ACP_SERVER_LISTEN", "127.0.0.1:0")
    front = Front(*runner_env)
    try:
        front.initialize()
        (status,) = runners()
        assert status["listen"]["acpUrl"].startswith("http://127.0.0.1:")
    finally:
        front.close_stdin()
        front.wait()
    done = cli("runner", "status")
    assert f"listens on {status['listen']['acpUrl']}" in done.stdout


SUBJECT = ("-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1")


def self_signed(directory: Path) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key, made by openssl."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed: no certificate to serve TLS with")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert), *SUBJECT],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)


def test_with_a_certificate_the_endpoint_serves_https_and_wss_and_still_needs_the_token(tmp_path, runner_env):
    cert, key = self_signed(tmp_path)
    done = cli("runner", "start", "--listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key, *runner_env)
    assert done.returncode == 0, done.stderr
    (status,) = runners()
    url = status["listen"]["acpUrl"]
    assert url.startswith("https://127.0.0.1:")
    trusted = ssl.create_default_context(cafile=cert)
    token = pair()["token"]
    assert asyncio.run(_post(url, INITIALIZE, verify=trusted)).status_code == 401
    assert (
        asyncio.run(
            _post(url, INITIALIZE, verify=trusted, Origin=url.removesuffix("/acp"), Authorization=f"Bearer {token}")
        ).status_code
        == 200
    )

    async def over_wss() -> dict[str, Any]:
        auth = {"Authorization": f"Bearer {token}"}
        async with websockets.connect(url.replace("https", "wss", 1), ssl=trusted, additional_headers=auth) as socket:
            await socket.send(json.dumps(INITIALIZE))
            return json.loads(await asyncio.wait_for(socket.recv(), 10))

    answer = asyncio.run(over_wss())
    check_agent_frame(answer, "initialize")
    assert answer["result"]["protocolVersion"] == 1


class Socket:
    """A raw JSON-RPC client over one WebSocket; every frame it receives is checked."""

    def __init__(self, socket: Any) -> None:
        self.socket = socket
        self.methods: dict[int, str] = {}
        self.next_id = 0

    async def request(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        self.methods[self.next_id] = method
        await self.socket.send(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}))
        return self.next_id

    async def frame(self) -> dict[str, Any]:
        frame = json.loads(await asyncio.wait_for(self.socket.recv(), 30))
        check_agent_frame(frame, None if "method" in frame else self.methods.get(frame.get("id")))
        return frame

    async def until(self, done: Any) -> list[dict[str, Any]]:
        frames = []
        while not frames or not done(frames[-1]):
            frames.append(await self.frame())
        return frames


def chunk_text(frames: list[dict[str, Any]]) -> str:
    updates = [f["params"]["update"] for f in frames if f.get("method") == "session/update"]
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")


def test_a_dropped_websocket_loses_nothing_a_reload_shows_every_update_once(tmp_path, runner_env):
    url = start(runner_env).replace("http", "ws", 1)
    auth = {"Authorization": f"Bearer {pair()['token']}"}
    initialize = {"protocolVersion": 1, "clientCapabilities": {}}

    async def drop_then_reload() -> str:
        async with websockets.connect(url, additional_headers=auth) as raw:
            first = Socket(raw)
            await first.request("initialize", initialize)
            made = await first.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
            session_id = (await first.until(lambda f: f.get("id") == made))[-1]["result"]["sessionId"]
            await first.request(
                "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "slow"}]}
            )
            await first.until(lambda f: chunk_text([f]) != "")  # the turn streams: drop the link now
        async with websockets.connect(url, additional_headers=auth) as raw:
            second = Socket(raw)
            await second.request("initialize", initialize)
            load = await second.request(
                "session/load", {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
            )
            frames = await second.until(lambda f: f.get("id") == load)
            if not chunk_text(frames).endswith("THE END"):  # the turn was still running: its live rest follows
                frames += await second.until(lambda f: chunk_text([f]).endswith("THE END"))
            return chunk_text(frames)

    assert asyncio.run(drop_then_reload()) == "".join(WORDS) + "THE END"  # each delta once, in order


def on_a_terminal(*args: str) -> str:
    """What `acp-server ARGS` shows on a pseudo-terminal, once it has exited."""
    master, slave = os.openpty()
    process = subprocess.Popen([sys.executable, "-m", "acp_server", *args], stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 4096)  # EIO (or b"") once the program has exited and closed it
        except OSError:
            chunk = b""
        if not chunk:
            break
        shown += chunk
    os.close(master)
    assert process.wait(30) == 0, shown
    return shown.decode()


def test_pair_shows_the_address_with_its_token_and_a_qr_code_on_a_terminal(runner_env):
    url = start(runner_env)
    shown = on_a_terminal("pair")
    address = url.removesuffix("/acp") + "/#token="
    assert address in shown
    assert "\u2580" in shown or "\u2584" in shown  # the QR code's half blocks
    piped = cli("pair")  # not a terminal: the address and endpoint, no QR code
    assert address in piped.stdout
    assert url in piped.stdout
    assert "\u2580" not in piped.stdout


def test_a_killed_runner_closes_remote_links_and_a_reload_with_the_same_token_shows_all_seen_then_the_interruption(
    tmp_path, runner_env
):
    url = start(runner_env).replace("http", "ws", 1)
    auth = {"Authorization": f"Bearer {pair()['token']}"}
    initialize = {"protocolVersion": 1, "clientCapabilities": {}}

    async def watch_until_killed() -> tuple[str, str]:
        async with websockets.connect(url, additional_headers=auth) as raw:
            client = Socket(raw)
            await client.request("initialize", initialize)
            made = await client.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
            session_id = (await client.until(lambda f: f.get("id") == made))[-1]["result"]["sessionId"]
            await client.request(
                "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "long"}]}
            )
            seen = await client.until(lambda f: chunk_text([f]) != "")
            (status,) = runners()
            os.kill(status["pid"], signal.SIGKILL)
            with pytest.raises(websockets.ConnectionClosed):
                while True:
                    seen.append(await client.frame())
            await asyncio.to_thread(wait_until, lambda: ended(status["pid"]), 30, "the killed runner to die")
            return session_id, chunk_text(seen)

    session_id, seen = asyncio.run(watch_until_killed())
    url = start(runner_env).replace("http", "ws", 1)  # a fresh runner, on a new port; the same token opens it

    async def reload() -> str:
        async with websockets.connect(url, additional_headers=auth) as raw:
            client = Socket(raw)
            await client.request("initialize", initialize)
            load = await client.request(
                "session/load", {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
            )
            return chunk_text(await client.until(lambda f: f.get("id") == load))

    replayed = asyncio.run(reload())
    assert replayed.startswith(seen)  # nothing the client was shown is lost
    assert "This turn was interrupted" in replayed


def test_listen_without_runner_mode_says_in_one_line_that_it_serves_stdio_only(runner_env):
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", "--listen", "127.0.0.1:0", *runner_env],
        input="",  # the editor closes stdin at once: the server exits
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    assert "--listen (ACP_SERVER_LISTEN) needs runner mode (--runner)" in done.stderr
    assert runners() == []


def test_a_read_only_connection_sending_a_method_that_is_no_string_gets_invalid_request_and_stays_open(runner_env):
    url = start(runner_env).replace("http", "ws", 1)
    auth = {"Authorization": f"Bearer {pair('--read-only')['token']}"}

    async def odd_then_ordinary() -> tuple[dict[str, Any], dict[str, Any]]:
        async with websockets.connect(url, additional_headers=auth) as raw:
            client = Socket(raw)
            await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            await client.until(lambda f: f.get("id") == 1)
            await raw.send(json.dumps({"jsonrpc": "2.0", "id": 7, "method": ["session/prompt"], "params": {}}))
            odd = await client.frame()
            listed = await client.request("session/list", {})
            return odd, (await client.until(lambda f: f.get("id") == listed))[-1]

    odd, listed = asyncio.run(odd_then_ordinary())
    assert odd["error"]["code"] == -32600
    assert listed["result"]["sessions"] == []
