"""Every JSON-RPC error the server answers, and that it keeps serving afterwards."""

from __future__ import annotations

import json

import pytest
from harness import RemoteError, running

from acp_server.acp.handlers import AcpAgent
from acp_server.rpc.dispatch import Dispatcher
from acp_server.rpc.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    RESOURCE_NOT_FOUND,
    RpcError,
)
from adapters.echo import EchoAdapter
from adapters.scripted import ScriptedAdapter


def echo_agent() -> AcpAgent:
    return AcpAgent(EchoAdapter())


async def test_an_unparsable_line_gets_a_parse_error_with_null_id_and_serving_goes_on(tmp_path):
    async with running(echo_agent()) as editor:
        error = await editor.expect_error(b'{"jsonrpc": "2.0", "id": 1, "method": ')
        assert error["code"] == PARSE_ERROR
        assert (await editor.initialize())["protocolVersion"] == 1


@pytest.mark.parametrize("raw", [b"\xff\xfe{}", b"[" * 100_000, b"1" * 5000, b'{"a": NaN'])
async def test_invalid_utf8_deep_nesting_and_huge_numbers_are_parse_errors(raw):
    async with running(echo_agent()) as editor:
        assert (await editor.expect_error(raw))["code"] == PARSE_ERROR
        await editor.initialize()


async def test_a_batch_is_an_invalid_request():
    async with running(echo_agent()) as editor:
        batch = json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}])
        error = await editor.expect_error(batch.encode())
        assert error["code"] == INVALID_REQUEST
        assert "batch" in error["message"]


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "1.0", "id": 7, "method": "initialize", "params": {}},
        {"jsonrpc": "2.0", "id": 7, "method": 42},
        {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": "text"},
        {"jsonrpc": "2.0", "id": {"nested": 1}, "method": "initialize"},
        {"jsonrpc": "2.0", "id": 1.5, "method": "initialize"},
        {"jsonrpc": "2.0", "id": True, "method": "initialize"},
        {"id": 3},
        "just a string",
    ],
)
async def test_an_invalid_envelope_is_an_invalid_request(message):
    async with running(echo_agent()) as editor:
        valid_id = isinstance(message, dict) and type(message.get("id")) in (int, str)
        answer = await editor.exchange(json.dumps(message).encode(), answer_id=message["id"] if valid_id else None)
        assert answer["error"]["code"] == INVALID_REQUEST
        await editor.initialize()


async def test_requests_before_initialize_are_refused():
    async with running(echo_agent()) as editor:
        with pytest.raises(RemoteError) as caught:
            await editor.request("session/new", {"cwd": "/tmp", "mcpServers": []})
        assert caught.value.code == INVALID_REQUEST


async def test_an_unknown_method_is_method_not_found_and_unknown_extension_notifications_are_ignored():
    async with running(echo_agent()) as editor:
        await editor.initialize()
        with pytest.raises(RemoteError) as caught:
            await editor.request("session/teleport", {})
        assert caught.value.code == METHOD_NOT_FOUND
        with pytest.raises(RemoteError) as caught:
            await editor.request("_vendor/thing", {})
        assert caught.value.code == METHOD_NOT_FOUND
        frames_before = len(editor.frames)
        await editor.notify("_vendor/ping", {"x": 1})
        await editor.notify("$/unknown_protocol_thing", {})
        await editor.request("authenticate", {"methodId": "none"})
        assert len(editor.frames) == frames_before + 1  # only the authenticate answer


async def test_invalid_params_name_the_fields_and_never_echo_the_values(tmp_path):
    async with running(echo_agent()) as editor:
        await editor.initialize()
        response = await editor.request_raw("session/new", {"cwd": "relative/SECRET-VALUE-1", "mcpServers": "SECRET-2"})
        error = response["error"]
        assert error["code"] == INVALID_PARAMS
        fields = {e["field"] for e in error["data"]["errors"]}
        assert fields == {"cwd", "mcpServers"}
        assert "SECRET" not in json.dumps(error)
        response = await editor.request_raw("session/prompt", {"sessionId": "x", "prompt": [{"type": "bogus-SECRET"}]})
        assert response["error"]["code"] == INVALID_PARAMS
        assert "SECRET" not in json.dumps(response["error"])
        response = await editor.request_raw("session/new", [1, 2])
        assert response["error"]["code"] == INVALID_PARAMS


async def test_initialize_answers_version_1_to_a_client_asking_for_1():
    async with running(echo_agent()) as editor:
        result = await editor.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert result["protocolVersion"] == 1
        assert result["authMethods"] == []
        assert result["agentInfo"]["name"] == "acp-server"
        caps = result["agentCapabilities"]
        assert caps["loadSession"] is False
        assert caps["promptCapabilities"] == {"image": False, "audio": False, "embeddedContext": False}


async def test_authenticate_succeeds_with_nothing_to_authenticate():
    async with running(echo_agent()) as editor:
        await editor.initialize()
        assert await editor.request("authenticate", {"methodId": "anything"}) == {}


async def test_an_unknown_session_is_resource_not_found():
    async with running(echo_agent()) as editor:
        await editor.initialize()
        with pytest.raises(RemoteError) as caught:
            await editor.prompt("sess_does_not_exist", "hi")
        assert caught.value.code == RESOURCE_NOT_FOUND


async def test_image_content_is_refused_when_the_agent_did_not_advertise_it(tmp_path):
    async with running(echo_agent()) as editor:
        await editor.initialize()
        sid = await editor.new_session(tmp_path)
        response = await editor.request_raw(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]}
        )
        assert response["error"]["code"] == INVALID_PARAMS
        result = await editor.request(
            "session/prompt",
            {
                "sessionId": sid,
                "prompt": [
                    {"type": "text", "text": "see"},
                    {"type": "resource_link", "uri": "file:///x.py", "name": "x.py"},
                ],
            },
        )
        assert result == {"stopReason": "end_turn"}
        assert editor.text(sid) == "see\nfile:///x.py"


async def test_a_line_over_the_frame_limit_gets_an_error_and_serving_goes_on():
    async with running(echo_agent(), max_frame_bytes=1000) as editor:
        error = await editor.expect_error(
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"pad": "y" * 5000}}).encode()
        )
        assert error["code"] == INVALID_REQUEST
        assert "too large" in error["message"]
        await editor.initialize()


async def test_an_unexpected_handler_exception_is_an_internal_error_without_details():
    async def broken(params):
        raise RuntimeError("database password is hunter2")

    response = await Dispatcher({"x": broken}).dispatch({"jsonrpc": "2.0", "id": 5, "method": "x", "params": {}})
    assert response == {"jsonrpc": "2.0", "id": 5, "error": {"code": INTERNAL_ERROR, "message": "Internal error"}}


async def test_a_handlers_rpc_error_reaches_the_wire_as_raised_and_params_arrive_as_one_object():
    seen = []

    async def refuse(params):
        seen.append(params)
        raise RpcError(INVALID_PARAMS, "Invalid params: path must be an absolute path")

    async def ok(params):
        seen.append(params)
        return {"fine": True}

    dispatcher = Dispatcher({"refuse": refuse, "ok": ok})
    answer = await dispatcher.dispatch({"jsonrpc": "2.0", "id": 1, "method": "refuse", "params": {"path": "x"}})
    assert answer == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": INVALID_PARAMS, "message": "Invalid params: path must be an absolute path"},
    }
    for params in ({}, None, []):  # an empty object, null, an empty array: no params
        message = {"jsonrpc": "2.0", "id": 2, "method": "ok"} | ({} if params == {} else {"params": params})
        assert await dispatcher.dispatch(message) == {"jsonrpc": "2.0", "id": 2, "result": {"fine": True}}
    assert await dispatcher.dispatch({"jsonrpc": "2.0", "method": "ok", "params": {"a": 1}}) is None
    assert seen == [{"path": "x"}, {}, {}, {}, {"a": 1}]
    by_position = await dispatcher.dispatch({"jsonrpc": "2.0", "id": 3, "method": "ok", "params": [1]})
    assert by_position["error"] == {"code": INVALID_PARAMS, "message": "Invalid params: params must be an object"}
    unknown = await dispatcher.dispatch({"jsonrpc": "2.0", "id": 4, "method": "nope", "params": {}})
    assert unknown["error"] == {"code": METHOD_NOT_FOUND, "message": "Method not found"}


def waiting_agent() -> AcpAgent:
    return AcpAgent(
        ScriptedAdapter.from_data({"scenarios": [{"match": "wait", "steps": [{"say": "started"}, {"sleep": 30}]}]})
    )


async def start_waiting_turn(editor, cwd):
    """A session whose turn has started and now waits until it is cancelled."""
    await editor.initialize()
    sid = await editor.new_session(cwd)
    task = await editor.start_prompt(sid, "wait")
    await editor.wait_for(lambda: editor.text(sid) == "started")
    return sid, task


async def test_cancel_request_answers_an_in_flight_prompt_with_request_cancelled(tmp_path):
    async with running(waiting_agent()) as editor:
        sid, task = await start_waiting_turn(editor, tmp_path)
        request_id = editor.last_id
        await editor.notify("$/cancel_request", {"requestId": request_id})
        response = await task
        assert response["error"]["code"] == REQUEST_CANCELLED
        assert await editor.prompt(sid, "hello again") == {"stopReason": "end_turn"}


async def test_a_second_request_reusing_an_in_flight_id_is_refused(tmp_path):
    async with running(waiting_agent()) as editor:
        sid, task = await start_waiting_turn(editor, tmp_path)
        in_flight = editor.last_id
        response = await editor.request_raw(
            "session/new", {"cwd": str(tmp_path), "mcpServers": []}, id=in_flight + 1000
        )
        assert "result" in response
        duplicate = json.dumps(
            {"jsonrpc": "2.0", "id": in_flight, "method": "authenticate", "params": {"methodId": "x"}}
        )
        answer = await editor.exchange(duplicate.encode(), answer_id=in_flight)
        assert answer["error"]["code"] == INVALID_REQUEST
        cancel = json.dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
        answer = await editor.exchange(cancel.encode(), answer_id=in_flight)
        assert answer["result"] == {"stopReason": "cancelled"}
        task.cancel()


@pytest.mark.parametrize("params", [{}, {"requestId": [1]}, {"requestId": None}, [], "x"])
async def test_a_malformed_cancel_request_is_ignored_and_serving_goes_on(params):
    async with running(echo_agent()) as editor:
        await editor.initialize()
        await editor.notify("$/cancel_request", params)
        assert await editor.request("authenticate", {"methodId": "x"}) == {}
