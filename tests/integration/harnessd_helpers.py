"""Black-box helpers for driving a harnessd process over stdio or TCP.

Everything here talks to the daemon only through its wire protocol
(docs: docs/protocol.md) and its session log files. Every wait is
bounded by a timeout so a misbehaving daemon fails a test instead of hanging it.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BIN = REPO_ROOT / "build" / "harnessd"

DEFAULT_TIMEOUT = 10.0
SERVER_NAME = "deepseek-harness-sdk-runtime"
METHODS = ["initialize", "session/prompt", "session/cancel", "shutdown", "session/list", "session/events",
           "session/subscribe", "session/unsubscribe", "tools/list", "session/approve", "session/answer",
           "session/delete"]

# JSON-RPC error codes (docs/protocol.md §10)
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SESSION_BUSY = -32001
NOT_INITIALIZED = -32002
SHUTTING_DOWN = -32003
UNAUTHORIZED = -32004


# HARNESSD_TEST_TLS=1 runs the suites over TLS: every tcp:// listener a test
# starts is tls://, every ws:// one wss://, with a throwaway CA made once per
# process; connections from these helpers (and ws_client) speak TLS. Tests
# keep their plain view of the URLs (tcp://, ws://).
TLS_MODE = os.environ.get("HARNESSD_TEST_TLS") == "1"
_tls_pki: Path | None = None

# HARNESSD_TEST_STORE=postgres runs the suites against --store postgres: one
# private PostgreSQL per process (pg_server.PgServer), one database per
# session root (a daemon restarted on the same root finds its sessions), and
# d.log_path(ID) reads the session back from the database in the jsonl
# format, so read_log() and wait_for_log() check the same bytes.
PG_MODE = os.environ.get("HARNESSD_TEST_STORE") == "postgres"
_pg_server = None
_pg_databases: dict[str, str] = {}


def pg_server():
    global _pg_server
    if _pg_server is None:
        from pg_server import PgServer
        _pg_server = PgServer()
    return _pg_server


def pg_database_for(session_root: Path) -> str:
    """The database that stands for a session root in PG_MODE (created on first use)."""
    key = str(Path(session_root).resolve())
    if key not in _pg_databases:
        name = f"r{len(_pg_databases) + 1}_{os.getpid()}"
        pg_server().create_database(name)
        _pg_databases[key] = name
    return _pg_databases[key]


class PgLog:
    """A session of the postgres store seen as its jsonl log (header line, then one
    line per event), for read_log(), wait_for_log() and tests that read lines."""

    def __init__(self, database: str, session_id: str):
        self.database = database
        self.session_id = session_id

    def __repr__(self) -> str:
        return f"<session {self.session_id!r} in database {self.database}>"

    def _literal(self) -> str:
        return "'" + self.session_id.replace("'", "''") + "'"

    def exists(self) -> bool:
        rows = pg_server().psql(f"SELECT count(*) FROM harnessd_sessions WHERE id = {self._literal()}",
                                db=self.database)
        return rows == ["1"]

    def read_bytes(self) -> bytes:
        # One row per line: the header, then the events in seq order.
        sql = (f"SELECT line FROM (SELECT -1 AS seq, header AS line FROM harnessd_sessions WHERE id = {self._literal()} "
               f"UNION ALL SELECT seq, event FROM harnessd_events WHERE session_id = {self._literal()}) AS t "
               f"ORDER BY seq")
        lines = pg_server().psql(sql, db=self.database)
        if not lines:
            raise FileNotFoundError(repr(self))
        return "".join(line + "\n" for line in lines).encode("utf-8")


def _log_file(path) -> Any:
    """A log to read: a PgLog as it is, anything else as a Path."""
    return path if isinstance(path, PgLog) else Path(path)


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d: Path, name: str) -> None:
    """A self-signed EC CA: NAME.pem and NAME.key in d."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
            "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=d)


def make_server_cert(d: Path, ca: str, name: str) -> None:
    """NAME.pem/NAME.key for 127.0.0.1 and localhost, signed by CA."""
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=harnessd",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
            "-days", "2", "-extfile", "san.ext", "-out", f"{name}.pem", cwd=d)


def suite_pki() -> Path:
    """The TLS mode's CA (ca.pem) and server pair (server.pem, server.key)."""
    global _tls_pki
    if _tls_pki is None:
        d = Path(tempfile.mkdtemp(prefix="harnessd-tls-"))
        make_ca(d, "ca")
        make_server_cert(d, "ca", "server")
        _tls_pki = d
    return _tls_pki


def suite_tls_context() -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(suite_pki() / "ca.pem"))


def tls_args(args: list[str]) -> list[str]:
    """A daemon's arguments in TLS mode: tcp:// and ws:// listeners as tls:// and wss://."""
    out = [a.replace("tcp://", "tls://", 1) if a.startswith("tcp://") else
           a.replace("ws://", "wss://", 1) if a.startswith("ws://") else a for a in args]
    return out + ["--tls-cert", str(suite_pki() / "server.pem"), "--tls-key", str(suite_pki() / "server.key")]


def harnessd_bin() -> str:
    """Path of the daemon under test; fails (never skips) when it is missing."""
    path = os.environ.get("HARNESSD_BIN") or str(DEFAULT_BIN)
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        pytest.fail(
            f"harnessd binary not found or not executable: {path!r} "
            f"(build it first, or point HARNESSD_BIN at it)",
            pytrace=False,
        )
    return path


def _die_with_parent() -> None:
    """preexec_fn: make the kernel SIGKILL the daemon if the test runner dies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:  # pragma: no cover - best effort only
        pass


# ---------------------------------------------------------------------------
# frames


class Frame:
    """One NDJSON line received from the daemon: its raw bytes and parsed value."""

    __slots__ = ("raw", "obj", "error", "at")

    def __init__(self, raw: bytes, obj: Any, error: str | None, at: float):
        self.raw = raw
        self.obj = obj
        self.error = error
        self.at = at

    def __repr__(self) -> str:
        return f"Frame({self.raw[:300]!r})"


def is_response(obj: Any, rid: Any = ...) -> bool:
    if not isinstance(obj, dict) or "id" not in obj or "method" in obj:
        return False
    if "result" not in obj and "error" not in obj:
        return False
    return rid is ... or (obj["id"] == rid and type(obj["id"]) is type(rid))


def is_notification(obj: Any, method: str | None = None) -> bool:
    if not isinstance(obj, dict) or "id" in obj or "method" not in obj:
        return False
    return method is None or obj["method"] == method


class FrameReader:
    """Background thread that splits a byte stream into NDJSON frames."""

    def __init__(self, read: Callable[[int], bytes], name: str):
        self._read = read
        self._buf = b""
        self.frames: list[Frame] = []
        self.eof = False
        self.cond = threading.Condition()
        self.stopped = False
        self._thread = threading.Thread(target=self._run, name=f"reader-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                data = self._read(1 << 16)
            except socket.timeout:
                if self.stopped:
                    data = b""
                else:
                    continue
            except (OSError, ValueError):
                data = b""
            if not data:
                with self.cond:
                    if self._buf:
                        self._add(self._buf, partial=True)
                        self._buf = b""
                    self.eof = True
                    self.cond.notify_all()
                return
            with self.cond:
                self._buf += data
                while True:
                    nl = self._buf.find(b"\n")
                    if nl < 0:
                        break
                    line, self._buf = self._buf[:nl], self._buf[nl + 1:]
                    self._add(line)
                self.cond.notify_all()

    def _add(self, line: bytes, partial: bool = False) -> None:
        now = time.monotonic()
        if partial:
            self.frames.append(Frame(line, None, "unterminated line at EOF", now))
            return
        try:
            obj = json.loads(line.decode("utf-8"))
            err = None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            obj, err = None, f"not a JSON line: {exc}"
        self.frames.append(Frame(line, obj, err, now))

    def wait(self, pred: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not pred():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
            return True

    def join(self, timeout: float = 2.0) -> None:
        self._thread.join(timeout)


# ---------------------------------------------------------------------------
# connections


def socket_io(sock: socket.socket, tls: bool) -> tuple[Callable[[int], bytes], Callable[[bytes], None],
                                                      Callable[[], None], list]:
    """recv/write/close for a Conn over `sock`. One SSL object must not be used by two
    threads at once (a TLS 1.3 ticket read racing a write can lose the write), so over TLS
    the reader polls briefly under the writers' lock. Readers appended to the returned
    list are stopped on close."""
    lock = threading.Lock()
    closed = threading.Event()
    readers: list = []
    recv = sock.recv
    if tls:
        def recv(size: int) -> bytes:
            with lock:
                if closed.is_set():
                    return b""  # closed: SSLSocket.shutdown dropped the TLS layer
                sock.settimeout(0.02)
                try:
                    return sock.recv(size)
                except ssl.SSLWantReadError:
                    raise socket.timeout() from None
                finally:
                    sock.settimeout(0.5)

    def write(data: bytes) -> None:
        deadline = time.monotonic() + 30
        view = memoryview(data)
        with lock:
            while view:
                try:
                    sent = sock.send(view)
                except socket.timeout:
                    if time.monotonic() > deadline:
                        raise AssertionError("send to harnessd did not complete within 30s")
                    continue
                view = view[sent:]

    def close() -> None:
        # Under the lock: once SSLSocket.shutdown runs, a recv would read raw TLS records.
        with lock:
            closed.set()
            for r in readers:
                r.stopped = True
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    return recv, write, close, readers


class Conn:
    """A client connection (stdio pipes or a TCP socket) speaking NDJSON."""

    def __init__(self, name: str, reader: FrameReader, write: Callable[[bytes], None],
                 close: Callable[[], None], diag: Callable[[], str] = lambda: ""):
        self.name = name
        self.diag = diag
        self.reader = reader
        self._write = write
        self._close = close
        self.cursor = 0
        self._next_id = 1000
        self.closed = False

    # -- sending ----------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        self._send(data)

    def _send(self, data: bytes) -> None:
        try:
            self._write(data)
        except OSError as exc:
            raise AssertionError(f"{self.name}: write failed ({exc!r}){self.diag()}") from None

    def send_pieces(self, data: bytes, cuts: Iterable[int], pause: float = 0.03) -> None:
        """Send `data` split at the given byte offsets, pausing between writes."""
        last = 0
        for cut in sorted(cuts):
            self._send(data[last:cut])
            time.sleep(pause)
            last = cut
        self._send(data[last:])

    def send(self, obj: Any) -> None:
        self._send(encode(obj))

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def request(self, method: str, params: Any = ..., rid: Any = None) -> Any:
        """Send a request; return its id."""
        if rid is None:
            rid = self.new_id()
        self.send(make_request(method, params, rid))
        return rid

    def initialize(self, timeout: float = DEFAULT_TIMEOUT, **params: Any) -> dict:
        rid = self.request("initialize", params)
        resp = self.response(rid, timeout)
        assert "result" in resp, f"initialize failed: {resp}"
        return resp["result"]

    def prompt(self, session_id: str, text: str, rid: Any = None) -> Any:
        return self.request("session/prompt", prompt_params(session_id, text), rid)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._close()

    # -- receiving --------------------------------------------------------
    @property
    def frames(self) -> list[Frame]:
        with self.reader.cond:
            return list(self.reader.frames)

    def next_frame(self, timeout: float = DEFAULT_TIMEOUT) -> dict:
        """The next frame after the cursor (sequential consumption)."""
        i = self.cursor
        ok = self.reader.wait(lambda: len(self.reader.frames) > i or self.reader.eof, timeout)
        with self.reader.cond:
            if len(self.reader.frames) > i:
                frame = self.reader.frames[i]
            elif not ok:
                raise AssertionError(f"{self.name}: no frame within {timeout}s{self.diag()}")
            else:
                raise AssertionError(f"{self.name}: connection closed while waiting for a frame{self.diag()}")
        self.cursor = i + 1
        assert frame.error is None, f"{self.name}: daemon wrote a bad frame ({frame.error}): {frame.raw[:500]!r}"
        return frame.obj

    def wait_frame(self, pred: Callable[[dict], bool], timeout: float = DEFAULT_TIMEOUT,
                   start: int = 0, what: str = "frame") -> tuple[int, dict]:
        """Index and value of the first frame at/after `start` satisfying pred."""
        found: list[tuple[int, dict]] = []
        scanned = [start]

        def check() -> bool:
            frames = self.reader.frames
            for i in range(scanned[0], len(frames)):
                f = frames[i]
                if f.error is not None:
                    raise AssertionError(f"{self.name}: daemon wrote a bad frame ({f.error}): {f.raw[:500]!r}")
                if pred(f.obj):
                    found.append((i, f.obj))
                    return True
            scanned[0] = len(frames)
            return self.reader.eof

        self.reader.wait(check, timeout)
        if not found:
            state = "connection closed" if self.reader.eof else f"timeout {timeout}s"
            raise AssertionError(f"{self.name}: no {what} ({state}); last frames: {self.frames[-5:]}{self.diag()}")
        return found[0]

    def response(self, rid: Any, timeout: float = DEFAULT_TIMEOUT) -> dict:
        return self.wait_frame(lambda o: is_response(o, rid), timeout, what=f"response to id {rid!r}")[1]

    def response_index(self, rid: Any, timeout: float = DEFAULT_TIMEOUT) -> tuple[int, dict]:
        return self.wait_frame(lambda o: is_response(o, rid), timeout, what=f"response to id {rid!r}")

    def session_events(self, session_id: str, upto: int | None = None, start: int = 0) -> list[dict]:
        """Events of `session.event` notifications for session_id, in arrival order."""
        out = []
        frames = self.frames
        for f in frames[start:upto]:
            o = f.obj
            if is_notification(o, "session.event") and o["params"]["sessionId"] == session_id:
                out.append(o["params"]["event"])
        return out

    def run_prompt(self, session_id: str, text: str, timeout: float = DEFAULT_TIMEOUT):
        """Prompt and wait for the answer. Returns (response, events of session_id before it)."""
        start = len(self.frames)
        rid = self.prompt(session_id, text)
        idx, resp = self.response_index(rid, timeout)
        return resp, self.session_events(session_id, idx, start)

    def expect_quiet(self, duration: float = 0.1) -> None:
        """Assert nothing beyond what was already consumed arrives within duration."""
        time.sleep(duration)
        extra = self.frames[self.cursor:]
        assert not extra, f"{self.name}: unexpected frames: {extra}{self.diag()}"

    def assert_no_new_frames(self, duration: float = 0.1) -> None:
        """Assert no frame arrives within duration (counting from now)."""
        n = len(self.frames)
        time.sleep(duration)
        extra = self.frames[n:]
        assert not extra, f"{self.name}: unexpected frames: {extra}"

    def wait_eof(self, timeout: float = DEFAULT_TIMEOUT) -> bool:
        return self.reader.wait(lambda: self.reader.eof, timeout)


def make_request(method: Any, params: Any = ..., rid: Any = None) -> dict:
    req: dict = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not ...:
        req["params"] = params
    return req


def prompt_params(session_id: str, text: str) -> dict:
    return {"sessionId": session_id, "contentBlocks": [{"type": "text", "text": text}]}


def encode(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


def error_of(resp: dict) -> dict:
    assert "error" in resp and "result" not in resp, f"expected an error response, got {resp}"
    err = resp["error"]
    assert isinstance(err, dict) and isinstance(err.get("code"), int) and isinstance(err.get("message"), str), resp
    return err


def result_of(resp: dict) -> Any:
    assert "result" in resp and "error" not in resp, f"expected a result, got {resp}"
    assert resp.get("jsonrpc") == "2.0", resp
    return resp["result"]


# ---------------------------------------------------------------------------
# daemon process


class Daemon:
    def __init__(self, session_root: Path, *, stdio: bool = False, args: Iterable[str] = (),
                 stdin: Any = subprocess.PIPE, workdir: Path | None = None,
                 ready_timeout: float = DEFAULT_TIMEOUT, env: dict[str, str | None] | None = None):
        """env: variables to set (a None value removes one) on top of the inherited environment."""
        self.session_root = Path(session_root)
        self.session_root.mkdir(parents=True, exist_ok=True)
        self.workdir = Path(workdir or self.session_root.parent)
        self.stdio = stdio
        self.conns: list[Conn] = []
        self.port: int | None = None
        self.listen: list[str] = []
        self.stderr_path = self.workdir / f"harnessd-{os.getpid()}-{id(self)}.stderr"
        self._stderr = open(self.stderr_path, "wb")
        cmd = [harnessd_bin(), "--session-root", str(self.session_root), "--threads", "2"]
        if stdio:
            cmd.append("--stdio")
        else:
            self.ready_file = self.workdir / f"ready-{id(self)}.json"
            if self.ready_file.exists():
                self.ready_file.unlink()
            cmd += ["--listen", "tcp://127.0.0.1:0", "--ready-file", str(self.ready_file)]
        cmd += list(args)
        if TLS_MODE and not stdio:
            cmd = tls_args(cmd)
        if PG_MODE and "--store" not in cmd:
            self.pg_database = pg_database_for(self.session_root)
            cmd += ["--store", "postgres", "--postgres-url", pg_server().url(self.pg_database)]
        self.cmd = cmd
        proc_env = None
        if env is not None:
            proc_env = dict(os.environ)
            for k, v in env.items():
                if v is None:
                    proc_env.pop(k, None)
                else:
                    proc_env[k] = v
        self.proc = subprocess.Popen(
            cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=self._stderr,
            cwd=str(self.workdir), bufsize=0, preexec_fn=_die_with_parent, env=proc_env,
        )
        self._stdout_reader = FrameReader(self._read_stdout, "stdout")
        if not stdio:
            self._wait_ready(ready_timeout)

    # -- lifecycle --------------------------------------------------------
    def _read_stdout(self, n: int) -> bytes:
        return os.read(self.proc.stdout.fileno(), n)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"harnessd exited with {self.proc.returncode} before it was ready; stderr:\n{self.stderr()}")
            try:
                data = json.loads(self.ready_file.read_text())
                urls = data["listen"]
                if TLS_MODE:  # the tests' plain view of the TLS listeners
                    urls = [u.replace("tls://", "tcp://", 1).replace("wss://", "ws://", 1) for u in urls]
                tcp = [u for u in urls if u.startswith("tcp://")]
                if tcp:
                    self.listen = urls
                    self.port = int(tcp[0].rsplit(":", 1)[1])
                    return
            except (OSError, ValueError, KeyError, TypeError):
                pass
            time.sleep(0.01)
        raise AssertionError(f"harnessd wrote no ready file within {timeout}s; stderr:\n{self.stderr()}")

    def diag(self) -> str:
        """Daemon state for failure messages: exit status and the tail of stderr."""
        time.sleep(0.05)
        rc = self.proc.poll()
        state = "running" if rc is None else (f"killed by signal {-rc}" if rc < 0 else f"exited {rc}")
        return f"\n[harnessd {state}; stderr tail:]\n{self.stderr()[-1500:]}"

    def stderr(self) -> str:
        try:
            self._stderr.flush()
            return self.stderr_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def wait_exit(self, timeout: float = DEFAULT_TIMEOUT) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"harnessd did not exit within {timeout}s; stderr:\n{self.stderr()}")

    def signal(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def terminate(self, timeout: float = DEFAULT_TIMEOUT) -> int:
        self.signal(signal.SIGTERM)
        return self.wait_exit(timeout)

    def kill(self) -> None:
        for c in self.conns:
            try:
                c.close()
            except Exception:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except Exception:
                pass
        self._stdout_reader.stopped = True
        self._stdout_reader.join(1)
        self._stderr.close()

    @property
    def stdout_frames(self) -> list[Frame]:
        with self._stdout_reader.cond:
            return list(self._stdout_reader.frames)

    # -- connections ------------------------------------------------------
    def stdio_conn(self) -> Conn:
        assert self.stdio, "not a --stdio daemon"
        if self.conns:
            return self.conns[0]
        fd = self.proc.stdin.fileno()
        lock = threading.Lock()

        def write(data: bytes) -> None:
            # A pipe write can block forever if the daemon stops reading; bound it.
            err: list[BaseException] = []

            def run() -> None:
                try:
                    with lock:
                        view = memoryview(data)
                        while view:
                            n = os.write(fd, view)
                            view = view[n:]
                except BaseException as exc:  # noqa: BLE001
                    err.append(exc)

            t = threading.Thread(target=run, daemon=True)
            t.start()
            t.join(30)
            if t.is_alive():
                raise AssertionError("write to harnessd stdin did not complete within 30s")
            if err:
                raise err[0]

        def close() -> None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

        conn = Conn("stdio", self._stdout_reader, write, close, self.diag)
        self.conns.append(conn)
        return conn

    def close_stdin(self) -> None:
        self.stdio_conn().close()

    def connect(self, timeout: float = DEFAULT_TIMEOUT) -> Conn:
        assert self.port is not None, "not a TCP daemon"
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        if TLS_MODE:
            sock = suite_tls_context().wrap_socket(sock, server_hostname="127.0.0.1")
        sock.settimeout(0.5)  # recv polls; sendall is bounded by this per chunk
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        n = len(self.conns)
        recv, write, close, stop = socket_io(sock, TLS_MODE)
        reader = FrameReader(recv, f"tcp{n}")
        stop.append(reader)

        conn = Conn(f"tcp#{n}", reader, write, close, self.diag)
        self.conns.append(conn)
        return conn

    # -- session logs -----------------------------------------------------
    def log_path(self, session_id: str) -> Path:
        if PG_MODE and hasattr(self, "pg_database"):
            return PgLog(self.pg_database, session_id)
        return log_path(self.session_root, session_id)


NOTIFICATIONS = {"session.event", "subagent.started", "subagent.finished"}


def hygiene(d: "Daemon") -> list[str]:
    """Checks every frame a daemon wrote: valid compact JSON-RPC, never a server request,
    at most one response per request id, nothing on stdout of a network daemon."""
    problems = []
    if not d.stdio and d.stdout_frames:
        problems.append(f"TCP daemon wrote to stdout: {d.stdout_frames[:3]}")
    for conn in d.conns:
        seen = set()
        for f in conn.frames:
            o = f.obj
            if f.error is not None:
                problems.append(f"{conn.name}: bad frame ({f.error}): {f.raw[:200]!r}")
                continue
            if not isinstance(o, dict) or o.get("jsonrpc") != "2.0":
                problems.append(f"{conn.name}: not a JSON-RPC 2.0 object: {f.raw[:200]!r}")
            elif "method" in o:
                if "id" in o:
                    problems.append(f"{conn.name}: daemon sent a request: {f.raw[:200]!r}")
                elif o["method"] not in NOTIFICATIONS:
                    problems.append(f"{conn.name}: unknown notification: {f.raw[:200]!r}")
            elif ("result" in o) == ("error" in o) or "id" not in o:
                problems.append(f"{conn.name}: malformed response: {f.raw[:200]!r}")
            elif o["id"] is not None:
                key = repr(o["id"])
                if key in seen:
                    problems.append(f"{conn.name}: second response for id {o['id']!r}: {f.raw[:200]!r}")
                seen.add(key)
    return problems


# ---------------------------------------------------------------------------
# session logs


def encode_session_id(session_id: str) -> str:
    """File-name encoding of a session id (bytes outside [A-Za-z0-9_.-], and a leading '.', as %XX)."""
    out = []
    for i, b in enumerate(session_id.encode("utf-8")):
        c = chr(b)
        if b < 128 and (c.isalnum() or c in "_-" or (c == "." and i > 0)):
            out.append(c)
        else:
            out.append("%%%02X" % b)
    return "".join(out)


def log_path(root: Path, session_id: str) -> Path:
    return Path(root) / (encode_session_id(session_id) + ".jsonl")


def read_log(path: Path, torn_tail_ok: bool = False) -> tuple[dict, list[dict]]:
    """Header and events of a session log; every line must be complete JSON.

    With `torn_tail_ok`, a last line without its '\n' is dropped: that is what
    a SIGKILL in the middle of an append leaves, and the store truncates it
    when the session is next opened.
    """
    raw = _log_file(path).read_bytes()
    if torn_tail_ok and not raw.endswith(b"\n"):
        raw = raw[:raw.rfind(b"\n") + 1]
    assert raw.endswith(b"\n"), f"{path}: log does not end with a newline: {raw[-200:]!r}"
    lines = raw.split(b"\n")[:-1]
    objs = []
    for n, line in enumerate(lines):
        try:
            objs.append(json.loads(line.decode("utf-8")))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise AssertionError(f"{path}: line {n} is not JSON ({exc}): {line[:300]!r}")
    assert objs, f"{path}: empty log"
    header = objs[0]
    assert header.get("type") == "session" and header.get("version") == 0, f"{path}: bad header {header}"
    return header, objs[1:]


def wait_for_log(path: Path, pred: Callable[[list[dict]], bool], timeout: float = DEFAULT_TIMEOUT) -> list[dict]:
    deadline = time.monotonic() + timeout
    events: list[dict] = []
    while time.monotonic() < deadline:
        try:
            raw = _log_file(path).read_bytes()
            lines = [ln for ln in raw.split(b"\n")[1:] if ln]
            events = []
            for ln in lines:
                try:
                    events.append(json.loads(ln))
                except ValueError:
                    break
            if pred(events):
                return events
        except OSError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"{path}: condition not reached within {timeout}s; events: {events[-5:]}")


# ---------------------------------------------------------------------------
# event validation (docs/protocol.md §6)

TURN_END_KINDS = {"completed", "aborted", "max-tokens", "error", "disposed", "rejected", "interrupted"}
USER_TRIGGER = {"kind": "message", "source": {"kind": "user"}}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_block(block: Any) -> None:
    assert isinstance(block, dict), block
    t = block.get("type")
    if t in ("text", "reasoning"):
        assert isinstance(block.get("text"), str), block
    elif t == "tool-call":
        assert isinstance(block.get("id"), str) and isinstance(block.get("name"), str), block
        assert "arguments" in block, block
    elif t == "tool-result":
        assert isinstance(block.get("toolCallId"), str) and "content" in block, block
    else:
        raise AssertionError(f"unknown content block type: {block}")


def check_event(ev: Any) -> None:
    """Validate one session event's envelope and data against §6."""
    assert isinstance(ev, dict), ev
    assert {"type", "seq", "time", "data"} <= set(ev), f"event envelope: {ev}"
    assert _is_int(ev["seq"]) and ev["seq"] >= 0, ev
    assert _is_int(ev["time"]), ev
    now_ms = time.time() * 1000
    assert abs(ev["time"] - now_ms) < 24 * 3600 * 1000, f"time is not epoch milliseconds: {ev}"
    t, d = ev["type"], ev["data"]
    assert isinstance(d, dict), ev
    if t == "turn/start":
        assert _is_int(d.get("turn")) and d["turn"] >= 0, ev
        assert d.get("trigger") == USER_TRIGGER, ev
    elif t == "user/message":
        assert isinstance(d.get("content"), list) and d["content"], ev
        for b in d["content"]:
            check_block(b)
        assert d.get("source") == {"kind": "user"}, ev
    elif t in ("step/start", "step/end"):
        assert _is_int(d.get("turn")) and _is_int(d.get("step")), ev
    elif t == "assistant/chunk":
        assert _is_int(d.get("turn")) and _is_int(d.get("step")), ev
        c = d.get("chunk")
        assert isinstance(c, dict), ev
        ct = c.get("type")
        if ct == "block-start":
            assert _is_int(c.get("index")) and isinstance(c.get("blockType"), str), ev
        elif ct in ("text-delta", "reasoning-delta"):
            assert _is_int(c.get("index")) and isinstance(c.get("text"), str), ev
        elif ct in ("tool-call-delta", "block-end"):
            assert _is_int(c.get("index")), ev
        elif ct == "usage":
            assert isinstance(c.get("usage"), dict), ev
        elif ct == "finish":
            assert isinstance(c.get("reason"), str), ev
        else:
            raise AssertionError(f"unknown chunk type: {ev}")
    elif t == "assistant/message":
        assert _is_int(d.get("turn")) and _is_int(d.get("step")), ev
        assert isinstance(d.get("content"), list), ev
        for b in d["content"]:
            check_block(b)
        prov = d.get("provenance")
        assert isinstance(prov, dict) and isinstance(prov.get("provider"), str) and isinstance(prov.get("model"), str), ev
        if "usage" in d:
            assert isinstance(d["usage"], dict), ev
    elif t == "tool/call":
        assert _is_int(d.get("turn")) and _is_int(d.get("step")), ev
        assert isinstance(d.get("callId"), str) and isinstance(d.get("name"), str), ev
        assert isinstance(d.get("arguments"), str), ev
        json.loads(d["arguments"])
    elif t == "tool/result":
        assert _is_int(d.get("turn")) and _is_int(d.get("step")), ev
        assert isinstance(d.get("callId"), str) and isinstance(d.get("isError"), bool), ev
        assert isinstance(d.get("content"), list), ev
        for b in d["content"]:
            check_block(b)
    elif t == "approval/requested":
        assert _is_int(d.get("turn")) and _is_int(d.get("step")), ev
        for k in ("callId", "approvalId", "toolName", "arguments", "reason"):
            assert isinstance(d.get(k), str), ev
        json.loads(d["arguments"])
    elif t == "approval/resolved":
        assert isinstance(d.get("approvalId"), str), ev
        assert (d.get("outcome"), d.get("source")) in {
            ("allowed-once", "client"), ("allowed-for-session", "client"), ("rejected", "client"),
            ("rejected", "timeout"), ("cancelled", "cancel")}, ev
    elif t == "question/requested":
        assert _is_int(d.get("turn")) and _is_int(d.get("step")), ev
        assert isinstance(d.get("callId"), str) and isinstance(d.get("questionId"), str), ev
        assert isinstance(d.get("questions"), list) and d["questions"], ev
    elif t == "question/resolved":
        assert isinstance(d.get("questionId"), str), ev
        assert d.get("outcome") in ("answered", "timeout", "cancelled"), ev
    elif t == "compact/start":
        assert _is_int(d.get("turn")), ev
    elif t == "compact/summary":
        assert isinstance(d.get("summary"), str) and d["summary"], ev
        shadowed = d.get("shadowedSeqs")
        assert isinstance(shadowed, list) and len(shadowed) == 2 and all(_is_int(x) for x in shadowed), ev
        assert shadowed[0] <= shadowed[1] < ev["seq"], ev
        assert _is_int(d.get("tokensBefore")) and _is_int(d.get("tokensAfter")), ev
    elif t == "compact/end":
        assert _is_int(d.get("turn")), ev
        assert "error" not in d or isinstance(d["error"], str), ev
    elif t == "context/message":
        assert d.get("source") == "AGENTS.md" and isinstance(d.get("path"), str), ev
        assert isinstance(d.get("content"), str), ev
    elif t == "request/header":
        assert isinstance(d.get("systemPrompt"), str) and isinstance(d.get("tools"), list), ev
        assert isinstance(d.get("model"), str) and isinstance(d.get("provider"), str), ev
        assert isinstance(d.get("settings"), dict) and _is_int(d["settings"].get("contextWindow")), ev
    elif t == "todo/write":
        assert isinstance(d.get("todos"), list), ev
    elif t == "turn/end":
        assert _is_int(d.get("turn")), ev
        r = d.get("reason")
        assert isinstance(r, dict) and r.get("kind") in TURN_END_KINDS, ev
    else:
        raise AssertionError(f"unknown event type: {ev}")


def check_contiguous(events: list[dict], first_seq: int | None = None) -> None:
    seqs = [e["seq"] for e in events]
    assert seqs, "no events"
    if first_seq is not None:
        assert seqs[0] == first_seq, f"first seq {seqs[0]}, expected {first_seq}"
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), f"seq not contiguous: {seqs}"


def check_turn(events: list[dict], turn: int | None = None) -> None:
    """One complete turn: turn/start .. turn/end, valid shapes, contiguous seq, sane steps."""
    for e in events:
        check_event(e)
    check_contiguous(events)
    assert events[0]["type"] == "turn/start", events[0]
    assert events[1]["type"] == "user/message", events[1]
    assert events[-1]["type"] == "turn/end", events[-1]
    assert [e["type"] for e in events].count("turn/start") == 1
    assert [e["type"] for e in events].count("turn/end") == 1
    t = events[0]["data"]["turn"]
    if turn is not None:
        assert t == turn, f"turn number {t}, expected {turn}"
    step = None
    open_step = False
    for e in events:
        d = e["data"]
        if "turn" in d:
            assert d["turn"] == t, f"event of another turn: {e}"
        if e["type"] == "step/start":
            assert not open_step, e
            step = 0 if step is None else step + 1
            assert d["step"] == step, f"step {d['step']}, expected {step}"
            open_step = True
        elif e["type"] == "step/end":
            assert open_step and d["step"] == step, e
            open_step = False
        elif e["type"] in ("assistant/chunk", "assistant/message"):
            assert open_step and d["step"] == step, e


def final_text(events: list[dict]) -> str:
    msgs = [e for e in events if e["type"] == "assistant/message"]
    assert msgs, "no assistant/message"
    return "".join(b["text"] for b in msgs[-1]["data"]["content"] if b["type"] == "text")


def text_deltas(events: list[dict], step: int | None = None) -> list[str]:
    return [e["data"]["chunk"]["text"] for e in events
            if e["type"] == "assistant/chunk" and e["data"]["chunk"]["type"] == "text-delta"
            and (step is None or e["data"]["step"] == step)]


def chunk_bytes(n: int, size: int) -> list[str]:
    return [chr(ord("a") + i % 26) * size for i in range(n)]
