"""Byte channels to the runtime: a child process on stdio, or a network
connection (TCP, TLS, WebSocket) to a listening harnessd.

A channel moves whole JSON-RPC messages as bytes and knows nothing of their
content. Reading is buffered in large blocks and split in place: the daemon
can stream hundreds of MiB per turn, and a reader that pays a system call
per byte (a raw pipe's ``readline``) falls so far behind that the daemon's
write deadline cuts the connection.
"""

from __future__ import annotations

import base64
import collections
import errno
import hashlib
import logging
import os
import signal
import socket
import ssl
import subprocess
import threading
from typing import Callable, Mapping, Sequence
from urllib.parse import urlsplit

from .errors import CertificateVerifyError, TransportClosedError

log = logging.getLogger("deepseek_harness")
runtime_log = logging.getLogger("deepseek_harness.runtime")

#: How many stderr lines of the runtime an error message carries.
STDERR_TAIL_LINES = 400
# One stderr line is cut at this many characters, so the tail stays bounded.
_STDERR_LINE_CHARS = 4000
# Bytes asked for per read. Large blocks keep the number of system calls
# (and Python-level iterations) per MiB small.
_READ_BLOCK = 1 << 20
# A buffer that held a frame larger than this is not kept after the frame
# was handed out, so a huge turn does not pin its size in memory.
_KEEP_BUFFER = 1 << 20


class ByteReader:
    """Buffered reading over a ``recv(n) -> bytes`` function (``b""`` at EOF).

    ``readline`` hands out lines without their ``\\n`` (a last line without
    one too), ``read_exact`` exactly *n* bytes; both return None at the end
    of the stream. One thread reads.
    """

    def __init__(self, recv: Callable[[int], bytes], block: int = _READ_BLOCK) -> None:
        self._recv = recv
        self._block = block
        self._buf = bytearray()
        self._pos = 0  # start of the unread data in _buf
        self._eof = False

    def _fill(self) -> bool:
        if self._eof:
            return False
        data = self._recv(self._block)
        if not data:
            self._eof = True
            return False
        if self._pos:
            if len(self._buf) > _KEEP_BUFFER:
                # Copy the unread tail out of a large buffer instead of
                # keeping the large allocation alive.
                self._buf = self._buf[self._pos:]
            else:
                del self._buf[: self._pos]
            self._pos = 0
        self._buf += data
        return True

    def readline(self) -> bytearray | None:
        scan = self._pos
        while True:
            index = self._buf.find(b"\n", scan)
            if index >= 0:
                line = self._buf[self._pos:index]
                self._pos = index + 1
                self._shrink()
                return line
            # Only the bytes that arrive next need searching.
            searched = len(self._buf) - self._pos
            if not self._fill():
                if searched:
                    line = self._buf[self._pos:]
                    self._buf = bytearray()
                    self._pos = 0
                    return line
                return None
            scan = self._pos + searched

    def read_exact(self, n: int) -> bytearray | None:
        while len(self._buf) - self._pos < n:
            if not self._fill():
                return None
        data = self._buf[self._pos:self._pos + n]
        self._pos += n
        self._shrink()
        return data

    def _shrink(self) -> None:
        if self._pos == len(self._buf) and len(self._buf) > _KEEP_BUFFER:
            self._buf = bytearray()
            self._pos = 0


class Channel:
    """A message channel to the runtime. ``read_message`` is called by one
    thread; ``write_message`` by one thread at a time (the client locks)."""

    proc: subprocess.Popen | None = None
    #: First line of the error when the stream ends without being closed.
    eof_reason = "DeepSeek Harness runtime stdout closed"

    def describe(self) -> str:
        raise NotImplementedError

    def read_message(self) -> bytearray | None:
        """The next message's bytes; None once the stream has ended."""
        raise NotImplementedError

    def write_message(self, payload: bytes) -> None:
        """Send one message (without framing); raises OSError on failure."""
        raise NotImplementedError

    def finish(self, timeout: float | None) -> None:
        """End the conversation: politely first, then by force after
        *timeout* seconds. Afterwards ``read_message`` returns None soon."""
        raise NotImplementedError

    def release(self) -> None:
        """Free what is left once the reader has stopped. Idempotent."""

    def closed_error(self, reason: str) -> TransportClosedError:
        return TransportClosedError(reason)


# ----------------------------------------------------------------- stdio


class StdioChannel(Channel):
    """The runtime as a child process speaking NDJSON on stdin/stdout.

    Its stderr is drained by a thread into the last ``STDERR_TAIL_LINES``
    lines (and logged at DEBUG on ``deepseek_harness.runtime``).
    """

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str] | None, cwd: str | None) -> None:
        self.argv = list(argv)
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=dict(env) if env is not None else None,
        )
        # The unbuffered file under proc.stdout: the ByteReader buffers, and
        # unlike a bare descriptor number it stays safe to call once closed.
        self._stdout = self.proc.stdout.raw
        self._reader = ByteReader(self._read_stdout)
        self._stderr_lines: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._stderr_lock = threading.Lock()
        self._released = False
        self.stderr_thread = threading.Thread(target=self._drain_stderr, name="dsh-runtime-stderr", daemon=True)
        self.stderr_thread.start()

    def describe(self) -> str:
        return os.path.basename(self.argv[0])

    def _read_stdout(self, n: int) -> bytes:
        try:
            return self._stdout.read(n) or b""
        except ValueError:  # closed by release()
            return b""

    def read_message(self) -> bytearray | None:
        return self._reader.readline()

    def write_message(self, payload: bytes) -> None:
        stdin = self.proc.stdin
        if stdin is None or stdin.closed:
            raise BrokenPipeError(errno.EPIPE, "stdin of the runtime is closed")
        try:
            stdin.write(payload + b"\n")
            stdin.flush()
        except ValueError as exc:  # closed by another thread meanwhile
            raise BrokenPipeError(errno.EPIPE, str(exc)) from exc

    def _drain_stderr(self) -> None:
        stream = self.proc.stderr
        try:
            while True:
                raw = stream.readline(_STDERR_LINE_CHARS)
                if not raw:
                    break
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                with self._stderr_lock:
                    self._stderr_lines.append(line)
                runtime_log.debug("%s", line)
        except (OSError, ValueError):
            pass

    def stderr_tail(self) -> str:
        with self._stderr_lock:
            return "\n".join(self._stderr_lines)

    def _close_stdin(self) -> None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except (OSError, ValueError):
            pass

    def finish(self, timeout: float | None) -> None:
        proc = self.proc
        self._close_stdin()
        try:
            proc.wait(timeout)
            return
        except subprocess.TimeoutExpired:
            pass
        log.debug("runtime pid %d still running after stdin closed; terminating it", proc.pid)
        proc.terminate()
        try:
            proc.wait(timeout)
            return
        except subprocess.TimeoutExpired:
            pass
        log.warning("runtime pid %d ignored SIGTERM; killing it", proc.pid)
        proc.kill()
        proc.wait()

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        if self.proc.poll() is None:
            self.finish(0)
        self.stderr_thread.join(timeout=1)
        streams = [self.proc.stdin, self._stdout]
        # A process the runtime left behind may still hold stderr open; closing
        # a buffered file that a thread is reading would wait for that thread.
        if not self.stderr_thread.is_alive():
            streams.append(self.proc.stderr)
        for stream in streams:
            try:
                if stream is not None:
                    stream.close()
            except (OSError, ValueError):
                pass

    def closed_error(self, reason: str) -> TransportClosedError:
        # The process usually exits right after its stdout closes: give it a
        # moment, so the exit code and its last stderr lines are in the error.
        try:
            exit_code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            exit_code = None
        if exit_code is not None:
            self.stderr_thread.join(timeout=1)
        tail = self.stderr_tail()
        message = reason
        if exit_code is not None:
            message += f"\nexit code: {exit_code}"
            if exit_code < 0:
                try:
                    message += f" (killed by {signal.Signals(-exit_code).name})"
                except ValueError:
                    pass
        if tail:
            message += f"\nstderr tail:\n{tail}"
        return TransportClosedError(message, exit_code=exit_code, stderr_tail=tail)


# ----------------------------------------------------------------- network


class _PlainStream:
    """A connected socket with the two calls the channels need."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def recv(self, n: int) -> bytes:
        return self.sock.recv(n)

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)


class _TlsStream:
    """TLS over a socket through memory BIOs.

    One thread receives while others send. An ``SSLSocket`` must not be
    read and written by two threads at once, so the TLS state lives in an
    ``SSLObject`` behind a lock that is never held across a blocking
    socket call; a second lock keeps encrypted output in order on the wire.
    """

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, server_hostname: str) -> None:
        self.sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_hostname=server_hostname)
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._handshake()

    def _send_pending(self) -> None:
        with self._send_lock:
            with self._lock:
                data = self._outgoing.read()
            if data:
                self.sock.sendall(data)

    def _handshake(self) -> None:
        while True:
            with self._lock:
                try:
                    self._tls.do_handshake()
                    done = True
                except ssl.SSLWantReadError:
                    done = False
            self._send_pending()
            if done:
                return
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("connection closed during the TLS handshake")
            with self._lock:
                self._incoming.write(data)

    def recv(self, n: int) -> bytes:
        while True:
            with self._lock:
                try:
                    data = self._tls.read(n)
                    pending = self._outgoing.pending
                except ssl.SSLWantReadError:
                    data, pending = None, self._outgoing.pending
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                    return b""
            if pending:
                self._send_pending()
            if data is not None:
                return data
            raw = self.sock.recv(max(n, 65536))
            with self._lock:
                if raw:
                    self._incoming.write(raw)
                else:
                    self._incoming.write_eof()

    def sendall(self, data: bytes) -> None:
        with self._send_lock:
            with self._lock:
                self._tls.write(data)
                out = self._outgoing.read()
            self.sock.sendall(out)


def parse_address(address: str) -> tuple[str, str, int, str]:
    """Split an address into ``(scheme, host, port, resource)``.

    Accepted: ``HOST:PORT`` and ``tcp://HOST:PORT`` (NDJSON over TCP),
    ``tls://HOST:PORT`` (NDJSON over TLS), ``ws://HOST:PORT[/PATH][?QUERY]``
    and ``wss://...`` (WebSocket). IPv6 hosts are written ``[ADDR]``.
    """

    text = address.strip()
    if "://" not in text:
        text = "tcp://" + text
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in ("tcp", "tls", "ws", "wss"):
        raise ValueError(f"unsupported address scheme {parts.scheme!r} in {address!r} (tcp, tls, ws or wss)")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"invalid port in address {address!r}") from None
    host = parts.hostname
    if not host or port is None or port == 0:
        raise ValueError(f"address {address!r} needs a host and a non-zero port")
    if scheme in ("tcp", "tls") and (parts.path not in ("", "/") or parts.query):
        raise ValueError(f"a {scheme}:// address has no path: {address!r}")
    resource = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return scheme, host, port, resource


TLS_SCHEMES = ("tls", "wss")


def client_ssl_context(ca_file: str | os.PathLike[str] | None = None) -> ssl.SSLContext:
    """The context that verifies a ``tls://`` or ``wss://`` peer by default.

    Without *ca_file* it trusts the system's CA store; with it, only the PEM
    certificates in that file. Either way the certificate chain and the host
    name (or IP address) of the address are checked, and the protocol is at
    least TLS 1.2.
    """

    cafile = os.fspath(ca_file) if ca_file is not None else None
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cafile)
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "ca_file not found", cafile) from None
    except ssl.SSLError as exc:
        raise ValueError(f"ca_file {cafile!r} holds no usable PEM CA certificate: {exc}") from exc
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    if context.minimum_version < ssl.TLSVersion.TLSv1_2:
        context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


# OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH, _EMAIL_MISMATCH, _IP_ADDRESS_MISMATCH.
_NAME_MISMATCH_CODES = (62, 63, 64)


def _verify_failure(address: str, exc: ssl.SSLCertVerificationError, trusted: str) -> CertificateVerifyError:
    reason = (exc.verify_message or exc.reason or str(exc)).rstrip(".")
    if exc.verify_code in _NAME_MISMATCH_CODES:
        hint = ("connect with a host name or IP address that the daemon's certificate names "
                "(its subjectAltName)")
    else:
        hint = (f"trusted: {trusted}; pass ca_file= (the PEM file of the CA that signed the daemon's "
                f"--tls-cert) or ssl_context= to trust another CA")
    return CertificateVerifyError(
        f"TLS certificate verification failed for harnessd at {address}: {reason}\n{hint}",
        verify_message=reason,
    )


def open_network_channel(
    address: str,
    *,
    connect_timeout: float | None,
    ssl_context: ssl.SSLContext | None,
    auth_token: str | None,
    ca_file: str | os.PathLike[str] | None = None,
) -> Channel:
    scheme, host, port, resource = parse_address(address)
    context: ssl.SSLContext | None = None
    if ssl_context is not None and ca_file is not None:
        raise ValueError("pass either ca_file or ssl_context, not both")
    if scheme in TLS_SCHEMES:
        # A context of the caller's is used as given; ours verifies.
        context = ssl_context if ssl_context is not None else client_ssl_context(ca_file)
        if ca_file is not None:
            trusted = f"the CA certificates in {os.fspath(ca_file)}"
        elif ssl_context is not None:
            trusted = "the CAs of the given ssl_context"
        else:
            trusted = "the system's CA store"
    elif ssl_context is not None or ca_file is not None:
        option = "ca_file" if ca_file is not None else "ssl_context"
        raise ValueError(f"{option} applies to tls:// and wss:// addresses, not to {address!r}")
    try:
        sock = socket.create_connection((host, port), timeout=connect_timeout)
    except OSError as exc:
        raise TransportClosedError(f"cannot connect to harnessd at {host}:{port}: {exc}") from exc
    try:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        stream: _PlainStream | _TlsStream
        if context is not None:
            try:
                stream = _TlsStream(sock, context, host)
            except ssl.SSLCertVerificationError as exc:
                raise _verify_failure(address, exc, trusted) from exc
        else:
            stream = _PlainStream(sock)
        if scheme in ("ws", "wss"):
            channel: Channel = WebSocketChannel(sock, stream, address, host, port, resource, auth_token)
        else:
            channel = NdjsonSocketChannel(sock, stream, address)
        sock.settimeout(None)
        return channel
    except TransportClosedError:
        sock.close()
        raise
    except ssl.SSLError as exc:
        sock.close()
        raise TransportClosedError(f"TLS handshake with harnessd at {address} failed: {exc}") from exc
    except (OSError, ValueError) as exc:
        sock.close()
        raise TransportClosedError(f"cannot open {address}: {exc}") from exc


class _SocketChannel(Channel):
    eof_reason = "DeepSeek Harness runtime connection closed"

    def __init__(self, sock: socket.socket, stream: _PlainStream | _TlsStream, address: str) -> None:
        self.sock = sock
        self.stream = stream
        self.address = address
        self.reader = ByteReader(self._recv)
        self._shut = False
        self._released = False

    def _recv(self, n: int) -> bytes:
        try:
            return self.stream.recv(n)
        except ssl.SSLError as exc:
            log.debug("TLS read failed: %s", exc)
            return b""

    def describe(self) -> str:
        return f"harnessd at {self.address}"

    def _shutdown_socket(self) -> None:
        if self._shut:
            return
        self._shut = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        self._shutdown_socket()
        self.sock.close()

    def closed_error(self, reason: str) -> TransportClosedError:
        return TransportClosedError(f"{reason}\nconnection: {self.address}")


class NdjsonSocketChannel(_SocketChannel):
    """NDJSON over TCP or TLS (``harnessd --listen tcp://...``)."""

    def read_message(self) -> bytearray | None:
        return self.reader.readline()

    def write_message(self, payload: bytes) -> None:
        self.stream.sendall(payload + b"\n")

    def finish(self, timeout: float | None) -> None:
        self._shutdown_socket()


_WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_OP_CONT, _OP_TEXT, _OP_BINARY, _OP_CLOSE, _OP_PING, _OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def _mask(data: bytes, key: bytes) -> bytes:
    n = len(data)
    if not n:
        return b""
    repeated = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "little") ^ int.from_bytes(repeated, "little")).to_bytes(n, "little")


class WebSocketChannel(_SocketChannel):
    """One JSON-RPC message per WebSocket text message (RFC 6455 client).

    Pings are answered from the reading thread; the server's close frame
    ends the stream. Outgoing frames are masked, as clients must.
    """

    def __init__(
        self,
        sock: socket.socket,
        stream: _PlainStream | _TlsStream,
        address: str,
        host: str,
        port: int,
        resource: str,
        auth_token: str | None,
    ) -> None:
        super().__init__(sock, stream, address)
        self._write_lock = threading.Lock()
        self._close_sent = False
        self._handshake(host, port, resource, auth_token)

    def _handshake(self, host: str, port: int, resource: str, auth_token: str | None) -> None:
        key = base64.b64encode(os.urandom(16))
        host_header = f"[{host}]" if ":" in host else host
        lines = [
            f"GET {resource} HTTP/1.1",
            f"Host: {host_header}:{port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key.decode('ascii')}",
            "Sec-WebSocket-Version: 13",
            "User-Agent: deepseek-harness-python",
        ]
        if auth_token is not None:
            lines.append(f"Authorization: Bearer {auth_token}")
        self.stream.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        status_line = self.reader.readline()
        if status_line is None:
            raise TransportClosedError(f"{self.describe()} closed the connection during the WebSocket handshake")
        status = bytes(status_line).decode("latin-1").rstrip("\r")
        headers: dict[str, str] = {}
        while True:
            line = self.reader.readline()
            if line is None:
                raise TransportClosedError(f"{self.describe()} closed the connection during the WebSocket handshake")
            text = bytes(line).decode("latin-1").rstrip("\r")
            if not text:
                break
            name, _, value = text.partition(":")
            headers[name.strip().lower()] = value.strip()
        code = status.split(" ", 2)[1] if status.count(" ") >= 1 else ""
        if code != "101":
            body = b""
            length = headers.get("content-length", "")
            if length.isdigit() and int(length) <= 65536:
                body = bytes(self.reader.read_exact(int(length)) or b"")
            detail = body.decode("utf-8", "replace").strip()
            raise TransportClosedError(
                f"WebSocket upgrade refused by {self.describe()}: {status}" + (f": {detail}" if detail else "")
            )
        expected = base64.b64encode(hashlib.sha1(key + _WS_GUID).digest()).decode("ascii")
        if headers.get("sec-websocket-accept") != expected:
            raise TransportClosedError(f"{self.describe()} sent a wrong Sec-WebSocket-Accept")

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        n = len(payload)
        head = bytearray([0x80 | opcode])
        if n < 126:
            head.append(0x80 | n)
        elif n < 1 << 16:
            head.append(0x80 | 126)
            head += n.to_bytes(2, "big")
        else:
            head.append(0x80 | 127)
            head += n.to_bytes(8, "big")
        key = os.urandom(4)
        head += key
        with self._write_lock:
            self.stream.sendall(bytes(head) + _mask(payload, key))

    def write_message(self, payload: bytes) -> None:
        self._send_frame(_OP_TEXT, payload)

    def _send_close(self) -> None:
        if self._close_sent:
            return
        self._close_sent = True
        try:
            self._send_frame(_OP_CLOSE, (1000).to_bytes(2, "big"))
        except OSError:
            pass

    def read_message(self) -> bytearray | None:
        fragments: list[bytes] = []
        while True:
            head = self.reader.read_exact(2)
            if head is None:
                return None
            fin, opcode = head[0] & 0x80, head[0] & 0x0F
            masked, length = head[1] & 0x80, head[1] & 0x7F
            if length == 126:
                ext = self.reader.read_exact(2)
                if ext is None:
                    return None
                length = int.from_bytes(ext, "big")
            elif length == 127:
                ext = self.reader.read_exact(8)
                if ext is None:
                    return None
                length = int.from_bytes(ext, "big")
            key = self.reader.read_exact(4) if masked else None
            payload = self.reader.read_exact(length)
            if payload is None or (masked and key is None):
                return None
            if key is not None:
                payload = bytearray(_mask(bytes(payload), bytes(key)))
            if opcode == _OP_PING:
                try:
                    self._send_frame(_OP_PONG, bytes(payload))
                except OSError:
                    return None
                continue
            if opcode == _OP_PONG:
                continue
            if opcode == _OP_CLOSE:
                self._send_close()
                return None
            if opcode in (_OP_TEXT, _OP_BINARY):
                fragments = [payload]
            elif opcode == _OP_CONT:
                fragments.append(payload)
            else:
                log.debug("ignoring WebSocket frame with opcode %d", opcode)
                continue
            if fin:
                if len(fragments) == 1:
                    return fragments[0]
                return bytearray(b"".join(fragments))

    def finish(self, timeout: float | None) -> None:
        self._send_close()
        self._shutdown_socket()

