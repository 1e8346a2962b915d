"""initialize over stdio and TCP (docs/protocol.md §4 initialize)."""

import pytest

from harnessd_helpers import (INVALID_PARAMS, INVALID_REQUEST, METHODS, SERVER_NAME, UNAUTHORIZED,
                              error_of, result_of)


def check_initialize_result(resp, rid):
    assert resp["jsonrpc"] == "2.0"
    assert resp["id"] == rid
    res = result_of(resp)
    assert set(res) >= {"serverInfo", "protocolVersion", "capabilities"}, res
    info = res["serverInfo"]
    assert info["name"] == SERVER_NAME
    assert isinstance(info["version"], str) and info["version"]
    assert info["implementation"] == "harnessd"
    assert res["protocolVersion"] == 1 and type(res["protocolVersion"]) is int
    caps = res["capabilities"]
    assert isinstance(caps["providers"], list) and "scripted" in caps["providers"]
    assert all(isinstance(p, str) for p in caps["providers"])
    assert sorted(caps["methods"]) == sorted(METHODS)


def open_conn(spawn, transport):
    if transport == "stdio":
        return spawn(stdio=True).stdio_conn()
    return spawn().connect()


@pytest.mark.parametrize("transport", ["stdio", "tcp"])
def test_initialize_handshake(spawn, transport):
    c = open_conn(spawn, transport)
    c.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"it","version":"1"},'
               b'"protocolVersion":1}}\n')
    check_initialize_result(c.next_frame(), 1)

    # a second initialize on the same connection
    c.send_raw(b'{"jsonrpc":"2.0","id":2,"method":"initialize","params":{}}\n')
    resp = c.next_frame()
    assert resp["id"] == 2
    err = error_of(resp)
    assert err["code"] == INVALID_REQUEST
    assert "already initialized" in err["message"]

    # still serving
    c.send_raw(b'{"jsonrpc":"2.0","id":3,"method":"session/cancel","params":{"sessionId":"nope"}}\n')
    resp = c.next_frame()
    assert resp == {"jsonrpc": "2.0", "id": 3, "result": {"cancelled": False}}
    c.expect_quiet(0.05)


@pytest.mark.parametrize("transport", ["stdio", "tcp"])
def test_initialize_without_params_and_string_id(spawn, transport):
    c = open_conn(spawn, transport)
    c.send_raw(b'{"jsonrpc":"2.0","id":"init-1","method":"initialize"}\n')
    check_initialize_result(c.next_frame(), "init-1")


@pytest.mark.parametrize("transport", ["stdio", "tcp"])
def test_initialize_unknown_provider(spawn, transport):
    c = open_conn(spawn, transport)
    c.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"provider":"nosuchprov"}}\n')
    resp = c.next_frame()
    assert resp["id"] == 1
    err = error_of(resp)
    assert err["code"] == INVALID_PARAMS
    assert err["message"] == 'no adapter registered for provider "nosuchprov"'
    # the connection keeps serving; a valid initialize then works
    c.send_raw(b'{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"provider":"scripted"}}\n')
    check_initialize_result(c.next_frame(), 2)


def test_initialize_scripted_provider_runs_turn(spawn):
    c = spawn().connect()
    c.initialize(provider="scripted", model="scripted-1", maxTokens=100, cwd=".")
    resp, events = c.run_prompt("hs", "hi")
    assert result_of(resp) == {"status": "ok", "reason": {"kind": "completed"}}
    assert events[-1]["type"] == "turn/end"


def test_auth_token_required_on_tcp(spawn, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token")
    d = spawn(args=["--auth-token-file", str(token_file)])

    c1 = d.connect()
    c1.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n')
    resp = c1.next_frame()
    assert resp["id"] == 1
    assert error_of(resp)["code"] == UNAUTHORIZED

    c2 = d.connect()
    c2.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"authToken":"wrong"}}\n')
    resp = c2.next_frame()
    assert error_of(resp)["code"] == UNAUTHORIZED

    c3 = d.connect()
    c3.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"authToken":"s3cret-token"}}\n')
    check_initialize_result(c3.next_frame(), 1)
