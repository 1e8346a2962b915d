import itertools
import re
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harnessd_helpers import Daemon, harnessd_bin, hygiene  # noqa: E402


@pytest.fixture(autouse=True)
def _require_binary():
    """Every test fails (never skips) with a clear message when the binary is absent."""
    harnessd_bin()


class Spawner:
    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.daemons: list[Daemon] = []

    def __call__(self, *, stdio: bool = False, args=(), session_root: Path | None = None, **kw) -> Daemon:
        root = session_root or (self.tmp_path / "sessions")
        d = Daemon(root, stdio=stdio, args=args, workdir=self.tmp_path, **kw)
        self.daemons.append(d)
        return d

    def teardown(self) -> list[str]:
        crashes = []
        for d in self.daemons:
            crashes += hygiene(d)
            rc = d.proc.poll()
            if rc is not None and rc < 0 and -rc not in (signal.SIGTERM, signal.SIGKILL, signal.SIGINT):
                crashes.append(f"harnessd died with signal {-rc}; stderr:\n{d.stderr()}")
            d.kill()
        return crashes


@pytest.fixture
def spawn(tmp_path):
    """Factory starting harnessd processes; every one is killed at teardown."""
    s = Spawner(tmp_path)
    try:
        yield s
    finally:
        crashes = s.teardown()
    if crashes:
        crashes = crashes[:10]
        pytest.fail("\n".join(crashes), pytrace=False)


@pytest.fixture
def tcp_daemon(spawn):
    return spawn()


@pytest.fixture
def stdio_daemon(spawn):
    return spawn(stdio=True)


# ---------------------------------------------------------------------------
# PostgreSQL (the postgres store's cluster tests)


class PgDatabase:
    """One database of the session's PostgreSQL server."""

    def __init__(self, server, name: str):
        self.server = server
        self.name = name
        self.url = server.url(name)

    def psql(self, sql: str, timeout: float = 30.0) -> list[str]:
        return self.server.psql(sql, db=self.name, timeout=timeout)


@pytest.fixture(scope="session")
def pg_server():
    """A private PostgreSQL for the whole run (pg_server.PgServer); fails, never skips, without PostgreSQL."""
    from pg_server import PgServer
    server = PgServer()
    try:
        yield server
    finally:
        server.cleanup()


_pg_db_count = itertools.count(1)


@pytest.fixture
def pg_db(pg_server, request) -> PgDatabase:
    """A fresh, empty database for this test (the server is started again if a test left it stopped)."""
    if not pg_server.running():
        pg_server.start()
    slug = re.sub(r"[^a-z0-9_]+", "_", request.node.name.lower()).strip("_")
    name = f"t{next(_pg_db_count)}_{slug}"[:63]
    pg_server.create_database(name)
    return PgDatabase(pg_server, name)
