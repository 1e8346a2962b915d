"""The harnessd.toml files of deploy/ (the example for /etc/harnessd and the
Kubernetes ConfigMap's): every key, set or shown commented, is a harnessd
flag; the example documents what an operator needs; and the daemon under
test starts with each file (on a free port of the address it names, the
ConfigMap's on all interfaces, with its token file in a temporary
directory), so a key or value it would refuse fails here, not at an
operator's start; without its token the ConfigMap is refused (exit 2, the
message naming the fix), so authentication cannot silently go missing; the
example's native TLS block, with the authentication it tells to uncomment,
serves wss:// and tls:// on all interfaces (and without it is refused) and
a SIGHUP puts a renewed certificate in force without dropping a connected
client."""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest
import yaml

from deploy_common import AUTH_KEYS, DEPLOY, commented_keys, harnessd_bin, known_keys, make_certificates, non_loopback

TIMEOUT = 10.0


def configmap_toml() -> str:
    for doc in yaml.safe_load_all((DEPLOY / "k8s" / "configmap.yaml").read_text()):
        if doc and doc.get("kind") == "ConfigMap" and "harnessd.toml" in doc.get("data", {}):
            return doc["data"]["harnessd.toml"]
    raise AssertionError("deploy/k8s/configmap.yaml holds no harnessd.toml")


CONFIGS = {
    "example": lambda: (DEPLOY / "harnessd.toml").read_text(),
    "configmap": configmap_toml,
}


@pytest.mark.parametrize("name", CONFIGS)
def test_keys_are_harnessd_flags(name):
    text = CONFIGS[name]()
    keys = set(tomllib.loads(text)) | set(commented_keys(text))
    unknown = keys - known_keys()
    assert not unknown, f"{name}: keys that are no harnessd flag: {sorted(unknown)}"


def test_example_documents_what_operators_set():
    text = CONFIGS["example"]()
    keys = set(tomllib.loads(text)) | set(commented_keys(text))
    for key in ("listen", "session-root", "drain-timeout-ms", "allow-origin", "auth-token-file", "auth-file",
                "insecure-no-auth", "allow-host", "log-level", "threads", "tls-cert", "tls-key",
                "ws-idle-timeout-ms", "provider", "max-running-turns"):
        assert key in keys, f"deploy/harnessd.toml does not document {key}"


def with_local_auth_files(text: str, tmp: Path) -> tuple[str, str | None]:
    """The config with each auth file it names replaced by a file in tmp
    (a fresh token; for auth-file, one principal with that token's hash),
    and the token."""
    token = None
    for key in AUTH_KEYS:
        m = re.search(rf'^{key} = "(.*)"$', text, re.M)
        if not m:
            continue
        token = secrets.token_hex(32)
        local = tmp / Path(m.group(1)).name
        if key == "auth-file":
            local.write_text(f'[principals.deploy-test]\ntoken = "sha256:{hashlib.sha256(token.encode()).hexdigest()}"\n'
                             f"admin = true\n")
        else:
            local.write_text(token + "\n")
        text = text.replace(m.group(0), f'{key} = "{local}"')
    return text, token


def run_until_ready(args: list[str], tmp: Path, what: str) -> tuple[subprocess.Popen, list[str], Path]:
    ready = tmp / "ready.json"
    log = tmp / "harnessd.stderr"
    proc = subprocess.Popen([harnessd_bin(), *args, "--ready-file", str(ready)], cwd=tmp, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=open(log, "wb"))
    deadline = time.monotonic() + TIMEOUT
    while not ready.exists():
        if proc.poll() is not None:
            raise AssertionError(f"harnessd refused the {what} config:\n{log.read_text(errors='replace')}")
        if time.monotonic() >= deadline:
            proc.kill()
            raise AssertionError(f"not ready:\n{log.read_text(errors='replace')}")
        time.sleep(0.02)
    return proc, json.loads(ready.read_text())["listen"], log


def stop(proc: subprocess.Popen, log: Path) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(TIMEOUT + 5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
        rc = None
    assert rc == 0, f"exit {rc}:\n{log.read_text(errors='replace')}"


def test_local_auth_files_replace_every_auth_key(tmp_path):
    text, token = with_local_auth_files(configmap_toml(), tmp_path)
    assert token and str(tmp_path) in text, text


@pytest.mark.parametrize("name", CONFIGS)
def test_daemon_starts_with_the_config(name, tmp_path):
    text, token = with_local_auth_files(CONFIGS[name](), tmp_path)
    config = tmp_path / "harnessd.toml"
    config.write_text(text)
    # the command line wins over the file: a free port on the interfaces the
    # file names (all of them for the ConfigMap), a private session root
    exposed = non_loopback(tomllib.loads(text).get("listen", []))
    host = "0.0.0.0" if exposed else "127.0.0.1"
    proc, urls, log = run_until_ready(["--config", str(config), "--listen", f"ws://{host}:0",
                                       "--session-root", str(tmp_path / "sessions")], tmp_path, name)
    try:
        port = int(urls[0].rsplit(":", 1)[1])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=TIMEOUT) as resp:
            assert json.loads(resp.read())["status"] == "ok"
    finally:
        stop(proc, log)


def test_daemon_refuses_the_configmap_without_its_token(tmp_path):
    """The ConfigMap listens on all interfaces: with its auth key commented
    out, harnessd does not start (exit 2) and says what to do."""
    text = configmap_toml()
    assert any(re.search(rf"^{key} = ", text, re.M) for key in AUTH_KEYS), "the ConfigMap sets no auth key"
    for key in AUTH_KEYS:
        text = re.sub(rf"^{key} = ", f"#{key} = ", text, flags=re.M)
    config = tmp_path / "harnessd.toml"
    config.write_text(text)
    out = subprocess.run([harnessd_bin(), "--config", str(config), "--listen", "ws://0.0.0.0:0",
                          "--session-root", str(tmp_path / "sessions")], cwd=tmp_path, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=TIMEOUT + 5)
    assert out.returncode == 2, f"exit {out.returncode}:\n{out.stderr}"
    for fix in ("--auth-token-file", "--auth-file", "--insecure-no-auth"):
        assert fix in out.stderr, f"the refusal does not name {fix}:\n{out.stderr}"


def native_tls_config(tmp: Path, with_auth: bool = True) -> tuple[str, str | None]:
    """The example config as its "Native TLS" comment block says to use it:
    that block's listen, tls-cert and tls-key uncommented (port 0 on the
    interfaces it names, the throwaway certificate), the loopback listen line
    dropped, and (with_auth) auth-token-file and allow-host uncommented as
    the block says, the token in tmp. Returns the config and the token."""
    out, uncommented = [], set()
    wanted = ("#tls-cert", "#tls-key") + (("#auth-token-file", "#allow-host") if with_auth else ())
    for line in CONFIGS["example"]().splitlines():
        key = line.lstrip("#").split("=", 1)[0].strip()
        if line.startswith("listen"):
            continue
        if line.startswith("#listen") and "wss://" in line or line.startswith(wanted):
            line = line[1:]
            uncommented.add(key)
        out.append(line)
    expected = {"listen", "tls-cert", "tls-key"} | ({"auth-token-file", "allow-host"} if with_auth else set())
    assert uncommented == expected, f"no native TLS block in the example: {uncommented}"
    block = CONFIGS["example"]().split("#listen = [\"wss://", 1)[1].split("\n\n", 1)[0]
    assert "auth-token-file" in block and "allow-host" in block, \
        f"the native TLS block does not tell to uncomment auth-token-file and allow-host:\n{block}"
    text = "\n".join(out)
    assert re.search(r"(wss|tls)://0\.0\.0\.0:\d+", text), "the native TLS block serves all interfaces"
    text = re.sub(r"(wss|tls)://0\.0\.0\.0:\d+", r"\1://0.0.0.0:0", text)
    text = re.sub(r'^tls-cert = ".*"$', f'tls-cert = "{tmp / "live.pem"}"', text, flags=re.M)
    text = re.sub(r'^tls-key = ".*"$', f'tls-key = "{tmp / "live.key"}"', text, flags=re.M)
    return with_local_auth_files(text, tmp)


def test_native_tls_example_without_auth_is_refused(tmp_path):
    """The block on all interfaces without the token it tells to add: exit 2."""
    make_certificates(tmp_path, servers=("live",))
    text, token = native_tls_config(tmp_path, with_auth=False)
    assert token is None
    config = tmp_path / "harnessd.toml"
    config.write_text(text)
    out = subprocess.run([harnessd_bin(), "--config", str(config), "--session-root", str(tmp_path / "sessions")],
                         cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT + 5)
    assert out.returncode == 2, f"exit {out.returncode}:\n{out.stderr}"
    assert "--auth-token-file" in out.stderr, out.stderr


def serial(pem: Path) -> str:
    out = subprocess.run(["openssl", "x509", "-noout", "-serial", "-in", str(pem)], capture_output=True, text=True,
                         check=True, timeout=30)
    return out.stdout.strip().split("=", 1)[1].upper()


def test_native_tls_example_and_certificate_reload(tmp_path):
    """wss:// and tls:// from the example's TLS block; `systemctl reload`
    (SIGHUP) puts a renewed certificate in force without dropping a client."""
    make_certificates(tmp_path, servers=("first", "second"))
    for ext in ("pem", "key"):
        shutil.copy(tmp_path / f"first.{ext}", tmp_path / f"live.{ext}")
    config = tmp_path / "harnessd.toml"
    text, token = native_tls_config(tmp_path)
    assert token, "the native TLS block has no token"
    config.write_text(text)
    ready = tmp_path / "ready.json"
    log = tmp_path / "harnessd.stderr"
    proc = subprocess.Popen([harnessd_bin(), "--config", str(config), "--session-root", str(tmp_path / "sessions"),
                             "--ready-file", str(ready)],
                            cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(log, "wb"))
    context = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))

    def https_serial(port: int) -> tuple[str, dict]:
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as raw:
            with context.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.sendall(f"GET /healthz HTTP/1.1\r\nHost: localhost:{port}\r\nConnection: close\r\n\r\n"
                            .encode())
                data = b""
                while chunk := tls.recv(65536):
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 200"), data[:300]
                return tls.getpeercert()["serialNumber"].upper(), json.loads(body)

    try:
        deadline = time.monotonic() + TIMEOUT
        while not ready.exists():
            assert proc.poll() is None, f"harnessd refused the TLS config:\n{log.read_text(errors='replace')}"
            assert time.monotonic() < deadline, f"not ready:\n{log.read_text(errors='replace')}"
            time.sleep(0.02)
        urls = json.loads(ready.read_text())["listen"]
        wss = int(next(u for u in urls if u.startswith("wss://")).rsplit(":", 1)[1])
        tls_port = int(next(u for u in urls if u.startswith("tls://")).rsplit(":", 1)[1])
        got, health = https_serial(wss)
        assert got == serial(tmp_path / "first.pem") and health["status"] == "ok", (got, health)

        # an NDJSON client over tls:// that stays connected across the reload
        client = context.wrap_socket(socket.create_connection(("127.0.0.1", tls_port), timeout=TIMEOUT),
                                     server_hostname="localhost")
        reader = client.makefile("rb")
        # without the token: refused; with it: served
        anonymous = context.wrap_socket(socket.create_connection(("127.0.0.1", tls_port), timeout=TIMEOUT),
                                        server_hostname="localhost")
        anonymous.sendall(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n')
        line = anonymous.makefile("rb").readline()
        assert not line or "error" in json.loads(line), line
        anonymous.close()
        client.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                   "params": {"protocolVersion": 1, "authToken": token}}).encode() + b"\n")
        assert "result" in json.loads(reader.readline())

        # renewal: new files in place (atomically, as a deploy hook would), then SIGHUP
        for ext in ("pem", "key"):
            shutil.copy(tmp_path / f"second.{ext}", tmp_path / f"next.{ext}")
            os.replace(tmp_path / f"next.{ext}", tmp_path / f"live.{ext}")
        proc.send_signal(signal.SIGHUP)
        want = serial(tmp_path / "second.pem")
        deadline = time.monotonic() + TIMEOUT
        while (got := https_serial(wss)[0]) != want:
            assert time.monotonic() < deadline, f"still serving serial {got} after SIGHUP:\n{log.read_text()}"
            time.sleep(0.05)
        client.sendall(b'{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}\n')
        answer = json.loads(reader.readline())
        assert answer.get("id") == 2 and "result" in answer, answer
        client.close()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(TIMEOUT + 5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
            rc = None
    assert rc == 0, f"exit {rc}:\n{log.read_text(errors='replace')}"
