"""The byte-level pieces: block-buffered line splitting, address parsing,
WebSocket masking. Pure functions over in-memory input; no processes."""

from __future__ import annotations

import pytest

from deepseek_harness._transport import _KEEP_BUFFER, ByteReader, _mask, parse_address


def reader_over(chunks: list[bytes], block: int = 1 << 20) -> tuple[ByteReader, list[int]]:
    """A ByteReader fed *chunks* one read at a time; also the sizes asked for."""

    pending = list(chunks)
    asked: list[int] = []

    def recv(n: int) -> bytes:
        asked.append(n)
        return pending.pop(0) if pending else b""

    return ByteReader(recv, block), asked


def lines_of(reader: ByteReader) -> list[bytes]:
    out = []
    while (line := reader.readline()) is not None:
        out.append(bytes(line))
    return out


def test_fake_lines_split_across_reads():
    reader, _ = reader_over([b'{"a":', b'1}\n{"b"', b":2}\r\n\n", b"tail without newline"])
    assert lines_of(reader) == [b'{"a":1}', b'{"b":2}\r', b"", b"tail without newline"]


def test_fake_many_lines_in_one_read_cost_one_call():
    data = b"".join(b'{"n":%d}\n' % i for i in range(10_000))
    reader, asked = reader_over([data])
    assert len(lines_of(reader)) == 10_000
    assert len(asked) == 2  # the block, then end of stream


def test_fake_huge_line_is_assembled_and_its_buffer_released():
    big = b"x" * (8 * _KEEP_BUFFER)
    pieces = [big[i:i + 65536] for i in range(0, len(big), 65536)]
    reader, _ = reader_over(pieces + [b"\nnext\n"])
    assert bytes(reader.readline()) == big
    assert bytes(reader.readline()) == b"next"
    assert len(reader._buf) <= _KEEP_BUFFER


def test_fake_read_exact():
    reader, _ = reader_over([b"ab", b"cdef", b"g"])
    assert bytes(reader.read_exact(3)) == b"abc"
    assert bytes(reader.read_exact(4)) == b"defg"
    assert reader.read_exact(1) is None


def test_fake_parse_address():
    assert parse_address("127.0.0.1:7879") == ("tcp", "127.0.0.1", 7879, "/")
    assert parse_address("tcp://localhost:1") == ("tcp", "localhost", 1, "/")
    assert parse_address("tls://[::1]:443") == ("tls", "::1", 443, "/")
    assert parse_address("ws://h:80") == ("ws", "h", 80, "/")
    assert parse_address("wss://h:8443/rpc?access_token=x") == ("wss", "h", 8443, "/rpc?access_token=x")
    for bad in ("nohost", "h:", "h:0", "http://h:1", ":80", "tcp://h:1/path", "h:99999"):
        with pytest.raises(ValueError):
            parse_address(bad)


def test_fake_websocket_mask_round_trips():
    key = b"\x01\x02\x03\x04"
    data = bytes(range(256)) * 3 + b"tail"
    masked = _mask(data, key)
    assert masked != data and _mask(masked, key) == data
    assert masked[:4] == bytes(b ^ k for b, k in zip(data[:4], key))
    assert _mask(b"", key) == b""
