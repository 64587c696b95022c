"""The params of `initialize`, `session/new`, `session/load`/`resume` and `session/prompt` as the
start-up path reads them (without pydantic, protocol/opening.py) agree with their models: the same values, or
the same -32602."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_server.protocol.models import InitializeParams, LoadSessionParams, NewSessionParams, PromptParams, parse
from acp_server.protocol.opening import (
    InitializeRequest,
    LoadSessionRequest,
    NewSessionRequest,
    PromptRequest,
    initialize_params,
    load_session_params,
    new_session_params,
    prompt_params,
)
from acp_server.rpc.errors import RpcError

json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.floats(allow_nan=False), st.text(max_size=8)
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)
paths = st.one_of(st.sampled_from(["/", "/tmp", "/a/../b/", "//x/./y", "relative", "", "/a\udc80"]), json_value)
versions = st.one_of(st.integers(-3, 70000), st.sampled_from([True, False, 1.0, 1.5, "1", None]), json_value)
servers = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "name": st.one_of(st.text(max_size=5), json_value),
            "type": st.one_of(st.sampled_from(["stdio", "http", "sse", "ws", "STDIO"]), json_value),
            "command": st.text(max_size=5),
            "url": st.text(max_size=5),
            "args": json_value,
            "mcp_type": json_value,
        },
    ),
    json_value,
)


def outcome(read, params):
    try:
        return read(params)
    except RpcError as exc:
        return ("error", exc.code, exc.message, exc.data)


def by_model_initialize(params) -> InitializeRequest:
    model = parse(InitializeParams, params)
    return InitializeRequest(model.protocol_version, model.client_capabilities, model.client_info)


def by_model_new_session(params) -> NewSessionRequest:
    model = parse(NewSessionParams, params)
    dirs = model.additional_directories
    servers = tuple(s.model_dump(by_alias=True) for s in model.mcp_servers)
    return NewSessionRequest(model.cwd, servers, None if dirs is None else tuple(dirs))


@settings(max_examples=400, deadline=None)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "protocolVersion": versions,
            "clientCapabilities": st.one_of(st.dictionaries(st.text(max_size=4), json_value, max_size=2), json_value),
            "clientInfo": st.one_of(st.just({"name": "zed", "version": "1"}), json_value),
            "protocol_version": versions,
            "client_info": json_value,
            "other": json_value,
        },
    )
)
def test_initialize_params_agree_with_the_model(params):
    assert outcome(initialize_params, params) == outcome(by_model_initialize, params)


def by_model_load_session(params) -> LoadSessionRequest:
    model = parse(LoadSessionParams, params)
    dirs = model.additional_directories
    servers = tuple(s.model_dump(by_alias=True) for s in model.mcp_servers)
    return LoadSessionRequest(model.session_id, model.cwd, servers, None if dirs is None else tuple(dirs))


where = {
    "cwd": paths,
    "mcpServers": st.one_of(st.lists(servers, max_size=3), json_value),
    "additionalDirectories": st.one_of(st.lists(paths, max_size=3), json_value),
    "mcp_servers": st.lists(servers, max_size=2),
    "additional_directories": st.lists(paths, max_size=2),
    "other": json_value,
}


@settings(max_examples=400, deadline=None)
@given(st.fixed_dictionaries({}, optional=where | {"sessionId": st.one_of(st.text(max_size=6), json_value)}))
def test_load_and_resume_params_agree_with_the_model(params):
    assert outcome(load_session_params, params) == outcome(by_model_load_session, params)


@settings(max_examples=400, deadline=None)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "cwd": paths,
            "mcpServers": st.one_of(st.lists(servers, max_size=3), json_value),
            "additionalDirectories": st.one_of(st.lists(paths, max_size=3), json_value),
            "mcp_servers": st.lists(servers, max_size=2),
            "additional_directories": st.lists(paths, max_size=2),
            "other": json_value,
        },
    )
)
def test_new_session_params_agree_with_the_model(params):
    assert outcome(new_session_params, params) == outcome(by_model_new_session, params)


@pytest.mark.parametrize(
    "params",
    [
        {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}}, "clientInfo": {"name": "zed"}},
        {"protocolVersion": 65535},
    ],
)
def test_what_clients_send_to_initialize_is_read_without_the_model(params, monkeypatch):
    monkeypatch.setattr("acp_server.protocol.models.parse", refuse)
    assert initialize_params(params) == by_model_initialize(params)


def test_what_clients_send_to_session_new_load_and_resume_is_read_without_the_model(monkeypatch):
    params = {
        "cwd": "/work/a/../b/",
        "mcpServers": [{"name": "files", "command": "x", "args": [], "env": []}, {"name": "web", "type": "http"}],
        "additionalDirectories": ["/srv/./data"],
    }
    expected = by_model_new_session(params)
    monkeypatch.setattr("acp_server.protocol.models.parse", refuse)
    assert new_session_params(params) == expected
    assert expected.mcp_servers[0] == {"name": "files", "type": "stdio", "command": "x", "args": [], "env": []}
    loaded = load_session_params({"sessionId": "sess_1", **params})
    assert loaded == LoadSessionRequest("sess_1", *expected)
    assert load_session_params({"sessionId": "sess_1", "cwd": "/w"}) == LoadSessionRequest("sess_1", "/w", (), None)


def by_model_prompt(params) -> PromptRequest:
    model = parse(PromptParams, params)
    return PromptRequest(model.session_id, tuple(b.model_dump(by_alias=True, exclude_none=True) for b in model.prompt))


blocks = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "type": st.one_of(st.sampled_from(["text", "resource_link", "image", "resource", "TEXT"]), json_value),
            "text": st.one_of(st.text(max_size=5), json_value),
            "uri": st.one_of(st.just("file:///a.py"), json_value),
            "name": st.one_of(st.text(max_size=5), json_value),
            "data": st.just("aGk="),
            "mimeType": st.just("image/png"),
            "mime_type": st.just("image/png"),
            "resource": st.one_of(st.just({"uri": "file:///a", "text": "x"}), json_value),
            "annotations": json_value,
            "_meta": json_value,
        },
    ),
    json_value,
)


@settings(max_examples=600, deadline=None)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "sessionId": st.one_of(st.text(max_size=6), json_value),
            "session_id": st.text(max_size=6),
            "prompt": st.one_of(st.lists(blocks, max_size=4), json_value),
            "messageId": json_value,
        },
    )
)
def test_prompt_params_agree_with_the_model(params):
    assert outcome(prompt_params, params) == outcome(by_model_prompt, params)


def test_a_prompt_of_text_and_links_is_read_without_the_model(monkeypatch):
    params = {
        "sessionId": "sess_1",
        "prompt": [
            {"type": "text", "text": "look at", "annotations": {"priority": 1}},
            {"type": "resource_link", "uri": "file:///w/a.py", "name": "a.py", "mimeType": "text/x-python"},
        ],
    }
    expected = by_model_prompt(params)
    monkeypatch.setattr("acp_server.protocol.models.parse", refuse)
    assert prompt_params(params) == expected
    assert expected.prompt == (
        {"type": "text", "text": "look at"},
        {"type": "resource_link", "uri": "file:///w/a.py", "name": "a.py"},
    )


def refuse(*_args):
    raise AssertionError("the plain shape must not need the model")
