"""Running harnessd as a service: graceful drain on SIGTERM, systemd's notify
protocol and socket activation, and --config files. Black-box: the real
binary, real sockets, real signals."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from harnessd_helpers import (SHUTTING_DOWN, _die_with_parent, error_of, harnessd_bin, read_log, result_of,
                              wait_for_log)


def ws_port(d) -> int:
    return int([u for u in d.listen if u.startswith("ws://")][0].rsplit(":", 1)[1])


def healthz(port: int) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", "/healthz")
    res = conn.getresponse()
    return res.status, json.loads(res.read())


def wait_events(conn, session_id: str, count: int, timeout: float = 10.0) -> None:
    conn.reader.wait(lambda: len(conn.session_events(session_id)) >= count, timeout)
    assert len(conn.session_events(session_id)) >= count


# ---------------------------------------------------------------------------
# drain


def test_sigterm_lets_a_running_turn_finish_and_refuses_new_work(spawn):
    d = spawn(args=["--listen", "ws://127.0.0.1:0"])
    port = ws_port(d)
    c = d.connect()
    c.initialize()
    rid = c.prompt("slow", "@delay 200\n@chunks 10 8")  # about 2 s
    wait_events(c, "slow", 4)
    d.signal(signal.SIGTERM)
    time.sleep(0.3)

    status, body = healthz(port)
    assert (status, body["status"]) == (503, "draining")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", d.port), timeout=2)
    other = error_of(c.response(c.prompt("other", "hi")))
    assert other["code"] == SHUTTING_DOWN

    resp = c.response(rid, timeout=10)
    assert result_of(resp) == {"status": "ok", "reason": {"kind": "completed"}}
    assert d.wait_exit(10) == 0
    _, events = read_log(d.log_path("slow"))
    assert events[-1]["type"] == "turn/end" and events[-1]["data"]["reason"] == {"kind": "completed"}
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert events == c.session_events("slow"), "nothing lost from the log"
    assert "drain: 1 turn(s) finished, 0 cancelled" in d.stderr()


def test_a_turn_longer_than_the_drain_timeout_is_aborted_with_reason_shutdown(spawn):
    d = spawn(args=["--drain-timeout-ms", "300"])
    c = d.connect()
    c.initialize()
    rid = c.prompt("long", "@chunks 100 8\n@delay 50")  # about 5 s
    wait_events(c, "long", 4)
    started = time.monotonic()
    d.signal(signal.SIGTERM)
    resp = c.response(rid, timeout=10)
    assert time.monotonic() - started < 3
    assert result_of(resp) == {"status": "aborted", "reason": {"kind": "aborted", "reason": "shutdown"}}
    assert d.wait_exit(10) == 0
    _, events = read_log(d.log_path("long"))
    assert events[-1]["data"]["reason"] == {"kind": "aborted", "reason": "shutdown"}
    assert events == c.session_events("long")
    assert "drain: 0 turn(s) finished, 1 cancelled" in d.stderr()


def test_a_second_signal_during_the_drain_exits_at_once(spawn):
    d = spawn()
    c = d.connect()
    c.initialize()
    c.prompt("long", "@chunks 100 8\n@delay 50")
    wait_events(c, "long", 4)
    d.signal(signal.SIGTERM)
    time.sleep(0.2)
    started = time.monotonic()
    d.signal(signal.SIGTERM)
    d.wait_exit(5)
    assert time.monotonic() - started < 2


# ---------------------------------------------------------------------------
# systemd


class NotifySocket:
    """What systemd's manager side does: a datagram socket the service writes to."""

    def __init__(self, path: Path):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(10)

    def next(self, timeout: float = 10.0) -> str:
        self.sock.settimeout(timeout)
        return self.sock.recv(4096).decode()

    def close(self) -> None:
        self.sock.close()


def test_ready_is_sent_once_the_listeners_accept_and_stopping_at_the_drain(spawn, tmp_path):
    notify = NotifySocket(tmp_path / "notify.sock")
    try:
        d = spawn(args=["--listen", "ws://127.0.0.1:0"],
                  env={"NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "200000"}, ready_timeout=10)
        messages = [notify.next()]
        assert messages == ["READY=1"] or messages == ["WATCHDOG=1"]
        while "READY=1" not in messages:
            messages.append(notify.next())
        # READY=1 means every listener accepts.
        socket.create_connection(("127.0.0.1", d.port), timeout=2).close()
        assert healthz(ws_port(d))[0] == 200
        # The watchdog is fed at half WATCHDOG_USEC.
        started = time.monotonic()
        pings = 0
        while pings < 3:
            if notify.next(2) == "WATCHDOG=1":
                pings += 1
        assert time.monotonic() - started < 1.5
        d.signal(signal.SIGTERM)
        while (message := notify.next()) == "WATCHDOG=1":
            pass
        assert message == "STOPPING=1"
        assert d.wait_exit(10) == 0
    finally:
        notify.close()


def test_socket_activation_takes_the_listeners_from_systemd(tmp_path):
    """A parent binds the sockets and passes them as fds 3 and 4 with LISTEN_FDS,
    as systemd does for harnessd.socket."""
    ws_sock = socket.create_server(("127.0.0.1", 0))
    tcp_sock = socket.create_server(("127.0.0.1", 0))
    ws_port_, tcp_port = ws_sock.getsockname()[1], tcp_sock.getsockname()[1]
    fds = (ws_sock.fileno(), tcp_sock.fileno())

    def to_3_and_4() -> None:
        _die_with_parent()
        # Dup above 4 first, so that placing one never clobbers the other.
        high = [os.dup(fd) for fd in fds]
        for target, fd in zip((3, 4), high):
            os.dup2(fd, target)
            os.set_inheritable(target, True)

    root = tmp_path / "sessions"
    env = dict(os.environ, LISTEN_FDS="2", LISTEN_FDNAMES="ws:tcp")
    proc = subprocess.Popen(
        ["sh", "-c", 'LISTEN_PID=$$ exec "$0" "$@"', harnessd_bin(), "--session-root", str(root),
         "--ready-file", str(tmp_path / "ready.json")],
        # 3 and 4 are kept open in the child: they are placed before the
        # other descriptors are closed.
        env=env, preexec_fn=to_3_and_4, pass_fds=(3, 4, *fds), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        ws_sock.close()
        tcp_sock.close()
        deadline = time.monotonic() + 10
        while not (tmp_path / "ready.json").exists():
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        listen = json.loads((tmp_path / "ready.json").read_text())["listen"]
        assert listen == [f"ws://127.0.0.1:{ws_port_}", f"tcp://127.0.0.1:{tcp_port}"]
        assert healthz(ws_port_)[0] == 200
        with socket.create_connection(("127.0.0.1", tcp_port), timeout=5) as s:
            s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\n')
            reply = json.loads(s.makefile().readline())
            assert reply["result"]["serverInfo"]["implementation"] == "harnessd"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    assert "LISTEN_FDS" not in (proc.stderr.read().decode())


def test_a_wrongly_named_activated_socket_is_a_clear_error(tmp_path):
    sock = socket.create_server(("127.0.0.1", 0))
    env = dict(os.environ, LISTEN_FDS="1", LISTEN_FDNAMES="http")

    def to_3() -> None:
        os.dup2(sock.fileno(), 3)
        os.set_inheritable(3, True)

    proc = subprocess.run(["sh", "-c", 'LISTEN_PID=$$ exec "$0" "$@"', harnessd_bin(), "--session-root",
                           str(tmp_path / "s")], env=env, preexec_fn=to_3, pass_fds=(3, sock.fileno()),
                          capture_output=True, text=True, timeout=10)
    sock.close()
    assert proc.returncode == 1
    assert 'FileDescriptorName must be ws, tcp, wss or tls' in proc.stderr


# ---------------------------------------------------------------------------
# --config


def run_daemon(args: list[str], cwd: Path, timeout: float = 10) -> subprocess.CompletedProcess:
    return subprocess.run([harnessd_bin(), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=_die_with_parent)


def test_a_config_file_sets_flags_and_the_command_line_wins(tmp_path):
    config = tmp_path / "harnessd.toml"
    config.write_text(f"""
# a commented config
listen = ["tcp://127.0.0.1:0", "ws://127.0.0.1:0"]
session-root = "{tmp_path / 'from-config'}"
ready-file = "{tmp_path / 'ready.json'}"
store = "jsonl"
sync = "batch"
sync-interval-ms = 50
threads = 2
drain-timeout-ms = 1000
log-level = "warn"
max-frame-bytes = 65536
allow-origin = ["https://a.example", "https://b.example"]
ws-deflate = true
max-tokens-as-success = false
""")
    proc = subprocess.Popen([harnessd_bin(), "--config", str(config), "--session-root", str(tmp_path / "from-flag")],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_die_with_parent)
    try:
        deadline = time.monotonic() + 10
        while not (tmp_path / "ready.json").exists():
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        listen = json.loads((tmp_path / "ready.json").read_text())["listen"]
        assert [u.split(":")[0] for u in listen] == ["tcp", "ws"]
        port = int(listen[0].rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            f = s.makefile("rwb")
            f.write(b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\n'
                    b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"k",'
                    b'"contentBlocks":[{"type":"text","text":"hello"}]}}\n')
            f.flush()
            while json.loads(f.readline()).get("id") != 2:
                pass
            # max-frame-bytes = 65536 from the file
            f.write(b'{"jsonrpc":"2.0","id":3,"method":"x","params":"' + b"a" * 70000 + b'"}\n')
            f.flush()
            assert json.loads(f.readline())["error"]["code"] == -32600
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
    stderr = proc.stderr.read()
    assert (tmp_path / "from-flag" / "k.jsonl").exists(), "the command line wins"
    assert not (tmp_path / "from-config").exists()
    assert "[info]" not in stderr, "log-level from the file"


@pytest.mark.parametrize("text,line,needle", [
    ('listen = ["tcp://127.0.0.1:0"]\nbogus-key = 1\n', 2, 'unknown key "bogus-key"'),
    ('threads = 2\nthreads = 3\n', 2, "redefine"),
    ('log-level = "loud"\n', 1, 'key "log-level"'),
    ('threads = "many"\n', 1, 'key "threads"'),
    ('[section]\nthreads = 2\n', 1, 'unknown key "section"'),
    ('[listen]\nx = 2\n', 1, '"listen" must be a string, a number, a boolean or a list'),
    ('listen = [["x"]]\n', 1, '"listen" must be a list of strings or numbers'),
])
def test_a_bad_config_file_names_the_key_and_the_line(tmp_path, text, line, needle):
    config = tmp_path / "bad.toml"
    config.write_text(text)
    proc = run_daemon(["--config", str(config), "--stdio"], tmp_path)
    assert proc.returncode != 0
    assert f"line {line}" in proc.stderr, proc.stderr
    assert needle in proc.stderr, proc.stderr
    assert str(config) in proc.stderr


def test_a_missing_config_file_is_an_error(tmp_path):
    proc = run_daemon(["--config", str(tmp_path / "nope.toml"), "--stdio"], tmp_path)
    assert proc.returncode != 0
    assert "nope.toml" in proc.stderr
