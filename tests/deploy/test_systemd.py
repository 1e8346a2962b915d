"""deploy/systemd/ and deploy/harnessd.toml: the unit files pass
`systemd-analyze verify` and an offline `systemd-analyze security` review,
their settings agree with the daemon (stop timeout above the drain, socket
names and ports as the config says), and harnessd started the way
harnessd.socket starts it (systemd-socket-activate: named descriptors,
NOTIFY_SOCKET, WATCHDOG_USEC) serves both sockets and reports READY=1,
WATCHDOG=1 and STOPPING=1.

systemd-analyze (package systemd) is required: a missing one fails the test."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest

from deploy_common import DEPLOY, SCHEMES, default, harnessd_bin, listen_ports

SYSTEMD = DEPLOY / "systemd"
SERVICE = SYSTEMD / "harnessd.service"
SOCKETS = sorted(SYSTEMD.glob("*.socket"))
TOML = DEPLOY / "harnessd.toml"
INSTALLED_BIN = "/usr/local/bin/harnessd"
# systemd-analyze's scale x10. 2.2 with the namespaces and mount calls the
# bash tool's bubblewrap sandbox needs (1.5 without them); still "OK".
EXPOSURE_THRESHOLD = 22
TIMEOUT = 10.0


def systemd_analyze() -> str:
    path = shutil.which("systemd-analyze")
    if path is None:
        pytest.fail("systemd-analyze is not installed (package systemd; scripts/install-deps.sh installs it)",
                    pytrace=False)
    return path


def parse_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """section -> key -> values in order (keys may repeat); continuation lines joined."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    pending = ""
    for raw in path.read_text().splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        assert current is not None, f"{path}: {line!r} outside a section"
        key, sep, value = line.partition("=")
        assert sep, f"{path}: not KEY=VALUE: {line!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def one(unit: dict, section: str, key: str) -> str:
    values = unit.get(section, {}).get(key)
    assert values, f"[{section}] {key}= is not set"
    return values[-1]


def seconds(value: str) -> float:
    """A systemd time span such as 50s, 1min 30s, 2m, 500ms."""
    total = 0.0
    units = {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "": 1}
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value):
        assert unit in units, f"time span {value!r}"
        total += float(number) * units[unit]
    return total


def example_config() -> dict:
    return tomllib.loads(TOML.read_text())


@pytest.fixture
def unit_dir(tmp_path):
    """The units as installed, with ExecStart pointing at the binary under test
    (verify checks that the program exists)."""
    d = tmp_path / "units"
    d.mkdir()
    for src in [SERVICE, *SOCKETS]:
        text = src.read_text()
        if src == SERVICE:
            assert INSTALLED_BIN in text, f"{SERVICE} does not run {INSTALLED_BIN}"
            text = text.replace(INSTALLED_BIN, harnessd_bin())
        (d / src.name).write_text(text)
    return d


def test_units_pass_systemd_analyze_verify(unit_dir):
    tool = systemd_analyze()
    names = [SERVICE.name, *(s.name for s in SOCKETS)]
    assert len(names) >= 3, f"expected harnessd.service and two socket units, got {names}"
    out = subprocess.run([tool, "verify", *names], cwd=unit_dir, capture_output=True, text=True, timeout=120)
    ours = [line for line in (out.stdout + out.stderr).splitlines()
            if "harnessd" in line or str(unit_dir) in line]
    assert out.returncode == 0 and not ours, \
        f"systemd-analyze verify exited {out.returncode}:\n{out.stdout}{out.stderr}"


def test_verify_catches_a_broken_unit(unit_dir):
    """The check above is not vacuous: a unit naming a missing program fails."""
    tool = systemd_analyze()
    broken = unit_dir / "harnessd.service"
    broken.write_text(broken.read_text().replace(harnessd_bin(), "/nonexistent/harnessd"))
    out = subprocess.run([tool, "verify", "harnessd.service"], cwd=unit_dir, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode != 0, out


def test_service_sandbox_exposure(unit_dir):
    tool = systemd_analyze()
    out = subprocess.run([tool, "security", "--offline=true", f"--threshold={EXPOSURE_THRESHOLD}",
                          "--no-pager", "harnessd.service"],
                         cwd=unit_dir, capture_output=True, text=True, timeout=120)
    overall = re.search(r"Overall exposure level for harnessd.service: ([\d.]+)", out.stdout)
    assert out.returncode == 0 and overall, \
        f"exposure above {EXPOSURE_THRESHOLD / 10} (or no verdict):\n{out.stdout[-4000:]}{out.stderr}"


def test_service_settings_match_the_daemon():
    unit = parse_unit(SERVICE)
    assert one(unit, "Service", "Type") == "notify"
    exec_start = one(unit, "Service", "ExecStart")
    assert exec_start.startswith(INSTALLED_BIN + " "), exec_start
    assert "--config /etc/harnessd/harnessd.toml" in exec_start, exec_start
    # the session root is the StateDirectory
    assert one(unit, "Service", "StateDirectory") == "harnessd"
    assert "--session-root ${STATE_DIRECTORY}" in exec_start, exec_start
    assert example_config().get("session-root") == "/var/lib/harnessd", "toml session-root is not the StateDirectory"
    assert re.search(r"kill (-HUP|-s HUP|-SIGHUP) \$MAINPID", one(unit, "Service", "ExecReload"))
    assert one(unit, "Service", "KillSignal") == "SIGTERM"
    watchdog = seconds(one(unit, "Service", "WatchdogSec"))
    assert 0 < watchdog <= 120, watchdog
    # the stop timeout covers the drain and the settling after it
    cfg = example_config()
    drain = cfg.get("drain-timeout-ms", default("drain-timeout-ms")) / 1000
    grace = cfg.get("shutdown-grace-ms", default("shutdown-grace-ms")) / 1000
    stop = seconds(one(unit, "Service", "TimeoutStopSec"))
    assert stop > drain + grace, f"TimeoutStopSec {stop}s <= drain {drain}s + shutdown grace {grace}s"
    # the sandbox the brief asks for
    expected = {"DynamicUser": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
                "PrivateDevices": "yes", "NoNewPrivileges": "yes", "LimitNOFILE": "65536",
                "CapabilityBoundingSet": "", "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX"}
    for key, value in expected.items():
        assert one(unit, "Service", key) == value, f"{key}={one(unit, 'Service', key)!r}, expected {value!r}"
    assert "@system-service" in unit["Service"]["SystemCallFilter"], unit["Service"]["SystemCallFilter"]
    # bash's sandbox works under the unit: bubblewrap's namespaces and calls are allowed
    namespaces = set(one(unit, "Service", "RestrictNamespaces").split())
    assert {"user", "mnt", "pid", "net"} <= namespaces, namespaces
    assert any("@mount" in line and "capset" in line for line in unit["Service"]["SystemCallFilter"]), \
        unit["Service"]["SystemCallFilter"]
    assert "-/etc/harnessd/harnessd.env" in unit["Service"].get("EnvironmentFile", []), "EnvironmentFile"


def test_sockets_match_the_config():
    """Each socket unit names its descriptor by scheme and binds the port the
    config's listener of that scheme has (the config without socket activation)."""
    ports = listen_ports(example_config()["listen"])
    names = set()
    for path in SOCKETS:
        unit = parse_unit(path)
        name = one(unit, "Socket", "FileDescriptorName")
        assert name in SCHEMES, f"{path.name}: FileDescriptorName={name}"
        assert name not in names, f"two socket units named {name}"
        names.add(name)
        assert one(unit, "Socket", "Service") == SERVICE.name, path
        streams = unit["Socket"]["ListenStream"]
        assert len(streams) == 1, f"{path.name}: one ListenStream per socket unit (the name covers them all)"
        host, _, port = streams[0].rpartition(":")
        assert name in ports, f"{path.name}: the config has no {name}:// listener"
        assert (host, int(port)) == ports[name], f"{path.name}: {streams[0]} but the config says {ports[name]}"
        assert one(unit, "Install", "WantedBy") == "sockets.target"
    assert {"ws", "tcp"} <= names, names


def test_env_file_is_an_environment_file():
    for n, line in enumerate((SYSTEMD / "harnessd.env").read_text().splitlines(), 1):
        assert not line.strip() or line.startswith("#") or re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", line), \
            f"harnessd.env line {n}: {line!r}"
    assert "DEEPSEEK_API_KEY=" in (SYSTEMD / "harnessd.env").read_text()


def start(cmd: list[str], cwd: Path, env: dict | None = None) -> tuple[subprocess.Popen, Path]:
    log = cwd / "harnessd.stderr"
    proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(log, "wb"), env=env, start_new_session=True)
    return proc, log


def stop(proc: subprocess.Popen, log: Path) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(TIMEOUT + 5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
        raise AssertionError(f"harnessd did not exit on SIGTERM:\n{log.read_text(errors='replace')}")


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def test_socket_activation_and_notify(tmp_path):
    """What harnessd.socket + harnessd-tcp.socket + harnessd.service do, minus
    systemd: systemd-socket-activate binds the ports and passes them as
    descriptors named ws and tcp; NOTIFY_SOCKET collects the notifications."""
    activate = shutil.which("systemd-socket-activate")
    if activate is None:
        pytest.fail("systemd-socket-activate is not installed (package systemd)", pytrace=False)
    # the example config as the README says to use it with socket activation: without `listen`
    config = tmp_path / "harnessd.toml"
    config.write_text("\n".join(line for line in TOML.read_text().splitlines() if not line.startswith("listen")))
    notify_path = tmp_path / "notify"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(notify_path))
    notify.settimeout(TIMEOUT)
    ws_port, tcp_port = free_ports(2)
    env = dict(os.environ, NOTIFY_SOCKET=str(notify_path))
    proc, log = start([activate, "-l", f"127.0.0.1:{ws_port}", "-l", f"127.0.0.1:{tcp_port}", "--fdname=ws:tcp",
                       "-E", "WATCHDOG_USEC=400000", "-E", "NOTIFY_SOCKET",
                       harnessd_bin(), "--config", str(config), "--session-root", str(tmp_path / "sessions")],
                      tmp_path, env)
    received: list[str] = []

    def wait_for(state: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while not any(state in m.split("\n") for m in received):
            assert time.monotonic() < deadline, f"no {state} within {TIMEOUT}s: {received}\n{log.read_text()}"
            try:
                received.append(notify.recv(4096).decode())
            except socket.timeout:
                pass
    try:
        # systemd-socket-activate starts the program at the first connection, as systemd does
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ws_port}/healthz", timeout=TIMEOUT) as resp:
                    assert json.loads(resp.read())["status"] == "ok"
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
                time.sleep(0.05)
        wait_for("READY=1")
        with socket.create_connection(("127.0.0.1", tcp_port), timeout=TIMEOUT) as tcp:
            tcp.sendall(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n')
            line = tcp.makefile("rb").readline()
            assert json.loads(line).get("id") == 1 and "result" in json.loads(line), line
        wait_for("WATCHDOG=1")
        text = log.read_text(errors="replace")
        assert f"ws://127.0.0.1:{ws_port}" in text and f"tcp://127.0.0.1:{tcp_port}" in text, text
        proc.send_signal(signal.SIGTERM)
        wait_for("STOPPING=1")
    finally:
        rc = stop(proc, log)
        notify.close()
    assert rc == 0, log.read_text(errors="replace")
