"""deploy/cluster/: two harnessd nodes on one PostgreSQL behind nginx.

compose.yaml is checked as YAML, since no container runs here (no registry
to pull postgres or nginx from, or to build the harnessd image with): the
services and their dependencies (the nodes wait for a healthy database,
nginx for healthy nodes), the health checks, the nodes' command lines (only
harnessd flags, --store postgres, a URL that names the database service
with its user, password and database, distinct node ids, the page's origin
through nginx), their stop timeout above the drain, and nginx's template
variables against nginx.conf.

nginx.conf is rendered the way the nginx image renders its templates (every
${HARNESSD_...} from the environment compose.yaml sets), passes `nginx -t`,
and then runs in front of two real harnessd nodes (Debian's nginx,
unprivileged, TLS from a throwaway CA): connections alternate between the
nodes; a turn streams over wss://; a foreign Origin gets 403 and /metrics
403; and when one node drains (SIGTERM), its open WebSocket finishes its
turn on it while every new connection and /healthz go to the other node,
also once the drained node has exited. The nodes here keep the default
store, each its own: this checks the proxy, not the shared store.

Needs nginx, openssl and python3-yaml (scripts/install-deps.sh installs
them); fails, never skips, when they are missing."""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from deploy_common import (DEPLOY, REPO_ROOT, command_line_problems, default, harnessd_bin,
                           import_integration_helpers, listen_ports, make_certificates, option_values)
from nginx_stack import HOST, TIMEOUT, call, free_port, stop_processes, tool, until_response

import_integration_helpers()
from harnessd_helpers import _die_with_parent, check_turn, chunk_bytes, text_deltas  # noqa: E402
from ws_client import OP_TEXT, HandshakeRefused, WSClient  # noqa: E402

CLUSTER = DEPLOY / "cluster"
COMPOSE = CLUSTER / "compose.yaml"
NGINX_CONF = CLUSTER / "nginx.conf"
CONTAINERFILE = DEPLOY / "container" / "Containerfile"
PLACEHOLDER = re.compile(r"\$\{([A-Z][A-Z0-9_]*)\}")
INIT = {"clientInfo": {"name": "deploy-cluster-test", "version": "1"}, "protocolVersion": 1}


# --- compose.yaml --------------------------------------------------------------

def interpolate(value):
    """Compose's ${VAR:-default} and ${VAR}, as with none of them set."""
    if isinstance(value, str):
        return re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::?-([^}]*))?\}", lambda m: m.group(1) or "", value)
    if isinstance(value, list):
        return [interpolate(v) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v) for k, v in value.items()}
    return value


def compose() -> dict:
    doc = yaml.safe_load(COMPOSE.read_text())   # resolves the << merge keys
    assert isinstance(doc, dict) and isinstance(doc.get("services"), dict), "no services in compose.yaml"
    return doc


def services() -> dict[str, dict]:
    return {name: interpolate(svc) for name, svc in compose()["services"].items()}


def command(svc: dict) -> list[str]:
    cmd = svc.get("command") or []
    assert isinstance(cmd, list), f"command {cmd!r}: use the list form (no shell in the image)"
    return [str(a) for a in cmd]


def environment(svc: dict) -> dict[str, str]:
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) if "=" in e else (e, "") for e in env)
    return {k: str(v) for k, v in env.items()}


def nodes() -> dict[str, dict]:
    """The harnessd services: those built from the Containerfile."""
    out = {name: svc for name, svc in services().items() if "build" in svc}
    assert len(out) >= 2, f"expected at least two harnessd services, found {sorted(out)}"
    return out


def duration_s(value) -> float:
    m = re.fullmatch(r"(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?", str(value))
    assert m and value, f"not a compose duration: {value!r}"
    return int(m.group(1) or 0) * 60 + float(m.group(2) or 0)


def healthcheck_words(svc: dict) -> list[str]:
    test = (svc.get("healthcheck") or {}).get("test")
    assert isinstance(test, list) and test and test[0] in ("CMD", "CMD-SHELL"), f"health check {test!r}"
    return test[1:] if test[0] == "CMD" else test[1].split()


def published(svc: dict) -> dict[int, int]:
    """container port -> published port."""
    out = {}
    for entry in svc.get("ports") or []:
        if isinstance(entry, dict):
            out[int(entry["target"])] = int(entry.get("published", entry["target"]))
        else:
            parts = str(entry).split("/")[0].split(":")
            out[int(parts[-1])] = int(parts[-2] if len(parts) > 1 else parts[-1])
    return out


def nginx_service() -> tuple[str, dict]:
    found = [(n, s) for n, s in services().items() if "nginx" in str(s.get("image", ""))]
    assert len(found) == 1, f"expected one nginx service, found {[n for n, _ in found]}"
    return found[0]


def page_origin() -> str:
    """The browser's origin through nginx: https, the published port."""
    _, svc = nginx_service()
    env = environment(svc)
    port = published(svc)[int(env["HARNESSD_HTTPS_PORT"].rsplit(":", 1)[-1])]
    return f"https://{env['HARNESSD_SERVER_NAME']}" + ("" if port == 443 else f":{port}")


def test_compose_has_a_database_two_nodes_and_nginx():
    names = set(services())
    assert names == {"postgres", "harnessd-a", "harnessd-b", "nginx"}, sorted(names)


def test_postgres_service():
    db = services()["postgres"]
    assert str(db.get("image", "")).startswith("docker.io/library/postgres:"), db.get("image")
    env = environment(db)
    for key in ("POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"):
        assert env.get(key), f"postgres: {key} unset"
    # the data on a named volume, declared at the top level
    declared = set((compose().get("volumes") or {}).keys())
    mounts = [str(v).split(":") for v in db.get("volumes") or []]
    assert any(src in declared and dst == "/var/lib/postgresql/data" for src, dst, *_ in mounts), (mounts, declared)
    # ready means accepting TCP connections as the nodes' user, for their database
    words = healthcheck_words(db)
    assert words[0] == "pg_isready", words
    assert option_values_short(words, "-U") == env["POSTGRES_USER"], words
    assert option_values_short(words, "-d") == env["POSTGRES_DB"], words
    assert option_values_short(words, "-h") not in (None, "", "localhost"), \
        f"{words}: without -h 127.0.0.1, pg_isready asks the Unix socket, ready during initialisation already"


def option_values_short(words: list[str], flag: str) -> str | None:
    return words[words.index(flag) + 1] if flag in words and words.index(flag) + 1 < len(words) else None


def test_the_image_runs_harnessd_with_the_command_as_arguments():
    entry = [line for line in CONTAINERFILE.read_text().splitlines() if line.startswith("ENTRYPOINT")]
    assert entry and json.loads(entry[-1].split(None, 1)[1]) == ["/usr/local/bin/harnessd"], entry


def test_nodes_are_built_from_the_containerfile():
    images = set()
    for name, svc in nodes().items():
        build = svc["build"]
        context = (CLUSTER / build["context"]).resolve()
        assert context == REPO_ROOT, f"{name}: build context {context}, the Containerfile builds from {REPO_ROOT}"
        assert (context / build["dockerfile"]).resolve() == CONTAINERFILE, f"{name}: {build['dockerfile']}"
        images.add(svc.get("image"))
        assert not svc.get("ports"), f"{name} publishes {svc['ports']}: only nginx should reach the nodes"
    assert len(images) == 1 and None not in images, f"the nodes should share one image: {images}"


def test_node_command_lines():
    db = services()["postgres"]
    db_env = environment(db)
    for name, svc in nodes().items():
        args = command(svc)
        assert not command_line_problems(args), f"{name}: {command_line_problems(args)}"
        assert option_values(args, "store") == ["postgres"], f"{name}: {args}"
        (url,) = option_values(args, "postgres-url")
        u = urlsplit(url)
        assert u.scheme in ("postgresql", "postgres"), url
        assert u.hostname == "postgres" and (u.port or 5432) == 5432, f"{name}: {url} does not name the database service"
        assert (u.username, u.password, u.path.lstrip("/")) == (
            db_env["POSTGRES_USER"], db_env["POSTGRES_PASSWORD"], db_env["POSTGRES_DB"]), \
            f"{name}: {url} does not match the postgres service's POSTGRES_USER/PASSWORD/DB"
        listeners = listen_ports(option_values(args, "listen"))
        assert listeners.get("ws", ("", 0))[0] == "0.0.0.0", f"{name}: {listeners}: nginx reaches the container's IP"
        assert option_values(args, "allow-origin") == [page_origin()], \
            f"{name}: --allow-origin {option_values(args, 'allow-origin')}, the page is {page_origin()}"
        # nginx passes the client's Host on: the name it serves must be allowed
        server_name = environment(nginx_service()[1])["HARNESSD_SERVER_NAME"]
        assert server_name in option_values(args, "allow-host"), \
            f"{name}: --allow-host {option_values(args, 'allow-host')} lacks {server_name}, which nginx passes " \
            f"on as Host: harnessd would answer 421"
        # all interfaces of the container: a token (test_container.py checks where it comes from)
        assert option_values(args, "auth-token-file") or option_values(args, "auth-file"), \
            f"{name}: listens on {listeners['ws']} without a token"
        # every client arrives from nginx's address
        assert option_values(args, "max-connections-per-ip") == ["0"], \
            f"{name}: a per-address limit behind nginx caps all users together"


def test_node_ids_are_distinct():
    ids = [option_values(command(svc), "node-id") for svc in nodes().values()]
    assert all(len(i) == 1 for i in ids), ids
    assert len({i[0] for i in ids}) == len(ids), f"node ids {ids}: each node needs its own"


def test_nodes_wait_for_a_healthy_database():
    for name, svc in nodes().items():
        deps = svc.get("depends_on")
        assert isinstance(deps, dict) and (deps.get("postgres") or {}).get("condition") == "service_healthy", \
            f"{name}: depends_on {deps}"


def test_node_health_checks_and_stop_timeout():
    drain_s = default("drain-timeout-ms") / 1000
    settle_s = default("shutdown-grace-ms") / 1000
    for name, svc in nodes().items():
        args = command(svc)
        ws_port = listen_ports(option_values(args, "listen"))["ws"][1]
        words = healthcheck_words(svc)
        assert words[0] == "curl" and any(w.startswith("-f") for w in words[1:]), \
            f"{name}: {words}: curl -f, so that 503 (draining, no database) counts as unhealthy"
        assert f"http://127.0.0.1:{ws_port}/healthz" in words, f"{name}: {words} does not ask the ws port"
        drain = option_values(args, "drain-timeout-ms")
        grace = option_values(args, "shutdown-grace-ms")
        needed = (int(drain[-1]) / 1000 if drain else drain_s) + (int(grace[-1]) / 1000 if grace else settle_s)
        stop = duration_s(svc.get("stop_grace_period", "10s"))
        assert stop > needed, f"{name}: stop_grace_period {stop:g} s <= drain + grace {needed:g} s"
        assert svc.get("stop_signal", "SIGTERM") == "SIGTERM", svc.get("stop_signal")


def test_nginx_service_matches_nginx_conf():
    name, svc = nginx_service()
    assert str(svc["image"]).startswith("docker.io/library/nginx:"), svc["image"]
    env = environment(svc)
    wanted = set(PLACEHOLDER.findall(NGINX_CONF.read_text()))
    assert set(env) == wanted, f"{name}: environment {sorted(env)} != the template's variables {sorted(wanted)}"
    # the template where the image renders templates from
    volumes = [str(v).split(":") for v in svc.get("volumes") or []]
    templates = [(src, dst) for src, dst, *_ in volumes if dst.startswith("/etc/nginx/templates/")]
    assert len(templates) == 1 and templates[0][1].endswith(".conf.template"), volumes
    assert (CLUSTER / templates[0][0]).resolve() == NGINX_CONF, templates
    # one upstream server per node, at the node's ws port
    node_addrs = {f"{n}:{listen_ports(option_values(command(s), 'listen'))['ws'][1]}" for n, s in nodes().items()}
    assert {v for k, v in env.items() if k.startswith("HARNESSD_NODE_")} == node_addrs, (env, node_addrs)
    # the certificate from a mounted directory
    for key in ("HARNESSD_TLS_CERT", "HARNESSD_TLS_KEY"):
        assert any(env[key].startswith(dst.rstrip("/") + "/") for _, dst, *_ in volumes), f"{env[key]} is not mounted"
    # the TLS port published (and the origin the nodes allow follows from it)
    container_port = int(env["HARNESSD_HTTPS_PORT"].rsplit(":", 1)[-1])
    assert container_port in published(svc), f"{name}: {env['HARNESSD_HTTPS_PORT']} is not published: {svc.get('ports')}"
    assert published(svc)[container_port] == 8443, svc.get("ports")
    deps = svc.get("depends_on") or {}
    for node in nodes():
        assert (deps.get(node) or {}).get("condition") == "service_healthy", f"{name}: depends_on {deps}"


# --- nginx.conf ----------------------------------------------------------------

def render(values: dict[str, str]) -> str:
    """What the nginx image's envsubst step makes of the template."""
    text = NGINX_CONF.read_text()
    found = set(PLACEHOLDER.findall(text))
    assert found == set(values), f"variables of {NGINX_CONF}: {sorted(found)}, expected {sorted(values)}"
    # envsubst replaces every environment variable of the container, so the
    # file must not use any other $UPPERCASE name (nginx's are lowercase)
    others = {a or b for a, b in re.findall(r"\$\{([A-Z][A-Z0-9_]*)\}|\$([A-Z][A-Z0-9_]*)", text)} - found
    assert not others, f"{NGINX_CONF}: {sorted(others)} would be replaced from the container's environment"
    for name, value in values.items():
        text = text.replace("${" + name + "}", value)
    assert "$HARNESSD" not in text and "${" not in re.sub(r"#.*", "", text), "a variable was left unreplaced"
    return text


class ClusterStack:
    """nginx with deploy/cluster/nginx.conf in front of two harnessd nodes."""

    def __init__(self, root: Path, start: bool = True):
        self.root = root
        self.https_port = free_port()
        self.origin = f"https://localhost:{self.https_port}"
        # the nodes' shared token, as compose.yaml mounts it
        self.token = secrets.token_hex(32)
        self.token_file = root / "harnessd-token"
        self.token_file.write_text(self.token + "\n")
        self.procs: list[subprocess.Popen] = []
        self.nodes: dict[str, subprocess.Popen] = {}
        self.node_ports: dict[str, int] = {}
        self.logs: dict[str, Path] = {}
        if start:
            for name in ("a", "b"):
                self._start_node(name)
        else:
            # nothing listens there: enough for nginx -t
            self.node_ports = {"a": free_port(), "b": free_port()}

        self.prefix = Path(tempfile.mkdtemp(prefix="harnessd-cluster-nginx-"))
        os.chmod(self.prefix, 0o755)
        for sub in ("conf", "logs", "tmp", "certs"):
            (self.prefix / sub).mkdir()
        make_certificates(self.prefix / "certs")
        self.ca = self.prefix / "certs" / "ca.pem"
        (self.prefix / "conf" / "cluster.conf").write_text(render({
            "HARNESSD_SERVER_NAME": "localhost",
            "HARNESSD_HTTPS_PORT": f"{HOST}:{self.https_port}",
            "HARNESSD_NODE_A": f"{HOST}:{self.node_ports['a']}",
            "HARNESSD_NODE_B": f"{HOST}:{self.node_ports['b']}",
            "HARNESSD_TLS_CERT": str(self.prefix / "certs" / "server.pem"),
            "HARNESSD_TLS_KEY": str(self.prefix / "certs" / "server.key"),
            "HARNESSD_LOG_DIR": str(self.prefix / "logs"),
        }))
        tmp = self.prefix / "tmp"
        (self.prefix / "conf" / "nginx.conf").write_text(f"""
worker_processes 1;
error_log {self.prefix}/logs/main-error.log info;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    include {self.prefix}/conf/cluster.conf;
}}
""")
        self.error_log = self.prefix / "logs" / "error.log"
        self.preexec = _die_with_parent
        if os.geteuid() == 0:
            # Root (CI): run nginx as nobody, owning its prefix, so no privilege is involved.
            nobody = pwd.getpwnam("nobody")
            for path in [self.prefix, *self.prefix.rglob("*")]:
                os.chown(path, nobody.pw_uid, nobody.pw_gid)

            def preexec() -> None:
                _die_with_parent()
                os.setgroups([])
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)
            self.preexec = preexec
        self.nginx_cmd = [tool("nginx"), "-p", str(self.prefix), "-e", str(self.prefix / "logs" / "main-error.log"),
                          "-c", str(self.prefix / "conf" / "nginx.conf"),
                          "-g", f"daemon off; pid {self.prefix}/nginx.pid;"]

    def config_test(self) -> subprocess.CompletedProcess:
        return subprocess.run([*self.nginx_cmd, "-t"], capture_output=True, text=True, timeout=30,
                              preexec_fn=self.preexec)

    def start_nginx(self) -> None:
        check = self.config_test()
        assert check.returncode == 0, f"nginx -t refused the rendered configuration:\n{check.stderr}"
        self.nginx = subprocess.Popen(self.nginx_cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.STDOUT, preexec_fn=self.preexec)
        self.procs.append(self.nginx)
        deadline = time.monotonic() + TIMEOUT
        while True:
            assert self.nginx.poll() is None, f"nginx exited {self.nginx.returncode}:\n{self.diag()}"
            try:
                self.https("/healthz")
                return
            except OSError:
                assert time.monotonic() < deadline, f"nginx is not serving after {TIMEOUT}s:\n{self.diag()}"
                time.sleep(0.05)

    def _start_node(self, name: str) -> None:
        ready = self.root / f"ready-{name}.json"
        self.logs[name] = self.root / f"harnessd-{name}.stderr"
        (self.root / f"sessions-{name}").mkdir()
        proc = subprocess.Popen(
            [harnessd_bin(), "--listen", f"ws://{HOST}:0", "--ready-file", str(ready),
             "--session-root", str(self.root / f"sessions-{name}"), "--threads", "2",
             "--allow-origin", self.origin, "--drain-timeout-ms", "20000", "--shutdown-grace-ms", "2000",
             # as in compose.yaml: the token, the name nginx passes on as Host
             "--auth-token-file", str(self.token_file), "--allow-host", "localhost",
             "--max-connections-per-ip", "0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(self.logs[name], "wb"),
            cwd=self.root, preexec_fn=_die_with_parent)
        self.procs.append(proc)
        self.nodes[name] = proc
        deadline = time.monotonic() + TIMEOUT
        while True:
            assert proc.poll() is None, f"harnessd {name} exited {proc.returncode}:\n{self.diag()}"
            try:
                urls = json.loads(ready.read_text())["listen"]
                self.node_ports[name] = int(next(u for u in urls if u.startswith("ws://")).rsplit(":", 1)[1])
                return
            except (OSError, ValueError, KeyError, StopIteration):
                assert time.monotonic() < deadline, f"harnessd {name} wrote no ready file:\n{self.diag()}"
                time.sleep(0.02)

    def diag(self) -> str:
        parts = []
        paths = [(f"harnessd {n} stderr", p) for n, p in self.logs.items()]
        if hasattr(self, "prefix"):
            paths += [("nginx error log", self.error_log), ("nginx main error log", self.prefix / "logs" / "main-error.log")]
        for what, path in paths:
            if path.exists():
                parts.append(f"--- {what} ---\n{path.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        stop_processes(self.procs)
        shutil.rmtree(self.prefix, ignore_errors=True)

    # -- clients ------------------------------------------------------------
    def tls_context(self):
        import ssl
        return ssl.create_default_context(cafile=str(self.ca))

    def https(self, path: str, host: str | None = None) -> tuple[int, bytes]:
        import http.client
        import socket
        conn = http.client.HTTPSConnection("localhost", self.https_port, timeout=TIMEOUT)
        conn.sock = self.tls_context().wrap_socket(socket.create_connection((HOST, self.https_port), TIMEOUT),
                                                   server_hostname="localhost")
        try:
            conn.request("GET", path, headers={"Host": host} if host else {})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def wss(self, origin: str | None = None, token: str | None = "") -> WSClient:
        """token: "" for the nodes' own, None for none."""
        token = self.token if token == "" else token
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        return WSClient.connect("localhost", self.https_port, "/", origin=origin or self.origin, timeout=TIMEOUT,
                                tls=self.tls_context(), headers=headers)

    def node_health(self, name: str) -> int:
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.node_ports[name]}/healthz", timeout=TIMEOUT) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def node_sessions(self, name: str) -> dict[str, dict]:
        """session/list of one node, asked directly (not through nginx)."""
        ws = WSClient.connect(HOST, self.node_ports[name], "/", timeout=TIMEOUT, tls=None,
                              headers={"Authorization": f"Bearer {self.token}"})
        try:
            call(ws, 1, "initialize", INIT)
            result = call(ws, 2, "session/list", {"limit": 1000})[1]["result"]
            return {s["sessionId"]: s for s in result["sessions"]}
        finally:
            ws.close()


def prompt(ws: WSClient, rid: int, session: str, text: str) -> dict:
    return call(ws, rid, "session/prompt", {"sessionId": session, "contentBlocks": [{"type": "text", "text": text}]})[1]


@pytest.fixture
def stack():
    root = Path(tempfile.mkdtemp(prefix="harnessd-cluster-"))
    s = None
    try:
        s = ClusterStack(root)
        s.start_nginx()
        yield s
    finally:
        if s is not None:
            s.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_nginx_conf_passes_nginx_t(tmp_path):
    s = ClusterStack(tmp_path, start=False)
    try:
        check = s.config_test()
        assert check.returncode == 0, f"nginx -t refused the rendered {NGINX_CONF}:\n{check.stderr}"
        assert "test is successful" in check.stderr, check.stderr
    finally:
        s.stop()


def test_round_robin_across_the_nodes(stack):
    """Each new connection goes to the next node; a connection's turns stay on its node."""
    sessions = []
    for i in range(4):
        ws = stack.wss()
        try:
            call(ws, 1, "initialize", INIT)
            for turn in range(2):
                resp = prompt(ws, 2 + turn, f"rr-{i}", f"@reply turn {turn}")
                assert resp.get("result", {}).get("status") == "ok", resp
            sessions.append(f"rr-{i}")
        finally:
            ws.close()
    on_a, on_b = stack.node_sessions("a"), stack.node_sessions("b")
    assert set(on_a) | set(on_b) == set(sessions), (sorted(on_a), sorted(on_b))
    assert not set(on_a) & set(on_b), "one connection's turns went to two nodes"
    assert len(on_a) == len(on_b) == 2, f"not round-robin: a {sorted(on_a)}, b {sorted(on_b)}"
    assert all(s["turns"] == 2 for s in [*on_a.values(), *on_b.values()]), (on_a, on_b)


def test_turn_origin_and_metrics_through_the_cluster_proxy(stack):
    ws = stack.wss()
    try:
        call(ws, 1, "initialize", INIT)
        ws.send_text(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {
            "sessionId": "via-cluster", "contentBlocks": [{"type": "text", "text": "@chunks 20 8"}]}}))
        before, resp = until_response(ws, 2)
        assert resp.get("result") == {"status": "ok", "reason": {"kind": "completed"}}, resp
        events = [o["params"]["event"] for o in before if o.get("method") == "session.event"]
        check_turn(events, turn=0)
        assert text_deltas(events) == chunk_bytes(20, 8)
    finally:
        ws.close()
    with pytest.raises(HandshakeRefused) as refused:
        stack.wss(origin="https://evil.example").close()
    assert refused.value.status == 403, refused.value
    status, body = stack.https("/healthz")
    assert status == 200 and json.loads(body)["status"] == "ok", (status, body)
    # per-node numbers: scraped from each node, never through round-robin
    status, _ = stack.https("/metrics")
    assert status == 403, status


def test_the_nodes_token_and_host_check_through_the_cluster_proxy(stack):
    """The nodes listen on all interfaces with compose's token: an upgrade
    through nginx without it, or with another, is refused by whichever node
    nginx picks; the name nginx serves passes the nodes' Host check, and a
    name it does not serve (a rebound DNS name) gets 421 from them."""
    for _ in range(2):   # both nodes, round-robin
        for token in (None, "not-the-token"):
            with pytest.raises(HandshakeRefused) as refused:
                stack.wss(token=token).close()
            assert refused.value.status == 401, refused.value
    status, body = stack.https("/healthz")
    assert status == 200, (status, body)
    for _ in range(2):
        status, body = stack.https("/healthz", host=f"rebound.example:{stack.https_port}")
        assert status == 421, (status, body)


def test_a_draining_node_finishes_its_connections_and_gets_no_new_ones(stack):
    # a turn of about 4 s on one connection, on whichever node nginx picks
    long = stack.wss()
    call(long, 1, "initialize", INIT)
    long.send_text(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {
        "sessionId": "long", "contentBlocks": [{"type": "text", "text": "@chunks 40 8\n@delay 100"}]}}))
    first = long.recv_message(TIMEOUT)
    assert first.opcode == OP_TEXT
    busy = [n for n in ("a", "b") if stack.node_sessions(n).get("long", {}).get("running")]
    assert len(busy) == 1, busy
    draining, other = busy[0], "b" if busy[0] == "a" else "a"

    stack.nodes[draining].send_signal(signal.SIGTERM)
    deadline = time.monotonic() + TIMEOUT
    while stack.node_health(draining) != 503:
        assert time.monotonic() < deadline, f"node {draining} is not draining:\n{stack.diag()}"
        time.sleep(0.05)

    # every new connection and every /healthz goes to the other node
    for i in range(4):
        status, body = stack.https("/healthz")
        assert status == 200, (status, body, stack.diag())
        ws = stack.wss()
        try:
            call(ws, 1, "initialize", INIT)
            resp = prompt(ws, 2, f"during-drain-{i}", "@reply hello")
            assert resp.get("result", {}).get("status") == "ok", resp
        finally:
            ws.close()
    assert {f"during-drain-{i}" for i in range(4)} <= set(stack.node_sessions(other)), stack.diag()

    # the open WebSocket stayed on its node, which finished the turn
    before, resp = until_response(long, 2, timeout=30)
    assert resp.get("result", {}).get("status") == "ok", resp
    events = [json.loads(first.payload)["params"]["event"]] + \
             [o["params"]["event"] for o in before if o.get("method") == "session.event"]
    check_turn(events, turn=0)
    assert "".join(text_deltas(events)) == "".join(chunk_bytes(40, 8))
    long.close()
    assert stack.nodes[draining].wait(30) == 0, stack.diag()

    # with the node gone (connection refused), nginx uses the one left
    for i in range(2):
        ws = stack.wss()
        try:
            call(ws, 1, "initialize", INIT)
            assert prompt(ws, 2, f"after-exit-{i}", "@reply hi").get("result", {}).get("status") == "ok"
        finally:
            ws.close()
