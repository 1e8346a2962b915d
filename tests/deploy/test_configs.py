"""The harnessd.toml files of deploy/ (the example for /etc/harnessd and the
Kubernetes ConfigMap's): every key, set or shown commented, is a harnessd
flag; the example documents what an operator needs; and the daemon under
test starts with each file (its listeners replaced by a free loopback port),
so a key or value it would refuse fails here, not at an operator's start;
the example's native TLS block serves wss:// and tls:// and a SIGHUP puts
a renewed certificate in force without dropping a connected client."""

from __future__ import annotations

import json
import os
import re
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

from deploy_common import DEPLOY, commented_keys, harnessd_bin, known_keys, make_certificates

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
    for key in ("listen", "session-root", "drain-timeout-ms", "allow-origin", "auth-token-file", "log-level",
                "threads", "tls-cert", "tls-key", "ws-idle-timeout-ms", "provider", "max-running-turns"):
        assert key in keys, f"deploy/harnessd.toml does not document {key}"


@pytest.mark.parametrize("name", CONFIGS)
def test_daemon_starts_with_the_config(name, tmp_path):
    config = tmp_path / "harnessd.toml"
    config.write_text(CONFIGS[name]())
    ready = tmp_path / "ready.json"
    log = tmp_path / "harnessd.stderr"
    # the command line wins over the file: a free port, a private session root
    proc = subprocess.Popen([harnessd_bin(), "--config", str(config), "--listen", "ws://127.0.0.1:0",
                             "--session-root", str(tmp_path / "sessions"), "--ready-file", str(ready)],
                            cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(log, "wb"))
    try:
        deadline = time.monotonic() + TIMEOUT
        while not ready.exists():
            assert proc.poll() is None, f"harnessd refused the {name} config:\n{log.read_text(errors='replace')}"
            assert time.monotonic() < deadline, f"not ready:\n{log.read_text(errors='replace')}"
            time.sleep(0.02)
        url = json.loads(ready.read_text())["listen"][0].replace("ws://", "http://")
        with urllib.request.urlopen(url + "/healthz", timeout=TIMEOUT) as resp:
            assert json.loads(resp.read())["status"] == "ok"
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


def native_tls_config(tmp: Path) -> str:
    """The example config as its "Native TLS" comment block says to use it:
    that block's listen, tls-cert and tls-key uncommented (free loopback
    ports, the throwaway certificate), the loopback listen line dropped."""
    out, uncommented = [], set()
    for line in CONFIGS["example"]().splitlines():
        key = line.lstrip("#").split("=", 1)[0].strip()
        if line.startswith("listen"):
            continue
        if line.startswith("#listen") and "wss://" in line or line.startswith(("#tls-cert", "#tls-key")):
            line = line[1:]
            uncommented.add(key)
        out.append(line)
    assert uncommented == {"listen", "tls-cert", "tls-key"}, f"no native TLS block in the example: {uncommented}"
    text = "\n".join(out)
    text = re.sub(r"(wss|tls)://0\.0\.0\.0:\d+", r"\1://127.0.0.1:0", text)
    text = re.sub(r'^tls-cert = ".*"$', f'tls-cert = "{tmp / "live.pem"}"', text, flags=re.M)
    text = re.sub(r'^tls-key = ".*"$', f'tls-key = "{tmp / "live.key"}"', text, flags=re.M)
    return text


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
    config.write_text(native_tls_config(tmp_path))
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
                tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
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
        client.sendall(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n')
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
