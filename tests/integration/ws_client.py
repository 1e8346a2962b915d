"""A small RFC 6455 WebSocket client over a raw socket, for black-box tests.

It does exactly what the tests tell it to, so they can send binary frames,
fragmented or oversized messages and precise control frames:

- opening handshake with a random Sec-WebSocket-Key; a 101 answer is checked
  (Upgrade, Connection, Sec-WebSocket-Accept); any other answer raises
  `HandshakeRefused` carrying the status, headers and body;
- every client frame is masked; 7, 16 and 64-bit payload lengths;
- frames are parsed from a byte buffer, so a read timeout never loses a
  partially received frame; fragmented messages are reassembled;
- pings are answered with pongs when `auto_pong` is set (default); every ping
  and pong received is recorded;
- a close frame records its code (1005 when it carries none) and is echoed.

`ws_conn()` at the bottom wraps a client into the `Conn` of harnessd_helpers,
so WebSocket connections get the same request/response helpers and frame
hygiene checks as the NDJSON transports.
"""

from __future__ import annotations

import base64
import hashlib
import os
import select
import socket
import ssl
import struct
import threading
import time
from dataclasses import dataclass, field

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONT = 0x0
OP_TEXT = 0x1
OP_BINARY = 0x2
OP_CLOSE = 0x8
OP_PING = 0x9
OP_PONG = 0xA
DATA_OPCODES = {OP_CONT, OP_TEXT, OP_BINARY}
CONTROL_OPCODES = {OP_CLOSE, OP_PING, OP_PONG}

CLOSE_NORMAL = 1000
CLOSE_UNSUPPORTED_DATA = 1003
CLOSE_NO_STATUS = 1005
CLOSE_TOO_BIG = 1009

MAX_HEADER_BYTES = 64 * 1024
SEND_TIMEOUT = 20.0  # bound on one sendall after the handshake


class WSError(Exception):
    """The server broke RFC 6455 (or the connection broke mid-frame)."""


class HandshakeRefused(Exception):
    """The server answered the upgrade with something other than 101."""

    def __init__(self, status: int, reason: str, headers: dict[str, str], body: bytes):
        super().__init__(f"upgrade refused: {status} {reason}: {body[:200]!r}")
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body


class WSClosed(Exception):
    """The connection is closed (close handshake done or TCP EOF)."""


@dataclass
class Message:
    opcode: int          # OP_TEXT, OP_BINARY or OP_CLOSE
    payload: bytes
    close_code: int | None = None
    close_reason: str = ""

    @property
    def text(self) -> str:
        return self.payload.decode("utf-8")


@dataclass
class HttpResponse:
    status: int
    reason: str
    headers: dict[str, str]          # lower-cased names
    body: bytes = b""
    rest: bytes = field(default=b"", repr=False)   # bytes read past the header block


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1(key.encode("ascii") + GUID).digest()).decode("ascii")


def mask_payload(key: bytes, data: bytes) -> bytes:
    n = len(data)
    if n == 0:
        return b""
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(k, "big")).to_bytes(n, "big")


def encode_frame(opcode: int, payload: bytes, *, fin: bool = True, rsv: int = 0,
                 mask_key: bytes | None = None) -> bytes:
    """One client frame (always masked; a random key unless mask_key is given)."""
    if mask_key is None:
        mask_key = os.urandom(4)
    assert len(mask_key) == 4
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | ((rsv & 7) << 4) | (opcode & 0xF)])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    return head + mask_key + mask_payload(mask_key, payload)


def parse_http_head(raw: bytes) -> tuple[int, str, dict[str, str]]:
    lines = raw.decode("iso-8859-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise WSError(f"bad HTTP status line: {lines[0]!r}")
    status = int(parts[1])
    reason = parts[2] if len(parts) > 2 else ""
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise WSError(f"bad HTTP header line: {line!r}")
        name = name.strip().lower()
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return status, reason, headers


def read_http_response(sock: socket.socket, deadline: float) -> HttpResponse:
    """Read a status line and headers; bytes past them are kept in `rest`."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        if len(buf) > MAX_HEADER_BYTES:
            raise WSError("HTTP header block too large")
        chunk = _recv_until(sock, deadline)
        if not chunk:
            raise WSError(f"connection closed inside the HTTP response head: {buf[:300]!r}")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    status, reason, headers = parse_http_head(head)
    return HttpResponse(status, reason, headers, rest=rest)


def _recv_until(sock: socket.socket, deadline: float) -> bytes:
    """One recv bounded by an absolute deadline; b'' on EOF or reset.

    Waits with select() so the socket's own timeout (used by sends, possibly from
    another thread) is never changed here."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("timed out reading from the server")
    # A TLS socket may hold decrypted bytes that select() cannot see.
    pending = isinstance(sock, ssl.SSLSocket) and sock.pending() > 0
    try:
        readable = pending or select.select([sock], [], [], left)[0]
    except (OSError, ValueError):
        return b""  # socket closed under us
    if not readable:
        raise TimeoutError("timed out reading from the server")
    try:
        return sock.recv(1 << 16)
    except ssl.SSLWantReadError:
        return _recv_until(sock, deadline)  # a TLS record not complete yet
    except (socket.timeout, TimeoutError):
        raise TimeoutError("timed out reading from the server") from None
    except OSError:
        return b""


class WSClient:
    def __init__(self, sock: socket.socket, rest: bytes = b"", *, auto_pong: bool = True,
                 response: HttpResponse | None = None):
        self.sock = sock
        self.response = response
        self.auto_pong = auto_pong
        self._buf = bytearray(rest)
        # Sends from test threads; over TLS also every read, because one SSL
        # object must never be read and written by two threads at once.
        self._send_lock = threading.Lock()
        self._tls = isinstance(sock, ssl.SSLSocket)
        self._frag_opcode: int | None = None
        self._frag_parts: list[bytes] = []
        self.pings: list[tuple[float, bytes]] = []   # (monotonic time, payload)
        self.pongs: list[bytes] = []
        self.messages: list[Message] = []             # every data message received, in order
        self.close_code: int | None = None             # code of the server's close frame
        self.close_reason: str = ""
        self.close_sent = False
        self.eof = False

    # -- connecting -------------------------------------------------------
    @classmethod
    def connect(cls, host: str, port: int, path: str = "/", *, origin: str | None = None,
                headers: dict[str, str] | None = None, timeout: float = 5.0,
                auto_pong: bool = True, tls: "ssl.SSLContext | None" = None) -> "WSClient":
        """tls: connect with wss://, verified by this context (server name: host)."""
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is None:
            from harnessd_helpers import TLS_MODE, suite_tls_context
            tls = suite_tls_context() if TLS_MODE else None
        if tls is not None:
            try:
                sock = tls.wrap_socket(sock, server_hostname=host)
            except BaseException:
                sock.close()
                raise
        try:
            key = base64.b64encode(os.urandom(16)).decode("ascii")
            lines = [
                f"GET {path} HTTP/1.1",
                # A "Host" in headers replaces this one (DNS rebinding tests).
                f"Host: {(headers or {}).get('Host', f'{host}:{port}')}",
                "Upgrade: websocket",
                "Connection: Upgrade",
                f"Sec-WebSocket-Key: {key}",
                "Sec-WebSocket-Version: 13",
            ]
            if origin is not None:
                lines.append(f"Origin: {origin}")
            for name, value in (headers or {}).items():
                if name != "Host":
                    lines.append(f"{name}: {value}")
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("iso-8859-1"))
            deadline = time.monotonic() + timeout
            head = read_http_response(sock, deadline)
            if head.status != 101:
                # a refusal: read its body (Content-Length, else until EOF or the deadline)
                length = head.headers.get("content-length")
                body = head.rest
                try:
                    while length is None or len(body) < int(length):
                        chunk = _recv_until(sock, deadline)
                        if not chunk:
                            break
                        body += chunk
                except TimeoutError:
                    pass
                if length is not None:
                    body = body[:int(length)]
                raise HandshakeRefused(head.status, head.reason, head.headers, body)
            h = head.headers
            if h.get("upgrade", "").lower() != "websocket":
                raise WSError(f"101 without 'Upgrade: websocket': {h}")
            if "upgrade" not in [t.strip().lower() for t in h.get("connection", "").split(",")]:
                raise WSError(f"101 without 'Connection: Upgrade': {h}")
            if h.get("sec-websocket-accept") != accept_key(key):
                raise WSError(f"bad Sec-WebSocket-Accept {h.get('sec-websocket-accept')!r}, "
                              f"expected {accept_key(key)!r}")
            if h.get("sec-websocket-extensions"):
                raise WSError(f"server negotiated an extension nobody asked for: {h['sec-websocket-extensions']}")
            sock.settimeout(SEND_TIMEOUT)
            return cls(sock, head.rest, auto_pong=auto_pong, response=head)
        except BaseException:
            sock.close()
            raise

    # -- sending ----------------------------------------------------------
    def send_frame(self, opcode: int, payload: bytes = b"", *, fin: bool = True, rsv: int = 0) -> None:
        self.send_raw(encode_frame(opcode, payload, fin=fin, rsv=rsv))

    def send_raw(self, data: bytes) -> None:
        """Write bytes as they are (bounded by the socket timeout, SEND_TIMEOUT)."""
        with self._send_lock:
            self.sock.sendall(data)

    def send_text(self, text: str | bytes) -> None:
        self.send_frame(OP_TEXT, text.encode("utf-8") if isinstance(text, str) else text)

    def send_binary(self, data: bytes) -> None:
        self.send_frame(OP_BINARY, data)

    def send_fragmented(self, opcode: int, pieces: list[bytes], between=None) -> None:
        """One message as len(pieces) frames; `between(i)` runs after frame i (e.g. to send a ping)."""
        for i, piece in enumerate(pieces):
            self.send_frame(opcode if i == 0 else OP_CONT, piece, fin=i == len(pieces) - 1)
            if between is not None and i < len(pieces) - 1:
                between(i)

    def ping(self, payload: bytes = b"") -> None:
        self.send_frame(OP_PING, payload)

    def pong(self, payload: bytes = b"") -> None:
        self.send_frame(OP_PONG, payload)

    def send_close(self, code: int | None = CLOSE_NORMAL, reason: str = "") -> None:
        if self.close_sent:
            return
        self.close_sent = True
        payload = b"" if code is None else struct.pack("!H", code) + reason.encode("utf-8")
        try:
            self.send_frame(OP_CLOSE, payload)
        except OSError:
            pass

    def close(self) -> None:
        """Best-effort close handshake start, then drop the socket."""
        if not self.eof:
            self.send_close()
        with self._send_lock:  # a TLS read in flight finishes first
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.sock.close()
            self.eof = True

    def _recv(self, deadline: float) -> bytes:
        """One read bounded by `deadline`; b'' on EOF. Over TLS the read itself runs
        under the send lock with a short timeout, so a writer waits at most that long."""
        if not self._tls:
            return _recv_until(self.sock, deadline)
        while True:
            with self._send_lock:  # decrypted bytes that select() cannot see
                if self.sock.fileno() >= 0 and self.sock.pending() > 0:
                    return self.sock.recv(1 << 16)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("timed out reading from the server")
            try:
                select.select([self.sock], [], [], min(left, 0.05))
            except (OSError, ValueError):
                return b""  # socket closed under us
            with self._send_lock:
                if self.sock.fileno() < 0:
                    return b""
                self.sock.settimeout(0.02)
                try:
                    return self.sock.recv(1 << 16)
                except (ssl.SSLWantReadError, socket.timeout, TimeoutError):
                    pass  # nothing, or a TLS record not complete yet
                except OSError:
                    return b""
                finally:
                    if self.sock.fileno() >= 0:
                        self.sock.settimeout(SEND_TIMEOUT)

    # -- receiving --------------------------------------------------------
    def _parse_frame(self) -> tuple[bool, int, bytes] | None:
        b = self._buf
        if len(b) < 2:
            return None
        fin = bool(b[0] & 0x80)
        rsv = (b[0] >> 4) & 7
        opcode = b[0] & 0xF
        masked = bool(b[1] & 0x80)
        n = b[1] & 0x7F
        pos = 2
        if n == 126:
            if len(b) < 4:
                return None
            n = struct.unpack_from("!H", b, 2)[0]
            pos = 4
            if n < 126:
                raise WSError(f"non-minimal 16-bit length {n}")
        elif n == 127:
            if len(b) < 10:
                return None
            n = struct.unpack_from("!Q", b, 2)[0]
            pos = 10
            if n >> 63:
                raise WSError("64-bit length with the high bit set")
            if n < 1 << 16:
                raise WSError(f"non-minimal 64-bit length {n}")
        if masked:
            raise WSError("server frame is masked (RFC 6455 5.1 forbids it)")
        if rsv:
            raise WSError(f"RSV bits {rsv:#x} set without a negotiated extension")
        if opcode not in DATA_OPCODES | CONTROL_OPCODES:
            raise WSError(f"reserved opcode {opcode:#x}")
        if opcode in CONTROL_OPCODES and (not fin or n > 125):
            raise WSError(f"bad control frame (opcode {opcode:#x}, fin={fin}, len={n})")
        if len(b) < pos + n:
            return None
        payload = bytes(b[pos:pos + n])
        del b[:pos + n]
        return fin, opcode, payload

    def recv_frame(self, timeout: float = 5.0) -> tuple[bool, int, bytes]:
        """The next raw frame (fin, opcode, payload). TimeoutError / WSClosed otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            frame = self._parse_frame()
            if frame is not None:
                return frame
            if self.eof:
                raise WSClosed(f"EOF with {len(self._buf)} bytes of an incomplete frame"
                               if self._buf else "EOF")
            chunk = self._recv(deadline)
            if not chunk:
                self.eof = True
                continue
            self._buf += chunk

    def recv_message(self, timeout: float = 5.0) -> Message:
        """The next data message or the close frame; pings/pongs are handled on the way.

        Raises TimeoutError when nothing complete arrives in time (state is kept),
        WSClosed on EOF without (another) close frame."""
        deadline = time.monotonic() + timeout
        while True:
            fin, opcode, payload = self.recv_frame(max(0.0, deadline - time.monotonic()) or 0.001)
            if opcode == OP_PING:
                self.pings.append((time.monotonic(), payload))
                if self.auto_pong and not self.close_sent:
                    try:
                        self.pong(payload)
                    except OSError:
                        pass
                continue
            if opcode == OP_PONG:
                self.pongs.append(payload)
                continue
            if opcode == OP_CLOSE:
                if len(payload) == 1:
                    raise WSError("close frame with a 1-byte payload")
                code = struct.unpack("!H", payload[:2])[0] if payload else CLOSE_NO_STATUS
                reason = payload[2:].decode("utf-8")
                if self.close_code is None:
                    self.close_code, self.close_reason = code, reason
                self.send_close(code if payload else None)   # echo (no-op if we started it)
                return Message(OP_CLOSE, payload, code, reason)
            if opcode == OP_CONT:
                if self._frag_opcode is None:
                    raise WSError("continuation frame without a message to continue")
                self._frag_parts.append(payload)
            else:
                if self._frag_opcode is not None:
                    raise WSError("new data frame inside a fragmented message")
                self._frag_opcode = opcode
                self._frag_parts = [payload]
            if not fin:
                continue
            op, data = self._frag_opcode, b"".join(self._frag_parts)
            self._frag_opcode, self._frag_parts = None, []
            if op == OP_TEXT:
                data.decode("utf-8")  # raises on invalid UTF-8 in a text message
            msg = Message(op, data)
            self.messages.append(msg)
            return msg

    def wait_close(self, timeout: float = 5.0) -> int | None:
        """Read (dropping data messages) until the server's close frame or EOF; its code or None."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no close frame within {timeout}s")
            try:
                msg = self.recv_message(left)
            except WSClosed:
                return self.close_code
            if msg.opcode == OP_CLOSE:
                return msg.close_code

    def wait_eof(self, timeout: float = 5.0) -> bool:
        """After the close handshake: True once the server closes TCP within timeout."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            try:
                chunk = self._recv(deadline)
            except TimeoutError:
                return False
            if not chunk:
                self.eof = True
            else:
                self._buf += chunk
        return True


# ---------------------------------------------------------------------------
# adapter onto harnessd_helpers.Conn


def ws_conn(daemon, port: int, path: str = "/", *, name: str | None = None, **connect_kw):
    """Open a WebSocket to `port` and return it as a harnessd_helpers.Conn registered on
    `daemon` (so teardown closes it and frame hygiene covers it). The WSClient is `conn.ws`.

    Each text message becomes one NDJSON frame for the Conn machinery; a text message
    containing a raw newline is recorded in `conn.ws.multi_frame` (the protocol says one
    JSON-RPC message per text frame). A close frame or EOF ends the stream."""
    from harnessd_helpers import Conn, FrameReader

    ws = WSClient.connect("127.0.0.1", port, path, **connect_kw)
    ws.multi_frame = []
    ws.binary = []

    def read(_n: int) -> bytes:
        while True:
            if ws.eof and not ws._buf:
                return b""
            try:
                msg = ws.recv_message(0.5)
            except TimeoutError:
                raise socket.timeout() from None
            except WSClosed:
                return b""
            if msg.opcode == OP_CLOSE:
                return b""
            if msg.opcode == OP_BINARY:
                ws.binary.append(msg.payload)
                continue
            if b"\n" in msg.payload:
                ws.multi_frame.append(msg.payload)
            return msg.payload + b"\n"

    def write(data: bytes) -> None:
        # Conn frames are NDJSON lines; a WebSocket message carries one without its newline.
        if data.endswith(b"\n"):
            data = data[:-1]
        ws.send_text(data)

    n = len(daemon.conns)
    reader = FrameReader(read, f"ws{n}")

    def close() -> None:
        reader.stopped = True
        ws.close()

    conn = Conn(name or f"ws#{n}", reader, write, close, daemon.diag)
    conn.ws = ws
    daemon.conns.append(conn)
    return conn
