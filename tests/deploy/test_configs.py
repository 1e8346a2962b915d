"""The harnessd.toml files of deploy/ (the example for /etc/harnessd and the
Kubernetes ConfigMap's): every key, set or shown commented, is a harnessd
flag; the example documents what an operator needs; and the daemon under
test starts with each file (its listeners replaced by a free loopback port),
so a key or value it would refuse fails here, not at an operator's start."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import tomllib
import urllib.request

import pytest
import yaml

from deploy_common import DEPLOY, commented_keys, harnessd_bin, has_config_flag, known_keys

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
    if not has_config_flag():
        pytest.skip(f"{harnessd_bin()} predates --config (rebuild it)")
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
