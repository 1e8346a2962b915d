"""Byte transports carrying NDJSON frames to and from the runtime.

A transport moves whole lines; it knows nothing about JSON-RPC. Two exist:
:class:`StdioTransport` spawns the runtime as a child process and talks over
its stdin/stdout, :class:`TcpTransport` connects to a listening daemon.
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import socket
import subprocess
import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Mapping, Sequence

from .errors import RuntimeNotFoundError, TransportClosed

__all__ = ["Transport", "StdioTransport", "TcpTransport", "parse_address", "STDERR_TAIL_BYTES"]

log = logging.getLogger("deepseek_harness.transport")
runtime_log = logging.getLogger("deepseek_harness.runtime")

#: How much of the runtime's stderr an error message carries.
STDERR_TAIL_BYTES = 4096
_STDERR_LINE_LIMIT = 8192
_STDERR_MAX_LINES = 512


class Transport(ABC):
    """A bidirectional line channel. ``readline`` is called by one thread only."""

    @abstractmethod
    def open(self) -> None:
        """Connect or spawn. Raises HarnessError subclasses on failure."""

    @abstractmethod
    def readline(self) -> bytes:
        """The next line including its newline; ``b""`` at end of stream."""

    @abstractmethod
    def write(self, data: bytes) -> None:
        """Write and flush *data*; raises OSError when the peer is gone."""

    @abstractmethod
    def terminate(self, timeout: float) -> None:
        """End the conversation: close our sending side, wait up to *timeout*
        for the peer to finish, then force it. Afterwards ``readline``
        returns ``b""`` promptly."""

    @abstractmethod
    def release(self) -> None:
        """Free every resource once the reader has stopped. Idempotent."""

    def closed_error(self, reason: str | None = None) -> TransportClosed:
        """The error to fail requests with once the stream has ended."""

        return TransportClosed(reason or f"connection to {self.describe()} closed")

    @abstractmethod
    def describe(self) -> str:
        """A short human-readable name of the peer."""


class StdioTransport(Transport):
    """Runs *command* as a child process speaking NDJSON on stdin/stdout.

    The child's stderr is drained by a background thread into a bounded
    buffer (and logged at DEBUG on the ``deepseek_harness.runtime`` logger);
    its tail is attached to :class:`TransportClosed` errors.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        if not command:
            raise ValueError("command must not be empty")
        self.command = [os.fspath(part) for part in command]
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.process: subprocess.Popen[bytes] | None = None
        self._stderr_lines: collections.deque[bytes] = collections.deque(maxlen=_STDERR_MAX_LINES)
        self._stderr_lock = threading.Lock()
        self._stderr_thread: threading.Thread | None = None
        self._released = False

    def describe(self) -> str:
        return Path(self.command[0]).name

    def open(self) -> None:
        try:
            self.process = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                cwd=self.cwd,
                bufsize=0,
            )
        except FileNotFoundError as exc:
            raise RuntimeNotFoundError(f"cannot start runtime {self.command[0]!r}: {exc.strerror}") from exc
        except PermissionError as exc:
            raise RuntimeNotFoundError(f"cannot execute runtime {self.command[0]!r}: {exc.strerror}") from exc
        self._stderr_thread = threading.Thread(
            target=self._drain_stderr, name=f"harnessd-stderr-{self.process.pid}", daemon=True
        )
        self._stderr_thread.start()
        log.debug("started %s (pid %d)", self.command, self.process.pid)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def returncode(self) -> int | None:
        return self.process.poll() if self.process else None

    def _drain_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        stream = self.process.stderr
        try:
            while True:
                line = stream.readline(_STDERR_LINE_LIMIT)
                if not line:
                    break
                with self._stderr_lock:
                    self._stderr_lines.append(line)
                if runtime_log.isEnabledFor(logging.DEBUG):
                    runtime_log.debug("%s", line.decode("utf-8", "replace").rstrip("\r\n"))
        except (OSError, ValueError):
            pass

    def stderr_tail(self, limit: int = STDERR_TAIL_BYTES) -> str:
        """The last *limit* bytes the runtime wrote to stderr, decoded."""

        with self._stderr_lock:
            data = b"".join(self._stderr_lines)
        return data[-limit:].decode("utf-8", "replace")

    def readline(self) -> bytes:
        assert self.process is not None and self.process.stdout is not None
        return self.process.stdout.readline()

    def write(self, data: bytes) -> None:
        assert self.process is not None and self.process.stdin is not None
        try:
            self.process.stdin.write(data)
            self.process.stdin.flush()
        except ValueError as exc:  # write to a closed file
            raise BrokenPipeError(str(exc)) from exc

    def _close_stdin(self) -> None:
        if self.process is not None and self.process.stdin is not None:
            try:
                self.process.stdin.close()
            except OSError:
                pass

    def terminate(self, timeout: float) -> None:
        proc = self.process
        if proc is None:
            return
        self._close_stdin()
        try:
            proc.wait(timeout=max(timeout, 0.0))
            return
        except subprocess.TimeoutExpired:
            log.warning("%s (pid %d) did not exit within %.1fs; killing it", self.describe(), proc.pid, timeout)
        proc.kill()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - unkillable process
            log.error("%s (pid %d) survived SIGKILL", self.describe(), proc.pid)

    def release(self) -> None:
        if self._released or self.process is None:
            return
        self._released = True
        proc = self.process
        if proc.poll() is None:
            self.terminate(0)
        if self._stderr_thread is not None:
            self._stderr_thread.join(timeout=2)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass

    def closed_error(self, reason: str | None = None) -> TransportClosed:
        proc = self.process
        returncode: int | None = None
        if proc is not None:
            # stdout reached EOF: give the process a moment to exit and the
            # stderr thread a moment to collect what it wrote last.
            try:
                returncode = proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                returncode = None
            if self._stderr_thread is not None and returncode is not None:
                self._stderr_thread.join(timeout=1)
        tail = self.stderr_tail()
        if reason is None:
            if returncode is None:
                reason = f"{self.describe()} closed its stdout"
            elif returncode < 0:
                try:
                    name = signal.Signals(-returncode).name
                except ValueError:
                    name = str(-returncode)
                reason = f"{self.describe()} was killed by signal {name}"
            else:
                reason = f"{self.describe()} exited with code {returncode}"
        message = reason
        if tail.strip():
            message += f"\n--- last {STDERR_TAIL_BYTES} bytes of {self.describe()} stderr ---\n{tail.rstrip()}"
        return TransportClosed(message, returncode=returncode, stderr_tail=tail)


def parse_address(address: str) -> tuple[str, int]:
    """Split ``host:port``, ``tcp://host:port`` or ``[v6]:port``."""

    text = address.strip()
    if text.startswith("tcp://"):
        text = text[len("tcp://"):]
    elif "://" in text:
        raise ValueError(f"unsupported address scheme in {address!r} (expected tcp://HOST:PORT)")
    text = text.rstrip("/")
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ValueError(f"invalid address {address!r}")
        port_text = rest[1:]
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            raise ValueError(f"invalid address {address!r} (expected HOST:PORT)")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"invalid port in address {address!r}") from None
    if not host or not 0 < port < 65536:
        raise ValueError(f"invalid address {address!r}")
    return host, port


class TcpTransport(Transport):
    """Connects to ``harnessd --listen tcp://HOST:PORT``."""

    def __init__(self, address: str, *, connect_timeout: float = 10.0) -> None:
        self.address = address
        self.host, self.port = parse_address(address)
        self.connect_timeout = connect_timeout
        self._sock: socket.socket | None = None
        self._rfile = None
        self._shut = False
        self._released = False

    def describe(self) -> str:
        return f"harnessd at {self.host}:{self.port}"

    def open(self) -> None:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        except OSError as exc:
            raise TransportClosed(f"cannot connect to {self.describe()}: {exc}") from exc
        sock.settimeout(None)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        self._sock = sock
        self._rfile = sock.makefile("rb")

    def readline(self) -> bytes:
        assert self._rfile is not None
        return self._rfile.readline()

    def write(self, data: bytes) -> None:
        assert self._sock is not None
        self._sock.sendall(data)

    def terminate(self, timeout: float) -> None:
        if self._sock is None or self._shut:
            return
        self._shut = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def release(self) -> None:
        if self._released or self._sock is None:
            return
        self._released = True
        self.terminate(0)
        try:
            if self._rfile is not None:
                self._rfile.close()
        finally:
            self._sock.close()
