"""docs/protocol.md §3: every bad input gets a clear answer. After initialize the
connection keeps serving; before it, on a network listener, a frame that is
no JSON-RPC request is answered (where an answer is due) and ends the
connection (docs/protocol.md, Security model)."""

import time

import pytest

from harnessd_helpers import (Daemon, hygiene, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, NOT_INITIALIZED, PARSE_ERROR,
                              SHUTTING_DOWN, encode, error_of, is_response, result_of)

NULL = None


def req(method, params=..., rid=1, **extra):
    obj = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not ...:
        obj["params"] = params
    obj.update(extra)
    return encode(obj)


def prompt_req(params, rid=1):
    return req("session/prompt", params, rid)


TEXT = [{"type": "text", "text": "hi"}]

# (case id, needs initialize first, raw bytes sent, expected answers)
# An expected answer is (code, id, message) where message is an exact string,
# a tuple of alternatives of which one must occur in the message, or None.
CASES = [
    # -- parse errors ------------------------------------------------------
    ("not-json", False, b'{"jsonrpc":"2.0","id":1,"method":\n', [(PARSE_ERROR, NULL, None)]),
    ("not-json-words", True, b"hello world\n", [(PARSE_ERROR, NULL, None)]),
    ("not-json-trailing-garbage", True, b'{"jsonrpc":"2.0","id":1,"method":"initialize"} x\n',
     [(PARSE_ERROR, NULL, None)]),
    ("invalid-utf8-ff", False, b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"cwd":"\xff\xfe"}}\n',
     [(PARSE_ERROR, NULL, None)]),
    ("invalid-utf8-overlong", True, b'{"jsonrpc":"2.0","id":1,"method":"session/cancel",'
                                    b'"params":{"sessionId":"\xc0\xaf"}}\n', [(PARSE_ERROR, NULL, None)]),
    ("invalid-utf8-surrogate", True, b'{"jsonrpc":"2.0","id":1,"method":"session/cancel",'
                                     b'"params":{"sessionId":"\xed\xa0\x80"}}\n', [(PARSE_ERROR, NULL, None)]),
    ("invalid-utf8-truncated", True, b'{"jsonrpc":"2.0","id":1,"method":"session/cancel",'
                                     b'"params":{"sessionId":"\xe2\x82"}}\n', [(PARSE_ERROR, NULL, None)]),
    # -- valid JSON, not an object -----------------------------------------
    ("number", False, b"42\n", [(INVALID_REQUEST, NULL, None)]),
    ("float", True, b"-1.5e3\n", [(INVALID_REQUEST, NULL, None)]),
    ("string", True, b'"initialize"\n', [(INVALID_REQUEST, NULL, None)]),
    ("null", True, b"null\n", [(INVALID_REQUEST, NULL, None)]),
    ("bool", True, b"true\n", [(INVALID_REQUEST, NULL, None)]),
    # -- batch --------------------------------------------------------------
    ("batch", False, b'[{"jsonrpc":"2.0","id":1,"method":"initialize"},'
                     b'{"jsonrpc":"2.0","id":2,"method":"initialize"}]\n',
     [(INVALID_REQUEST, NULL, ("batch requests are not supported",))]),
    ("batch-initialized", True, b'[{"jsonrpc":"2.0","id":1,"method":"session/cancel","params":{"sessionId":"a"}},'
                                b'{"jsonrpc":"2.0","id":2,"method":"session/cancel","params":{"sessionId":"b"}}]\n',
     [(INVALID_REQUEST, NULL, ("batch requests are not supported",))]),
    ("batch-empty", True, b"[]\n", [(INVALID_REQUEST, NULL, ("batch requests are not supported",))]),
    # -- envelope -----------------------------------------------------------
    ("jsonrpc-1.0", True, b'{"jsonrpc":"1.0","id":5,"method":"session/cancel","params":{"sessionId":"a"}}\n',
     [(INVALID_REQUEST, 5, None)]),
    ("jsonrpc-number", True, b'{"jsonrpc":2.0,"id":6,"method":"session/cancel","params":{"sessionId":"a"}}\n',
     [(INVALID_REQUEST, 6, None)]),
    ("id-float", True, b'{"jsonrpc":"2.0","id":1.5,"method":"session/cancel","params":{"sessionId":"a"}}\n',
     [(INVALID_REQUEST, NULL, None)]),
    ("id-object", True, b'{"jsonrpc":"2.0","id":{"a":1},"method":"session/cancel","params":{"sessionId":"a"}}\n',
     [(INVALID_REQUEST, NULL, None)]),
    ("id-bool", True, b'{"jsonrpc":"2.0","id":true,"method":"session/cancel","params":{"sessionId":"a"}}\n',
     [(INVALID_REQUEST, NULL, None)]),
    ("id-array", False, b'{"jsonrpc":"2.0","id":[1],"method":"initialize"}\n', [(INVALID_REQUEST, NULL, None)]),
    ("method-number", True, b'{"jsonrpc":"2.0","id":7,"method":5}\n', [(INVALID_REQUEST, 7, None)]),
    ("method-array", False, b'{"jsonrpc":"2.0","id":"m","method":["initialize"]}\n',
     [(INVALID_REQUEST, "m", None)]),
    # -- unknown method -----------------------------------------------------
    ("unknown-method", True, req("session/nope", {}, 8), [(METHOD_NOT_FOUND, 8, "method not found: session/nope")]),
    ("unknown-method-uninitialized", False, req("frobnicate", ..., "x"),
     [(METHOD_NOT_FOUND, "x", "method not found: frobnicate")]),
    ("unknown-method-utf8", True, req("dé/ja", ..., 9), [(METHOD_NOT_FOUND, 9, "method not found: dé/ja")]),
    # -- invalid params: session/prompt --------------------------------------
    ("prompt-params-array", True, prompt_req(["s", TEXT]), [(INVALID_PARAMS, 1, ("params",))]),
    ("prompt-params-string", True, prompt_req("s"), [(INVALID_PARAMS, 1, ("params",))]),
    ("prompt-params-missing", True, req("session/prompt"), [(INVALID_PARAMS, 1, ("params", "sessionId"))]),
    ("prompt-sessionId-missing", True, prompt_req({"contentBlocks": TEXT}), [(INVALID_PARAMS, 1, ("sessionId",))]),
    ("prompt-sessionId-number", True, prompt_req({"sessionId": 5, "contentBlocks": TEXT}),
     [(INVALID_PARAMS, 1, ("sessionId",))]),
    ("prompt-sessionId-null", True, prompt_req({"sessionId": None, "contentBlocks": TEXT}),
     [(INVALID_PARAMS, 1, ("sessionId",))]),
    ("prompt-sessionId-empty", True, prompt_req({"sessionId": "", "contentBlocks": TEXT}),
     [(INVALID_PARAMS, 1, ("sessionId",))]),
    ("prompt-sessionId-257-bytes", True, prompt_req({"sessionId": "é" * 128 + "a", "contentBlocks": TEXT}),
     [(INVALID_PARAMS, 1, ("sessionId",))]),
    ("prompt-contentBlocks-missing", True, prompt_req({"sessionId": "s"}), [(INVALID_PARAMS, 1, ("contentBlocks",))]),
    ("prompt-contentBlocks-empty", True, prompt_req({"sessionId": "s", "contentBlocks": []}),
     [(INVALID_PARAMS, 1, ("contentBlocks",))]),
    ("prompt-contentBlocks-string", True, prompt_req({"sessionId": "s", "contentBlocks": "hi"}),
     [(INVALID_PARAMS, 1, ("contentBlocks",))]),
    ("prompt-contentBlocks-item-number", True, prompt_req({"sessionId": "s", "contentBlocks": [5]}),
     [(INVALID_PARAMS, 1, ("contentBlocks",))]),
    ("prompt-contentBlocks-unknown-type", True,
     prompt_req({"sessionId": "s", "contentBlocks": [{"type": "image", "data": "AAAA"}]}),
     [(INVALID_PARAMS, 1, ("contentBlocks", "type"))]),
    ("prompt-contentBlocks-text-missing", True, prompt_req({"sessionId": "s", "contentBlocks": [{"type": "text"}]}),
     [(INVALID_PARAMS, 1, ("contentBlocks", "text"))]),
    ("prompt-contentBlocks-text-number", True,
     prompt_req({"sessionId": "s", "contentBlocks": [{"type": "text", "text": 5}]}),
     [(INVALID_PARAMS, 1, ("contentBlocks", "text"))]),
    ("prompt-contentBlocks-second-invalid", True,
     prompt_req({"sessionId": "s", "contentBlocks": [{"type": "text", "text": "a"}, {"type": 3}]}),
     [(INVALID_PARAMS, 1, ("contentBlocks", "type"))]),
    # -- invalid params: session/cancel --------------------------------------
    ("cancel-params-missing", True, req("session/cancel"), [(INVALID_PARAMS, 1, ("params", "sessionId"))]),
    ("cancel-sessionId-missing", True, req("session/cancel", {}), [(INVALID_PARAMS, 1, ("sessionId",))]),
    ("cancel-sessionId-number", True, req("session/cancel", {"sessionId": 3}), [(INVALID_PARAMS, 1, ("sessionId",))]),
    ("cancel-params-array", True, req("session/cancel", ["s"]), [(INVALID_PARAMS, 1, ("params",))]),
    # -- invalid params: initialize (connection stays uninitialized) ----------
    ("init-params-string", False, req("initialize", "x"), [(INVALID_PARAMS, 1, ("params",))]),
    ("init-provider-number", False, req("initialize", {"provider": 5}), [(INVALID_PARAMS, 1, ("provider",))]),
    ("init-model-number", False, req("initialize", {"model": 5}), [(INVALID_PARAMS, 1, ("model",))]),
    ("init-maxTokens-zero", False, req("initialize", {"maxTokens": 0}), [(INVALID_PARAMS, 1, ("maxTokens",))]),
    ("init-maxTokens-negative", False, req("initialize", {"maxTokens": -5}), [(INVALID_PARAMS, 1, ("maxTokens",))]),
    ("init-maxTokens-string", False, req("initialize", {"maxTokens": "10"}), [(INVALID_PARAMS, 1, ("maxTokens",))]),
    ("init-maxTokens-float", False, req("initialize", {"maxTokens": 2.5}), [(INVALID_PARAMS, 1, ("maxTokens",))]),
    ("init-protocolVersion-string", False, req("initialize", {"protocolVersion": "1"}),
     [(INVALID_PARAMS, 1, ("protocolVersion",))]),
    ("init-cwd-number", False, req("initialize", {"cwd": 5}), [(INVALID_PARAMS, 1, ("cwd",))]),
    ("init-clientInfo-string", False, req("initialize", {"clientInfo": "me"}), [(INVALID_PARAMS, 1, ("clientInfo",))]),
    # -- not initialized ----------------------------------------------------
    ("prompt-before-initialize", False, prompt_req({"sessionId": "s", "contentBlocks": TEXT}, 3),
     [(NOT_INITIALIZED, 3, "not initialized")]),
    ("cancel-before-initialize", False, req("session/cancel", {"sessionId": "s"}, "c"),
     [(NOT_INITIALIZED, "c", "not initialized")]),
    # -- client responses / notifications: ignored, no answer ----------------
    ("client-response-result", True, b'{"jsonrpc":"2.0","id":77,"result":{"ok":true}}\n', []),
    ("client-response-error", True, b'{"jsonrpc":"2.0","id":78,"error":{"code":-1,"message":"x"}}\n', []),
    ("client-response-null-id", False, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}\n', []),
    ("client-notification-unknown", True, b'{"jsonrpc":"2.0","method":"foo/bar","params":{}}\n', []),
    ("client-notification-prompt", True, encode({"jsonrpc": "2.0", "method": "session/prompt",
                                                 "params": {"sessionId": "s", "contentBlocks": TEXT}}), []),
    ("client-notification-cancel", True, b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}\n',
     []),
    ("client-notification-initialize", False, b'{"jsonrpc":"2.0","method":"initialize","params":{}}\n', []),
    ("client-notification-shutdown", True, b'{"jsonrpc":"2.0","method":"shutdown"}\n', []),
    # -- invalid Request objects without id: -32600, id null (JSON-RPC 2.0 §5) --
    ("notification-method-number", True, b'{"jsonrpc":"2.0","method":1,"params":"bar"}\n',
     [(INVALID_REQUEST, None, "Invalid Request: method must be a string")]),
    ("notification-method-null", True, b'{"method":null}\n',
     [(INVALID_REQUEST, None, "Invalid Request: method must be a string")]),
    ("notification-jsonrpc-3", True, b'{"jsonrpc":"3.0","method":"x"}\n',
     [(INVALID_REQUEST, None, 'Invalid Request: jsonrpc must be "2.0"')]),
    # -- lenient: no jsonrpc member is accepted --------------------------------
    ("no-jsonrpc-member", True, b'{"id":"lenient","method":"session/cancel","params":{"sessionId":"q"}}\n',
     [("result", "lenient", {"cancelled": False})]),
    # -- after shutdown (stdio; the connection ends instead of serving on) -----
    ("request-after-shutdown", True, None, None),
]


def check_answer(frame, expected):
    code, rid, message = expected
    assert frame.get("jsonrpc") == "2.0", frame
    assert "id" in frame and frame["id"] == rid and type(frame["id"]) is type(rid), \
        f"expected id {rid!r}, got {frame}"
    if code == "result":
        assert set(frame) == {"jsonrpc", "id", "result"}, frame
        assert frame["result"] == message, frame
        return
    assert set(frame) == {"jsonrpc", "id", "error"}, frame
    err = error_of(frame)
    assert err["code"] == code, f"expected code {code}, got {frame}"
    assert err["message"], frame
    if isinstance(message, str):
        assert err["message"] == message, frame
    elif isinstance(message, tuple):
        assert any(m in err["message"] for m in message), f"message should name one of {message}: {frame}"


def run_after_shutdown(spawn):
    d = spawn(stdio=True)
    c = d.stdio_conn()
    c.initialize()
    slow = c.prompt("slow", "@delay 150\n@chunks 3 1")
    c.wait_frame(lambda o: o.get("method") == "session.event", what="first event")
    c.send_raw(req("shutdown", ..., "sd1"))
    # the turn is still running while these arrive
    c.send_raw(req("session/cancel", {"sessionId": "x"}, "after1"))
    c.send_raw(prompt_req({"sessionId": "other", "contentBlocks": TEXT}, "after2"))
    c.send_raw(req("initialize", {}, "after3"))
    c.send_raw(req("shutdown", ..., "sd2"))
    for rid in ("after1", "after2", "after3"):
        check_answer(c.response(rid), (SHUTTING_DOWN, rid, "shutting down"))
    assert result_of(c.response("sd2")) == {}
    assert result_of(c.response("sd1")) == {}
    i_slow, r_slow = c.response_index(slow)
    i_sd1, _ = c.response_index("sd1")
    assert result_of(r_slow)["status"] == "ok"
    assert i_slow < i_sd1, "shutdown answered before the running turn settled"
    # the refused prompt must not have run
    assert not c.session_events("other")
    assert d.wait_exit(5) == 0
    answered = [f.obj["id"] for f in c.frames if is_response(f.obj)]
    assert len(answered) == 7 and len(set(map(repr, answered))) == 7, f"each request answered once: {answered}"


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One TCP daemon for the module's cases (each case uses fresh connections);
    replaced when a case leaves it dead, which that case reports as a failure."""
    tmp = tmp_path_factory.mktemp("bad-input")
    holder = {"daemon": None, "tmp": tmp}

    def get():
        d = holder["daemon"]
        if d is None or d.proc.poll() is not None:
            d = holder["daemon"] = Daemon(tmp / "sessions", workdir=tmp)
        return d

    yield get
    if holder["daemon"] is not None:
        holder["daemon"].kill()


@pytest.mark.parametrize("case_id,initialized,raw,expected", CASES, ids=[c[0] for c in CASES])
def test_bad_input(spawn, shared, case_id, initialized, raw, expected):
    if case_id == "request-after-shutdown":
        run_after_shutdown(spawn)
        return
    d = shared()
    try:
        check_case(d, case_id, initialized, raw, expected)
        problems = hygiene(d)
        assert not problems, "\n".join(problems)
    finally:
        for conn in d.conns:
            conn.close()
        d.conns.clear()
    time.sleep(0.01)
    rc = d.proc.poll()
    assert rc is None, f"harnessd exited ({rc}) after {case_id}; stderr:\n{d.stderr()}"


def closes_before_initialize(initialized, expected):
    """A frame that is no request, sent before initialize: the connection ends."""
    return not initialized and all(code in (PARSE_ERROR, INVALID_REQUEST) for code, _, _ in expected)


def check_case(d, case_id, initialized, raw, expected):
    c = d.connect()
    if initialized:
        c.send_raw(req("initialize", {}, "init"))
        assert "result" in c.next_frame()
    c.send_raw(raw)
    if closes_before_initialize(initialized, expected):
        assert c.wait_eof(), f"{case_id}: the connection should end"
        answers = [f.obj for f in c.frames]
        assert len(answers) == len(expected), f"expected {len(expected)} answer(s) and no more, got {answers}"
        for answer, exp in zip(answers, expected):
            check_answer(answer, exp)
        c2 = d.connect()
        c2.send_raw(req("initialize", {}, 1))
        assert "result" in c2.next_frame()
        return
    # follow-up request proves the connection still serves, and bounds the answers
    if initialized:
        c.send_raw(req("session/cancel", {"sessionId": "follow-up"}, "follow"))
    else:
        c.send_raw(req("initialize", {}, "follow"))
    answers = []
    while True:
        frame = c.next_frame()
        if frame.get("id") == "follow" and "method" not in frame:
            break
        answers.append(frame)
    assert len(answers) == len(expected), f"expected {len(expected)} answer(s), got {answers}"
    for answer, exp in zip(answers, expected):
        check_answer(answer, exp)
    if initialized:
        assert frame == {"jsonrpc": "2.0", "id": "follow", "result": {"cancelled": False}}
    else:
        res = result_of(frame)
        assert res["serverInfo"]["name"] == "deepseek-harness-sdk-runtime", frame
    # nothing else (e.g. no turn started by an ignored notification)
    c.expect_quiet(0.05)
    # and the daemon still serves new connections
    c2 = d.connect()
    c2.send_raw(req("initialize", {}, 1))
    assert "result" in c2.next_frame()
    c2.send_raw(prompt_req({"sessionId": "after-" + case_id, "contentBlocks": TEXT}, 2))
    resp = c2.response(2)
    assert result_of(resp) == {"status": "ok", "reason": {"kind": "completed"}}
