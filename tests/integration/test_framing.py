"""NDJSON framing (docs/protocol.md §2): limits, split reads, CRLF, blank lines."""

import pytest

from harnessd_helpers import (INVALID_REQUEST, encode, error_of, final_text, make_request, prompt_params,
                              read_log, result_of)

OK = {"status": "ok", "reason": {"kind": "completed"}}


def open_conn(spawn, transport, args=()):
    if transport == "stdio":
        d = spawn(stdio=True, args=args)
        return d, d.stdio_conn()
    d = spawn(args=args)
    return d, d.connect()


def big_line(size, rid=1):
    head = b'{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"big","contentBlocks":' \
           b'[{"type":"text","text":"' % rid
    tail = b'"}]}}'
    return head + b"x" * (size - 1 - len(head) - len(tail)) + tail + b"\n"


@pytest.mark.parametrize("transport", ["stdio", "tcp"])
def test_oversized_line_refused_connection_survives(spawn, transport):
    d, c = open_conn(spawn, transport)
    c.send_raw(b'{"jsonrpc":"2.0","id":"i","method":"initialize"}\n')
    assert "result" in c.next_frame()
    line = big_line(10 * 1024 * 1024)
    assert len(line) == 10 * 1024 * 1024
    c.send_raw(line)
    resp = c.next_frame(timeout=20)
    assert resp["id"] is None
    assert error_of(resp)["code"] == INVALID_REQUEST
    # the same connection keeps working
    c.send_raw(encode(make_request("session/prompt", prompt_params("small", "hello"), 2)))
    resp = c.response(2)
    assert result_of(resp) == OK
    assert final_text(c.session_events("small")) == "echo: hello"
    # the oversized prompt never ran
    assert not c.session_events("big")
    assert not d.log_path("big").exists()


def test_oversized_then_valid_in_same_write(spawn):
    d, c = open_conn(spawn, "tcp", args=["--max-frame-bytes", "4096"])
    c.send_raw(b'{"jsonrpc":"2.0","id":"i","method":"initialize"}\n')
    assert "result" in c.next_frame()
    payload = big_line(6000, rid=7) + encode(make_request("session/cancel", {"sessionId": "q"}, 8))
    c.send_raw(payload)
    first = c.next_frame()
    assert first["id"] is None and error_of(first)["code"] == INVALID_REQUEST
    assert c.next_frame() == {"jsonrpc": "2.0", "id": 8, "result": {"cancelled": False}}
    # a line under the limit is accepted
    c.send_raw(big_line(3000, rid=9))
    assert result_of(c.response(9)) == OK


def test_oversized_line_sent_slowly(spawn):
    """The limit applies to a line that arrives in many small pieces as well."""
    d, c = open_conn(spawn, "tcp", args=["--max-frame-bytes", "2048"])
    c.send_raw(b'{"jsonrpc":"2.0","id":"i","method":"initialize"}\n')
    assert "result" in c.next_frame()
    line = big_line(5000, rid=3)
    c.send_pieces(line, range(500, len(line), 500), pause=0.005)
    resp = c.next_frame()
    assert resp["id"] is None and error_of(resp)["code"] == INVALID_REQUEST
    c.send_raw(encode(make_request("session/cancel", {"sessionId": "q"}, 4)))
    assert c.next_frame() == {"jsonrpc": "2.0", "id": 4, "result": {"cancelled": False}}


@pytest.mark.parametrize("transport", ["stdio", "tcp"])
def test_multibyte_utf8_split_across_writes(spawn, transport):
    d, c = open_conn(spawn, transport)
    c.send_raw(b'{"jsonrpc":"2.0","id":"i","method":"initialize"}\n')
    assert "result" in c.next_frame()
    text = "h\u00e9llo \u20ac \U0001d11e \u65e5\u672c"
    sid = "s\u00fcss"
    data = encode(make_request("session/prompt", prompt_params(sid, text), 5))
    # split inside every multibyte character (after its first byte, and mid 4-byte sequence)
    cuts = []
    for ch in "\u00e9\u20ac\U0001d11e\u65e5\u00fc":
        enc = ch.encode()
        pos = data.index(enc)
        cuts.append(pos + 1)
        if len(enc) == 4:
            cuts.append(pos + 2)
            cuts.append(pos + 3)
    cuts.append(len(data) - 1)  # the newline alone
    c.send_pieces(data, sorted(set(cuts)), pause=0.03)
    resp = c.response(5)
    assert result_of(resp) == OK
    events = c.session_events(sid)
    assert events[1]["data"]["content"] == [{"type": "text", "text": text}]
    assert final_text(events) == "echo: " + text
    raw = b"".join(f.raw for f in c.frames)
    assert ("echo: " + text).encode() in raw, "non-ASCII must be written raw"
    header, logged = read_log(d.log_path(sid))
    assert header["id"] == sid and logged == events


def test_line_split_at_every_byte(spawn):
    d, c = open_conn(spawn, "tcp")
    data = encode(make_request("initialize", {"clientInfo": {"name": "n\u00e4me", "version": "1"}}, 1))
    c.send_pieces(data, range(1, len(data)), pause=0.001)
    resp = c.next_frame()
    assert resp["id"] == 1 and "result" in resp


@pytest.mark.parametrize("transport", ["stdio", "tcp"])
def test_crlf_and_blank_lines(spawn, transport):
    d, c = open_conn(spawn, transport)
    c.send_raw(b"\n\r\n\n")
    c.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\r\n')
    assert "result" in c.next_frame()
    c.send_raw(b"\r\n\n\n")
    c.send_raw(encode(make_request("session/prompt", prompt_params("crlf", "hello"), 2))[:-1] + b"\r\n")
    resp = c.response(2)
    assert result_of(resp) == OK
    assert final_text(c.session_events("crlf")) == "echo: hello"
    # a burst mixing blank lines, CRLF and LF in one write
    c.send_raw(b"\n\n" + b'{"jsonrpc":"2.0","id":3,"method":"session/cancel","params":{"sessionId":"x"}}\r\n'
               + b"\r\n\n" + b'{"jsonrpc":"2.0","id":4,"method":"session/cancel","params":{"sessionId":"y"}}\n\n')
    frames = []
    while len(frames) < 2:
        o = c.next_frame()
        if o.get("method") is None and o.get("id") in (3, 4):
            frames.append(o)
    assert sorted(o["id"] for o in frames) == [3, 4]
    assert all(o["result"] == {"cancelled": False} for o in frames)
    # blank lines got no answer at all
    responses = [f.obj for f in c.frames if "id" in f.obj and "method" not in f.obj]
    assert sorted(o["id"] for o in responses) == [1, 2, 3, 4]
    c.assert_no_new_frames(0.05)
