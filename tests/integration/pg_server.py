"""A private PostgreSQL server for tests: Debian's binaries, a throwaway data
directory, trust authentication for the superuser `harnessd` on 127.0.0.1 and
a free port.

    server = PgServer()                       # initdb + start
    server.url("harnessd")                    # postgresql://harnessd@127.0.0.1:PORT/harnessd
    server.create_database("t1")
    server.psql("select 1", db="t1")          # ["1"]
    server.restart(); server.kill(); server.start()
    server.cleanup()                          # stop, remove the directory

PostgreSQL refuses to run as root: under root (CI) initdb, pg_ctl and
postgres run as `nobody`, who owns the directory; otherwise as the current
user. pg_ctl daemonizes postgres, so a watchdog process (blocked reading a
pipe only this process holds) stops the postmaster and removes the directory
when this process dies in any way, kill -9 included; cleanup() and an atexit
hook do the same on a normal exit.

Needs PostgreSQL (scripts/install-deps.sh installs it); fails, never skips,
when it is missing.
"""

from __future__ import annotations

import atexit
import ctypes
import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

HOST = "127.0.0.1"
SUPERUSER = "harnessd"
DEFAULT_DB = "harnessd"
TIMEOUT = 30.0

# Settings for a test server: many connections (several daemons with pools),
# no fsync (the tests crash processes, not the machine: a commit still reaches
# the kernel before it is acknowledged, so an immediate shutdown loses nothing).
TEST_SETTINGS = {
    "max_connections": "200",
    "shared_buffers": "32MB",
    "fsync": "off",
    "full_page_writes": "off",
    "synchronous_commit": "on",
    "log_line_prefix": "'%m [%p] %q%u@%d '",
    "log_min_messages": "warning",
    "log_min_error_statement": "error",
    "logging_collector": "off",
    "unix_socket_permissions": "0777",
}

_WATCHDOG = r"""
import os, shutil, signal, sys, time
root, data = sys.argv[1], sys.argv[2]
pidfile = os.path.join(data, "postmaster.pid")
try:
    while sys.stdin.buffer.read(65536):
        pass
except Exception:
    pass

def postmaster():
    try:
        with open(pidfile) as f:
            pid = int(f.readline())
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().split(b"\0")
    except (OSError, ValueError):
        return None
    return pid if os.fsencode(data) in cmd else None

def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

pid = postmaster()
if pid is not None:
    try:
        os.kill(pid, signal.SIGQUIT)  # immediate shutdown: the postmaster stops its backends
    except OSError:
        pass
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
shutil.rmtree(root, ignore_errors=True)
"""


def find_bin_dir() -> Path:
    """The bin directory of the newest PostgreSQL installed under /usr/lib/postgresql."""
    found = []
    for d in glob.glob("/usr/lib/postgresql/*/bin"):
        version = Path(d).parent.name
        if re.fullmatch(r"\d+(\.\d+)?", version) and all(
                os.access(os.path.join(d, tool), os.X_OK) for tool in ("initdb", "pg_ctl", "postgres")):
            found.append((tuple(int(x) for x in version.split(".")), Path(d)))
    if not found:
        raise AssertionError(
            "PostgreSQL server binaries not found (no /usr/lib/postgresql/*/bin with initdb, pg_ctl and postgres); "
            "install them with scripts/install-deps.sh (Debian: apt-get install postgresql)")
    return max(found)[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _world_traversable(path: Path) -> bool:
    for p in [path, *path.parents]:
        try:
            if not os.stat(p).st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


def _set_pdeathsig(sig: int) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, sig, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # pragma: no cover - best effort only
        pass


def _clean_env() -> dict[str, str]:
    """The environment of the server tools and psql: no inherited PG* settings, the C locale."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update(LC_ALL="C", LANG="C", TZ="UTC")
    return env


class PgServer:
    """One private PostgreSQL server; see the module docstring."""

    def __init__(self, *, port: int | None = None, settings: dict[str, str] | None = None, start: bool = True):
        self.bin_dir = find_bin_dir()
        self.version = self.bin_dir.parent.name
        psql = self.bin_dir / "psql"
        self.psql_bin = str(psql) if os.access(psql, os.X_OK) else "/usr/bin/psql"
        if not os.access(self.psql_bin, os.X_OK):
            raise AssertionError("psql not found; install it with scripts/install-deps.sh "
                                 "(Debian: apt-get install postgresql-client)")
        self.port = port or free_port()
        self.env = _clean_env()
        self._as_nobody = os.geteuid() == 0
        base = Path(tempfile.gettempdir())
        if self._as_nobody and not _world_traversable(base):
            base = Path("/tmp")  # nobody must reach the directory
        self.root = Path(tempfile.mkdtemp(prefix="harnessd-pg-", dir=base))
        os.chmod(self.root, 0o755)
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        self.logfile = self.root / "postgres.log"
        self.sock.mkdir()
        self.pid: int | None = None
        self._closed = False
        self._uid = self._gid = None
        if self._as_nobody:
            nobody = pwd.getpwnam("nobody")
            self._uid, self._gid = nobody.pw_uid, nobody.pw_gid
            for p in (self.root, self.sock):
                os.chown(p, self._uid, self._gid)
            self.env["HOME"] = str(self.root)
            self.env["USER"] = self.env["LOGNAME"] = "nobody"
        # The watchdog: stops the server and removes the directory once this
        # process is gone (its stdin pipe reaches EOF), however it died.
        self._watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(self.root), str(self.data)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True)
        atexit.register(self.cleanup)
        try:
            self._initdb(settings)
            if start:
                self.start()
                self.create_database(DEFAULT_DB)
        except BaseException:
            self.cleanup()
            raise

    # -- processes --------------------------------------------------------
    def _preexec(self) -> None:
        if self._as_nobody:
            os.setgroups([])
            os.setgid(self._gid)
            os.setuid(self._uid)
        # after the credential change (which clears it): pg_ctl/initdb die with us
        _set_pdeathsig(signal.SIGKILL)

    def _run_tool(self, args: list[str], what: str, timeout: float = 60) -> str:
        try:
            p = subprocess.run(args, cwd=self.root, env=self.env, preexec_fn=self._preexec,
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"{what} did not finish within {timeout}s: {args}\n{exc.stdout}\n{exc.stderr}"
                                 f"{self.diag()}") from None
        if p.returncode != 0:
            raise AssertionError(f"{what} failed (exit {p.returncode}): {args}\nstdout:\n{p.stdout}\n"
                                 f"stderr:\n{p.stderr}{self.diag()}")
        return p.stdout

    def _initdb(self, settings: dict[str, str] | None) -> None:
        self._run_tool([str(self.bin_dir / "initdb"), "-D", str(self.data), "--auth=trust", "-U", SUPERUSER,
                        "--encoding=UTF8", "--locale=C", "--no-sync"], "initdb", timeout=120)
        conf = dict(TEST_SETTINGS, **(settings or {}))
        with open(self.data / "postgresql.conf", "a") as f:
            f.write("\n# tests/integration/pg_server.py\n")
            for k, v in conf.items():
                f.write(f"{k} = {v}\n")

    def start(self) -> None:
        """Start the server (same data directory and port as before) and wait until it accepts connections."""
        assert not self._closed, "server cleaned up"
        if self.running():
            return
        opts = f"-p {self.port} -k {self.sock} -c listen_addresses={HOST}"
        self._run_tool([str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-l", str(self.logfile), "-w",
                        "-t", str(int(TIMEOUT)), "start", "-o", opts], "pg_ctl start", timeout=TIMEOUT + 10)
        self.pid = self._read_pid()
        assert self.pid is not None, f"no postmaster.pid after pg_ctl start{self.diag()}"

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: mode smart, fast (backends terminated, clean shutdown) or immediate (a crash)."""
        assert mode in ("smart", "fast", "immediate"), mode
        if not self.running():
            self.pid = None
            return
        self._run_tool([str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-w", "-t", str(int(TIMEOUT)),
                        "-m", mode, "stop"], f"pg_ctl stop -m {mode}", timeout=TIMEOUT + 10)
        self.pid = None

    def kill(self) -> None:
        """Immediate shutdown, as a crash: no checkpoint, the next start runs recovery."""
        self.stop("immediate")

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def _read_pid(self) -> int | None:
        try:
            with open(self.data / "postmaster.pid") as f:
                return int(f.readline())
        except (OSError, ValueError):
            return None

    def running(self) -> bool:
        """Whether a postmaster of this data directory is alive."""
        pid = self._read_pid()
        if pid is None:
            return False
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return False
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return os.fsencode(str(self.data)) in f.read().split(b"\0")
        except OSError:
            return False

    def cleanup(self) -> None:
        """Stop the server and remove its directory (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.running():
                try:
                    self.stop("immediate")
                except AssertionError:
                    pid = self._read_pid()
                    if pid is not None:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except OSError:
                            pass
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
            try:
                self._watchdog.stdin.close()  # EOF: the watchdog finds nothing left to do
                self._watchdog.wait(15)
            except (OSError, subprocess.TimeoutExpired):
                pass
            try:
                atexit.unregister(self.cleanup)
            except Exception:
                pass

    # -- clients ----------------------------------------------------------
    def url(self, db: str = DEFAULT_DB) -> str:
        return f"postgresql://{SUPERUSER}@{HOST}:{self.port}/{db}"

    def psql(self, sql: str, db: str = DEFAULT_DB, timeout: float = TIMEOUT) -> list[str]:
        """Run SQL (a script: statements separated by ';') with psql -At; stdout's lines.
        Rows are '|'-separated. Fails with the server log on any error."""
        args = [self.psql_bin, "-At", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", HOST, "-p", str(self.port),
                "-U", SUPERUSER, "-d", db, "-f", "-"]
        env = dict(self.env, PGCONNECT_TIMEOUT="10")
        try:
            p = subprocess.run(args, input=sql, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"psql did not finish within {timeout}s: {sql[:500]}{self.diag()}") from None
        if p.returncode != 0:
            raise AssertionError(f"psql failed (exit {p.returncode}) on {db}: {sql[:500]}\n{p.stderr}{self.diag()}")
        return p.stdout.splitlines()

    def create_database(self, name: str) -> str:
        """Create database `name`; its URL."""
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", name), f"not a plain database name: {name!r}"
        self.psql(f'CREATE DATABASE "{name}"', db="postgres")
        return self.url(name)

    def drop_database(self, name: str) -> None:
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", name), f"not a plain database name: {name!r}"
        self.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', db="postgres")

    def log(self) -> str:
        """The server log (for diagnostics)."""
        try:
            return self.logfile.read_text(errors="replace")
        except OSError:
            return ""

    def diag(self) -> str:
        state = "running" if self.running() else "not running"
        return f"\n[postgres {self.version} on port {self.port}: {state}; log tail:]\n{self.log()[-3000:]}"

    def __enter__(self) -> "PgServer":
        return self

    def __exit__(self, *exc) -> None:
        self.cleanup()
