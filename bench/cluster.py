#!/usr/bin/env python3
"""The same harness-bench cells against four set-ups, in one run:

  memory     one harnessd, --store memory
  jsonl      one harnessd, the default store (--sync turn, real disk)
  postgres   one harnessd, --store postgres
  2 x pg     two harnessd on one PostgreSQL behind nginx round-robin (plain ws)

PostgreSQL is a private server this script starts (tests/integration/pg_server.py,
fsync on, synchronous_commit on); nginx is Debian's, unprivileged. Every
figure comes from harness-bench; "server CPU" is harnessd's (both nodes for
2 x pg) and "pg CPU" that of every PostgreSQL process in the window.

  bench/cluster.py [BUILD_DIR]          default build/ (harnessd, bench/harness-bench)
  DURATION=4 bench/cluster.py
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from pg_server import PgServer  # noqa: E402

BUILD = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build").resolve()
HARNESSD = BUILD / "harnessd"
BENCH = BUILD / "bench" / "harness-bench"
DURATION = float(os.environ.get("DURATION", "4"))
CELLS = [  # (connections, sessions per connection, chunks, bytes)
    (1, 1, 10, 64),
    (100, 1, 10, 64),
    (100, 1, 100, 64),
]
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, what: str) -> None:
    for _ in range(200):
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{what} is not listening on {port}")


def postgres_cpu_seconds() -> float:
    """CPU (user + system) of every process named postgres."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        if name == "postgres":
            fields = stat[stat.rindex(")") + 2:].split()
            total += int(fields[11]) + int(fields[12])
    return total / TICKS


class Setup:
    def __init__(self, name: str, work: Path):
        self.name = name
        self.work = work
        self.procs: list[subprocess.Popen] = []
        self.port = 0

    def node(self, *args: str) -> int:
        port = free_port()
        log = open(self.work / f"{self.name}-{len(self.procs)}.log", "wb")
        proc = subprocess.Popen([str(HARNESSD), "--threads", "1", "--listen", f"ws://127.0.0.1:{port}",
                                 "--session-root", str(self.work / f"{self.name}-sessions"), *args],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
        self.procs.append(proc)
        wait_port(port, proc, f"harnessd ({self.name})")
        return port

    def harnessd_pids(self) -> list[int]:
        return [p.pid for p in self.procs if p.args[0] == str(HARNESSD)]

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()


def nginx_round_robin(setup: Setup, upstreams: list[int]) -> int:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    prefix = Path(tempfile.mkdtemp(prefix="harnessd-bench-nginx-"))
    os.chmod(prefix, 0o755)
    for sub in ("conf", "logs", "tmp"):
        (prefix / sub).mkdir()
    port = free_port()
    servers = "\n".join(f"        server 127.0.0.1:{p};" for p in upstreams)
    (prefix / "conf" / "nginx.conf").write_text(f"""
worker_processes 1;
error_log {prefix}/logs/error.log warn;
pid {prefix}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    upstream harnessd {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://harnessd;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection "upgrade";
            proxy_set_header Host $host;
            proxy_read_timeout 120s;
            proxy_buffering off;
        }}
    }}
}}
""")
    preexec = None
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        for path in [prefix, *prefix.rglob("*")]:
            os.chown(path, nobody.pw_uid, nobody.pw_gid)

        def preexec() -> None:
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
    proc = subprocess.Popen([nginx, "-p", str(prefix), "-c", str(prefix / "conf" / "nginx.conf"), "-g",
                             "daemon off;"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, preexec_fn=preexec)
    setup.procs.append(proc)
    wait_port(port, proc, "nginx")
    return port


def run_cell(setup: Setup, cell: tuple[int, int, int, int]) -> dict:
    n, m, k, s = cell
    out = setup.work / f"{setup.name}-{n}-{k}.json"
    pg_before = postgres_cpu_seconds()
    cmd = [str(BENCH), "--connect", f"ws://127.0.0.1:{setup.port}", "-N", str(n), "-M", str(m), "-K", str(k),
           "-S", str(s), "--duration", str(DURATION), "--warmup", "1", "--json", str(out)]
    for pid in setup.harnessd_pids():
        cmd += ["--server-pid", str(pid)]
    report = subprocess.run(cmd, capture_output=True, text=True, timeout=DURATION + 120)
    pg_cpu = postgres_cpu_seconds() - pg_before
    if report.returncode != 0 or not out.exists():
        raise SystemExit(f"harness-bench failed on {setup.name} {cell}:\n{report.stdout}\n{report.stderr}")
    figures = json.loads(out.read_text())
    figures["pg_cpu_seconds"] = pg_cpu
    return figures


def main() -> int:
    for tool in (HARNESSD, BENCH):
        if not tool.exists():
            raise SystemExit(f"{tool} not found: build first (cmake --build build)")
    work = Path(tempfile.mkdtemp(prefix="harnessd-bench-cluster-"))
    pg = PgServer(settings={"fsync": "on", "full_page_writes": "on"})
    setups: list[Setup] = []
    try:
        memory = Setup("memory", work)
        memory.port = memory.node("--store", "memory")
        jsonl = Setup("jsonl", work)
        jsonl.port = jsonl.node()
        pg.create_database("single")
        single = Setup("postgres", work)
        single.port = single.node("--store", "postgres", "--postgres-url", pg.url("single"), "--node-id", "solo")
        pg.create_database("cluster")
        cluster = Setup("2 x pg + nginx", work)
        nodes = [cluster.node("--store", "postgres", "--postgres-url", pg.url("cluster"), "--node-id", f"n{i}")
                 for i in range(2)]
        cluster.port = nginx_round_robin(cluster, nodes)
        setups = [memory, jsonl, single, cluster]

        print(f"harness-bench over ws, closed loop, {DURATION:g} s per cell after 1 s warm-up; "
              f"harnessd --threads 1 per node; all on this machine ({os.cpu_count()} cores)\n")
        print("| cell (N x M, @chunks K S) | set-up | notifications/s | vs memory | response p50 ms | "
              "p99 ms | harnessd CPU s | pg CPU s |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for cell in CELLS:
            base = None
            for setup in setups:
                f = run_cell(setup, cell)
                rate = f["notifications_per_s"]
                base = base or rate
                lat = f["latency_response_us"]
                cpu = f["server_cpu_seconds"]
                print(f"| {cell[0]} x {cell[1]}, {cell[2]} {cell[3]} | {setup.name} | {rate:,.0f} | "
                      f"{rate / base:.2f} | {lat['p50'] / 1000:.2f} | {lat['p99'] / 1000:.2f} | "
                      f"{cpu if cpu is not None else float('nan'):.2f} | {f['pg_cpu_seconds']:.2f} |", flush=True)
        # What the commits cost, from the single postgres node's own counters.
        import urllib.request
        text = urllib.request.urlopen(f"http://127.0.0.1:{single.port}/metrics", timeout=10).read().decode()
        values = {line.split()[0]: float(line.split()[1]) for line in text.splitlines()
                  if line.startswith("harnessd_pg_") and not line.startswith("#")}
        commits = values.get("harnessd_pg_commits_total", 0)
        events = values.get("harnessd_pg_committed_events_total", 0)
        print(f"\npostgres node: {commits:,.0f} commits, {events / max(commits, 1):.1f} events per commit, "
              f"commit latency mean {values.get('harnessd_pg_commit_seconds_mean', 0) * 1000:.2f} ms, "
              f"max {values.get('harnessd_pg_commit_seconds_max', 0) * 1000:.1f} ms")
        return 0
    finally:
        for s in setups:
            s.stop()
        pg.cleanup()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
