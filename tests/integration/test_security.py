"""Safe by default (docs/protocol.md, Security model), tested as an attacker
would: a web page posting to the TCP port, a rebound DNS name, a network
listener without a token, principals reading each other's sessions, too
many connections, and the headers that keep the UI from being framed."""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import time

import pytest

from harnessd_helpers import (INVALID_PARAMS, TLS_MODE, UNAUTHORIZED, _die_with_parent, encode, error_of,
                              harnessd_bin, is_notification, result_of, tls_args)
from test_websocket import HOST, http_request, init_params, refused, ws_daemon
from ws_client import ws_conn

OK = {"status": "ok", "reason": {"kind": "completed"}}


def raw_tcp(d) -> socket.socket:
    sock = socket.create_connection((HOST, d.port), timeout=5)
    if TLS_MODE:
        from harnessd_helpers import suite_tls_context
        sock = suite_tls_context().wrap_socket(sock, server_hostname=HOST)
    return sock


def read_until_closed(sock: socket.socket, timeout: float = 5.0) -> bytes:
    sock.settimeout(timeout)
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, OSError):
            break
        if not chunk:
            break
        data += chunk
    return data


# -- 1. a web page posting to the NDJSON port ----------------------------------


def test_browser_post_to_tcp_port_gets_nothing_and_runs_nothing(spawn):
    d = spawn()
    body = (encode({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"onDisconnect": "continue"}}) +
            encode({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                    "params": {"sessionId": "victim", "contentBlocks": [{"type": "text", "text": "pwned"}]}}))
    request = (f"POST / HTTP/1.1\r\nHost: {HOST}:{d.port}\r\nOrigin: http://evil.example\r\n"
               f"Content-Type: text/plain\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    sock = raw_tcp(d)
    sock.sendall(request)
    answer = read_until_closed(sock)
    sock.close()
    assert answer == b"", f"an HTTP request got an answer: {answer!r}"
    time.sleep(0.2)
    # Nothing ran: the session does not exist.
    c = d.connect()
    c.initialize()
    listed = result_of(c.response(c.request("session/list", {})))
    assert all(s["sessionId"] != "victim" for s in listed["sessions"]), listed
    assert "HTTP request on a JSON-RPC listener" in d.stderr()


@pytest.mark.parametrize("first", [b"GET / HTTP/1.1\r\n", b"OPTIONS * HTTP/1.1\r\n", b"Host: 127.0.0.1\r\n",
                                   b"PUT /x HTTP/1.1\r\n", b"CONNECT a:1 HTTP/1.1\r\n"])
def test_http_looking_first_line_closes_silently(spawn, first):
    d = spawn()
    sock = raw_tcp(d)
    sock.sendall(first)
    assert read_until_closed(sock) == b""
    sock.close()


def test_after_initialize_bad_lines_are_answered_and_the_connection_stays(spawn):
    d = spawn()
    c = d.connect()
    c.initialize()
    c.send_raw(b"hello\n")
    assert error_of(c.wait_frame(lambda o: "error" in o, what="the parse error")[1])["code"] == -32700
    resp = c.run_prompt("still-here", "@reply yes")[0]
    assert result_of(resp) == OK


# -- 2. DNS rebinding against the HTTP/WebSocket port ---------------------------


def test_rebound_host_is_refused_on_every_path(spawn):
    d = ws_daemon(spawn)
    evil = f"evil.example:{d.ws_port}"
    scheme = "https" if TLS_MODE else "http"
    r = refused(d, headers={"Host": evil}, origin=f"{scheme}://{evil}")
    assert r.status == 421, r
    for path in ("/", "/healthz", "/metrics", "/app.js"):
        status, _, _ = http_request(d.ws_port, path, headers={"Host": evil})
        assert status == 421, (path, status)
    # Loopback names and the connected address, with this port, are served.
    for host in (f"127.0.0.1:{d.ws_port}", f"localhost:{d.ws_port}", f"LOCALHOST:{d.ws_port}"):
        status, _, _ = http_request(d.ws_port, "/healthz", headers={"Host": host})
        assert status == 200, host
    # The right name with another port is another origin.
    status, _, _ = http_request(d.ws_port, "/healthz", headers={"Host": "127.0.0.1:1"})
    assert status == 421
    status, _, _ = http_request(d.ws_port, "/healthz", headers={"Host": "127.0.0.1:x;script-src *"})
    assert status == 421
    assert "refused Host" in d.stderr()


def test_allow_host_serves_a_proxied_name(spawn):
    d = ws_daemon(spawn, "--allow-host", "chat.example.com")
    status, _, _ = http_request(d.ws_port, "/healthz", headers={"Host": "chat.example.com"})
    assert status == 200
    status, _, _ = http_request(d.ws_port, "/healthz", headers={"Host": "Chat.Example.com:443"})
    assert status == 200
    r = refused(d, headers={"Host": "chat.example.com"}, origin="https://chat.example.com")
    assert r.status == 403, "an allowed host does not make its Origin allowed"
    status, _, _ = http_request(d.ws_port, "/healthz", headers={"Host": "other.example.com"})
    assert status == 421


def test_security_headers_on_http_responses(spawn):
    d = ws_daemon(spawn)
    for path in ("/", "/healthz", "/nope"):
        _, headers, _ = http_request(d.ws_port, path)
        csp = headers.get("content-security-policy", "")
        assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp, (path, headers)
        assert f"ws://{HOST}:{d.ws_port}" in csp
        assert headers.get("x-frame-options") == "DENY"
        assert headers.get("x-content-type-options") == "nosniff"
        assert headers.get("referrer-policy") == "no-referrer"


# -- 3. no open network listener by accident -----------------------------------


def run_daemon(tmp_path, *args, timeout=10):
    cmd = [harnessd_bin(), "--session-root", str(tmp_path / "s"), *args]
    if TLS_MODE:
        cmd = tls_args(cmd)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=_die_with_parent)


@pytest.mark.parametrize("url", ["tcp://0.0.0.0:0", "ws://0.0.0.0:0", "tcp://[::]:0"])
def test_non_loopback_listener_without_auth_is_refused(tmp_path, url):
    r = run_daemon(tmp_path, "--listen", url)
    assert r.returncode == 2, r
    assert "--auth-token-file" in r.stderr and "--insecure-no-auth" in r.stderr, r.stderr


def test_non_loopback_listener_with_auth_or_insecure_flag_starts(spawn, tmp_path):
    token = tmp_path / "token"
    token.write_text("t0k3n\n")
    d = spawn(args=["--listen", "ws://0.0.0.0:0", "--auth-token-file", str(token)])
    assert any(u.startswith("ws://0.0.0.0:") or u.startswith("wss://0.0.0.0:") for u in
               json.loads(d.ready_file.read_text())["listen"])
    d2 = spawn(args=["--listen", "tcp://0.0.0.0:0", "--insecure-no-auth"], session_root=tmp_path / "s2")
    assert "without authentication (--insecure-no-auth)" in d2.stderr()


# -- 4. principals ---------------------------------------------------------------


def auth_file(tmp_path, principals: dict[str, tuple[str, bool]]):
    lines = []
    for name, (token, admin) in principals.items():
        lines += [f"[principals.{name}]", f'token = "sha256:{hashlib.sha256(token.encode()).hexdigest()}"']
        if admin:
            lines.append("admin = true")
    path = tmp_path / "auth.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def team(spawn, tmp_path):
    path = auth_file(tmp_path, {"alice": ("alice-token", False), "bob": ("bob-token", False),
                                "root": ("root-token", True)})
    return ws_daemon(spawn, "--auth-file", str(path))


def tcp_as(d, token):
    c = d.connect()
    c.initialize(authToken=token)
    return c


def test_principals_have_separate_namespaces(team):
    alice, bob = tcp_as(team, "alice-token"), tcp_as(team, "bob-token")
    resp, events = alice.run_prompt("demo", "@reply alice's secret")
    assert result_of(resp) == OK
    # Notifications name the session as its owner does.
    assert events, "alice's turn streamed no events under her own id"
    assert {f.obj["params"]["sessionId"] for f in alice.frames if is_notification(f.obj, "session.event")} == \
        {"demo"}
    resp, _ = bob.run_prompt("demo", "@reply bob's note")
    assert result_of(resp) == OK
    alice_only = alice.run_prompt("alice-only", "@reply hidden")[0]
    assert result_of(alice_only) == OK

    def listed(c):
        return {s["sessionId"] for s in result_of(c.response(c.request("session/list", {})))["sessions"]}

    assert listed(alice) == {"demo", "alice-only"}
    assert listed(bob) == {"demo"}
    bob_events = result_of(bob.response(bob.request("session/events", {"sessionId": "demo"})))["events"]
    assert "alice's secret" not in json.dumps(bob_events) and "bob's note" in json.dumps(bob_events)

    # Another namespace's id looks exactly like an id that does not exist.
    hidden = error_of(bob.response(bob.request("session/events", {"sessionId": "alice-only"})))
    missing = error_of(bob.response(bob.request("session/events", {"sessionId": "never-made"})))
    assert hidden["code"] == missing["code"] == INVALID_PARAMS
    assert hidden["message"].replace("alice-only", "X") == missing["message"].replace("never-made", "X")
    assert error_of(bob.response(bob.request("session/subscribe", {"sessionId": "alice-only"})))["code"] == \
        INVALID_PARAMS
    assert result_of(bob.response(bob.request("session/cancel", {"sessionId": "alice-only"}))) == \
        {"cancelled": False}
    # Bob cannot reach alice's namespace by naming it.
    assert error_of(bob.response(bob.request("session/events", {"sessionId": "@alice/alice-only"})))["code"] == \
        INVALID_PARAMS

    root = tcp_as(team, "root-token")
    everything = listed(root)
    assert {"@alice/demo", "@alice/alice-only", "@bob/demo"} <= everything
    root_events = result_of(root.response(root.request("session/events", {"sessionId": "@alice/alice-only"})))
    assert "hidden" in json.dumps(root_events["events"])


def test_principal_cancel_reaches_only_its_own_turn(team):
    alice, bob = tcp_as(team, "alice-token"), tcp_as(team, "bob-token")
    rid = alice.prompt("slow", "@delay 5000\n@reply late")
    alice.wait_frame(lambda o: is_notification(o, "session.event"), what="alice's turn started")
    assert result_of(bob.response(bob.request("session/cancel", {"sessionId": "slow"}))) == {"cancelled": False}
    assert result_of(alice.response(alice.request("session/cancel", {"sessionId": "slow"}))) == {"cancelled": True}
    assert result_of(alice.response(rid))["status"] == "aborted"


def test_principals_over_websocket(team):
    wrong = refused(team, headers={"Authorization": "Bearer sha256:" + hashlib.sha256(b"alice-token").hexdigest()})
    assert wrong.status == 401, "the hash is not the token"
    c = ws_conn(team, team.ws_port, headers={"Authorization": "Bearer alice-token"})
    c.initialize(**init_params())
    assert result_of(c.run_prompt("ws-demo", "@reply over ws")[0]) == OK
    alice = tcp_as(team, "alice-token")
    assert "ws-demo" in {s["sessionId"] for s in
                         result_of(alice.response(alice.request("session/list", {})))["sessions"]}
    bob = ws_conn(team, team.ws_port, "/?access_token=bob-token")
    bob.initialize(**init_params())
    assert "ws-demo" not in {s["sessionId"] for s in
                             result_of(bob.response(bob.request("session/list", {})))["sessions"]}


def test_wrong_token_over_tcp_is_refused(team):
    c = team.connect()
    rid = c.request("initialize", {"authToken": "alice-token-but-longer"})
    assert error_of(c.response(rid))["code"] == UNAUTHORIZED
    assert c.wait_eof()


def test_bad_auth_file_stops_the_daemon_with_a_clear_message(tmp_path):
    bad = tmp_path / "auth.toml"
    bad.write_text('[principals.alice]\ntoken = "plaintext"\n')
    r = run_daemon(tmp_path, "--listen", "tcp://127.0.0.1:0", "--auth-file", str(bad))
    assert r.returncode == 2 and "principals.alice.token" in r.stderr, r


# -- connection limits -------------------------------------------------------------


def test_max_connections_refuses_at_accept(spawn):
    d = spawn(args=["--max-connections", "2"])
    first, second = d.connect(), d.connect()
    first.initialize()
    second.initialize()
    third = raw_tcp(d)
    assert read_until_closed(third) == b"", "a connection past --max-connections was served"
    third.close()
    first.close()
    deadline = time.monotonic() + 5
    while True:  # the slot frees once the daemon sees the close
        c = raw_tcp(d)
        c.sendall(encode({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}))
        c.settimeout(1)
        try:
            if b'"result"' in c.recv(65536):
                c.close()
                break
        except OSError:
            pass
        c.close()
        assert time.monotonic() < deadline, "the slot of a closed connection was never freed"
        time.sleep(0.05)
    assert "--max-connections" in d.stderr()


# -- the CLI's token ---------------------------------------------------------------


def test_cli_token_from_file_and_environment(spawn, tmp_path):
    """A token with URL and shell metacharacters works from --token-file and
    $HARNESSD_TOKEN, over WebSocket (a header, not the URL) and TCP."""
    import os
    from test_harness_cli import cli_bin
    token = "p+l/u&s=%20#?x"
    path = auth_file(tmp_path, {"carol": (token, False)})
    d = ws_daemon(spawn, "--auth-file", str(path))
    scheme = "wss" if TLS_MODE else "ws"
    tcp_scheme = "tls" if TLS_MODE else "tcp"
    extra = ["--insecure"] if TLS_MODE else []
    token_file = tmp_path / "carol.token"
    token_file.write_text(token + "\n")
    runs = [
        (["--connect", f"{scheme}://{HOST}:{d.ws_port}", "--token-file", str(token_file)], {}),
        (["--connect", f"{tcp_scheme}://{HOST}:{d.port}"], {"HARNESSD_TOKEN": token}),
    ]
    for i, (connect, env) in enumerate(runs):
        proc = subprocess.run([cli_bin(), "prompt", *connect, *extra, "--session", f"cli-{i}", "@reply via cli"],
                              capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                              env={**os.environ, **env})
        assert proc.returncode == 0, (connect, proc.stderr)
        assert "via cli" in proc.stdout
    carol = tcp_as(d, token)
    listed = {s["sessionId"] for s in result_of(carol.response(carol.request("session/list", {})))["sessions"]}
    assert listed == {"cli-0", "cli-1"}
    wrong = subprocess.run([cli_bin(), "prompt", "--connect", f"{scheme}://{HOST}:{d.ws_port}", *extra, "hi"],
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                           env={**os.environ, "HARNESSD_TOKEN": "nope"})
    assert wrong.returncode != 0
    assert token not in wrong.stderr


# -- internal errors ------------------------------------------------------------------


def test_internal_errors_reach_clients_as_an_id_not_their_text(spawn, tmp_path):
    root = tmp_path / "sessions"
    root.mkdir()
    (root / "broken.jsonl").mkdir()  # the log cannot be opened: a handler failure
    d = spawn(stdio=True, session_root=root)
    c = d.stdio_conn()
    c.initialize()
    err = error_of(c.response(c.prompt("broken", "hi")))
    assert err["code"] == -32603
    assert str(tmp_path) not in json.dumps(err), f"a path reached the client: {err}"
    error_id = err["data"]["errorId"]
    assert err["message"] == f"internal error (id {error_id})"
    d.close_stdin()
    d.wait_exit(10)
    logged = [line for line in d.stderr().splitlines() if f"error id {error_id}" in line]
    assert logged and "broken.jsonl" in logged[0], d.stderr()
