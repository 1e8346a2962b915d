"""Shared fixtures: the harnessd binary, fake runtimes, network daemons.

The daemon tests need a built harnessd: ``$HARNESSD_BIN``, or
``build/harnessd`` at the repository root. When it is missing those tests
fail with a message saying so (they are not skipped); the fake-runtime tests
need no daemon.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
PYTHON_DIR = TESTS_DIR.parent
REPO_ROOT = PYTHON_DIR.parent
FAKES_DIR = TESTS_DIR / "fakes"

if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))

from deepseek_harness import DeepSeekHarness, HarnessClient, HarnessConfig  # noqa: E402


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
    # Checked in the call phase, so a missing daemon makes its tests FAIL.
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
def harness(harnessd_bin: Path, session_root: Path, tmp_path: Path):
    """A started harness on the real daemon with the keyless scripted provider."""

    if harnessd_missing():
        yield None  # the test fails in its call phase
        return
    h = DeepSeekHarness(
        provider="scripted",
        runtime_bin=str(harnessd_bin),
        session_root=str(session_root),
        cwd=str(tmp_path),
        request_timeout_seconds=60,
        shutdown_timeout_seconds=5,
    )
    with h:
        yield h


def fake_argv(name: str) -> tuple[str, ...]:
    """launch_args_override running the fake runtime script *name*."""

    return (sys.executable, str(FAKES_DIR / name))


@pytest.fixture
def fake_harness(tmp_path: Path):
    """Factory: a (not yet started) harness on a fake runtime script."""

    made: list[DeepSeekHarness] = []

    def make(name: str = "echo_runtime.py", **options) -> DeepSeekHarness:
        options.setdefault("launch_args_override", fake_argv(name))
        options.setdefault("cwd", str(tmp_path))
        options.setdefault("request_timeout_seconds", 15)
        options.setdefault("shutdown_timeout_seconds", 3)
        harness = DeepSeekHarness(**options)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        harness.close()


@pytest.fixture
def fake_client(tmp_path: Path):
    """Factory: a started and initialized low-level client on a fake."""

    made: list[HarnessClient] = []

    def make(name: str = "echo_runtime.py", **options) -> HarnessClient:
        options.setdefault("launch_args_override", fake_argv(name))
        options.setdefault("request_timeout_seconds", 15)
        options.setdefault("shutdown_timeout_seconds", 3)
        client = HarnessClient(HarnessConfig(**options))
        made.append(client)
        client.start()
        client.initialize(cwd=str(tmp_path), provider="scripted", model="fake")
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
def fake_bin(tmp_path: Path):
    """Factory: an executable standing in for harnessd (it receives
    ``--stdio`` like the real one and runs a fake runtime script)."""

    def make(name: str, filename: str = "harnessd") -> Path:
        directory = tmp_path / f"bin-{Path(name).stem}"
        directory.mkdir(exist_ok=True)
        wrapper = directory / filename
        wrapper.write_text(
            "#!/bin/sh\n"
            f'[ "$1" = "--stdio" ] || {{ echo "expected --stdio, got: $*" >&2; exit 64; }}\n'
            f'exec "{sys.executable}" "{FAKES_DIR / name}"\n',
            encoding="utf-8",
        )
        wrapper.chmod(0o755)
        return wrapper

    return make


def read_log(root: Path, session_id: str) -> list[dict]:
    """The JSONL log of a session whose id needs no escaping."""

    path = root / f"{session_id}.jsonl"
    assert path.is_file(), f"missing session log {path}"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class ListeningDaemon:
    """``harnessd --listen`` on ephemeral ports; ``urls`` are the bound URLs."""

    def __init__(self, binary: Path, workdir: Path, session_root: Path, extra: list[str]) -> None:
        self.ready = workdir / f"ready-{os.getpid()}-{time.monotonic_ns()}.json"
        self.stderr_path = workdir / "harnessd-listen.stderr"
        with open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(
                [str(binary), "--listen", "tcp://127.0.0.1:0", "--listen", "ws://127.0.0.1:0",
                 "--ready-file", str(self.ready), "--session-root", str(session_root), *extra],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        deadline = time.monotonic() + 15
        self.urls: list[str] = []
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"harnessd --listen exited with {self.proc.returncode}: "
                    f"{self.stderr_path.read_text(errors='replace')[-4096:]}"
                )
            try:
                self.urls = json.loads(self.ready.read_text(encoding="utf-8"))["listen"]
                break
            except (OSError, ValueError, KeyError):
                time.sleep(0.02)
        if not self.urls:
            self.stop()
            raise RuntimeError("harnessd did not write its ready file within 15s")

    def url(self, scheme: str) -> str:
        return next(u for u in self.urls if u.startswith(scheme + "://"))

    def port(self, scheme: str) -> int:
        return urllib.parse.urlsplit(self.url(scheme)).port

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def listening_daemon(harnessd_bin: Path, tmp_path: Path, session_root: Path):
    """Factory for a network harnessd; stopped at the end of the test."""

    daemons: list[ListeningDaemon] = []

    def start(*extra: str) -> ListeningDaemon:
        daemon = ListeningDaemon(harnessd_bin, tmp_path, session_root, list(extra))
        daemons.append(daemon)
        return daemon

    yield start
    for daemon in daemons:
        daemon.stop()


@pytest.fixture
def fake_deepseek():
    """A local OpenAI-compatible endpoint; yields the FakeDeepSeek."""

    from servers import FakeDeepSeek

    server = FakeDeepSeek()
    yield server
    server.stop()
