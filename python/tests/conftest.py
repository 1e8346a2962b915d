"""Shared fixtures.

The daemon tests need a built harnessd: ``$HARNESSD_BIN``, or
``build/harnessd`` at the repository root (``python/../build/harnessd``).
When it is missing those tests fail with a message saying so; the
fake-runtime tests (``-k fake``) need no daemon.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
PYTHON_DIR = TESTS_DIR.parent
REPO_ROOT = PYTHON_DIR.parent
FAKES_DIR = TESTS_DIR / "fakes"

if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))

from deepseek_harness import DeepSeekHarness, HarnessConfig  # noqa: E402


def default_harnessd_bin() -> Path:
    value = os.environ.get("HARNESSD_BIN")
    if value:
        return Path(value).expanduser().resolve()
    return REPO_ROOT / "build" / "harnessd"


def harnessd_missing() -> str | None:
    """Why the daemon tests cannot run, or None when the binary is there."""

    path = default_harnessd_bin()
    if path.is_file() and os.access(path, os.X_OK):
        return None
    return (
        f"harnessd binary not found at {path}: build the daemon first "
        "(it is expected at build/harnessd) or point HARNESSD_BIN at it"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    # Checked in the call phase, so a missing daemon makes its tests FAIL
    # (not skip, and not merely error in a fixture).
    if "harnessd_bin" in getattr(item, "fixturenames", ()):
        reason = harnessd_missing()
        if reason:
            pytest.fail(reason, pytrace=False)


@pytest.fixture(scope="session")
def harnessd_bin() -> Path:
    return default_harnessd_bin()


@pytest.fixture
def session_root(tmp_path: Path) -> Path:
    root = tmp_path / "sessions"
    root.mkdir()
    return root


@pytest.fixture
def config(harnessd_bin: Path, session_root: Path) -> HarnessConfig:
    return HarnessConfig(
        runtime_bin=harnessd_bin,
        session_root=session_root,
        request_timeout=30.0,
        shutdown_timeout=5.0,
    )


@pytest.fixture
def harness(config: HarnessConfig):
    if harnessd_missing():
        yield None  # the test fails in its call phase
        return
    with DeepSeekHarness(config) as h:
        yield h


def fake_command(name: str) -> list[str]:
    """Command line running the fake runtime script *name*."""

    return [sys.executable, str(FAKES_DIR / name)]


@pytest.fixture
def fake_bin(tmp_path: Path):
    """Factory: an executable wrapper that runs a fake runtime script, so a
    HarnessConfig(runtime_bin=...) can use it like harnessd."""

    def make(name: str) -> Path:
        wrapper = tmp_path / f"fake-{Path(name).stem}"
        wrapper.write_text(
            f'#!/bin/sh\nexec "{sys.executable}" "{FAKES_DIR / name}" "$@"\n',
            encoding="utf-8",
        )
        wrapper.chmod(0o755)
        return wrapper

    return make


@pytest.fixture
def tcp_daemon(harnessd_bin: Path, tmp_path: Path, session_root: Path):
    """A harnessd listening on an ephemeral TCP port; yields "127.0.0.1:PORT"."""

    if harnessd_missing():
        yield None  # the test fails in its call phase
        return

    ready = tmp_path / "ready.json"
    stderr_path = tmp_path / "harnessd-tcp.stderr"
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            [
                str(harnessd_bin),
                "--listen", "tcp://127.0.0.1:0",
                "--ready-file", str(ready),
                "--session-root", str(session_root),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 15
        address = None
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(
                    f"harnessd --listen exited with {proc.returncode}: "
                    f"{stderr_path.read_text(errors='replace')[-4096:]}",
                    pytrace=False,
                )
            try:
                info = json.loads(ready.read_text(encoding="utf-8"))
                address = info["listen"][0]
                break
            except (OSError, ValueError, KeyError, IndexError):
                time.sleep(0.05)
        if address is None:
            pytest.fail("harnessd did not write its ready file within 15s", pytrace=False)
        assert address.startswith("tcp://"), address
        yield address[len("tcp://"):]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
