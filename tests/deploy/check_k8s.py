#!/usr/bin/env python3
"""Checks deploy/k8s/ and deploy/k8s/cluster/ against themselves and against
harnessd: every YAML file parses; the probes ask the port of the ws://
listener the ConfigMap's harnessd.toml configures (on all interfaces, where
the kubelet reaches it); the grace period covers preStop + drain-timeout-ms +
shutdown-grace-ms, and liveness cannot restart a draining pod; the config is
mounted where --config reads it; every config key and every argument is a
harnessd flag; selectors,
Services, the Ingress backend, its WebSocket timeouts and the
PodDisruptionBudget fit together.

Authentication: a config that listens on a non-loopback address (which the
Service and the Ingress reach) sets auth-token-file or auth-file and never
insecure-no-auth; that file lies in a Secret volume, mounted read-only, not
optional, not readable by others, with the file name a key of the Secret,
and the Secret is not part of the manifests (the operator creates it, so no
two installations share a token). Every Ingress host is in allow-host
(ingress-nginx passes the Host header on; harnessd answers 421 to names it
does not know) and its https:// origin in allow-origin.

A StatefulSet (deploy/k8s) keeps its sessions on its volume claim. A
Deployment (deploy/k8s/cluster) keeps them in PostgreSQL: --store postgres,
at least two replicas, --node-id from the pod name (downward API),
--postgres-url from a Secret and never from the ConfigMap, readiness on
/healthz (which fails without the database) but liveness not (a database
outage must not restart every pod). Its postgres-trial/ subdirectory, if
present, must be labelled NOT FOR PRODUCTION, provide the Secret the
Deployment reads, with a URL that names its Service, user, database and
password, and leave room for every pod's connection pool.

Usage: check_k8s.py [DIR...]     (default deploy/k8s deploy/k8s/cluster; exit 1 listing problems)
       check_k8s.py --self-test  (broken copies of the manifests must fail)
Needs python3-yaml and the harnessd binary (HARNESSD_BIN) for its flags."""

from __future__ import annotations

import base64
import copy
import math
import re
import shutil
import sys
import tempfile
import tomllib
from pathlib import Path
from urllib.parse import unquote, urlsplit

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from deploy_common import (AUTH_KEYS, DEPLOY, INSECURE_KEY, choices, command_line_problems,  # noqa: E402
                           commented_keys, default, flag_given, known_keys, listen_ports, non_loopback,
                           option_values)

CONFIG_KEY = "harnessd.toml"
TRIAL_DIR = "postgres-trial"
TRIAL_LABEL = "NOT FOR PRODUCTION"
# What harnessd answers 200 without asking the database: the web UI.
DB_FREE_PATHS = {"/", "/index.html", "/app.js", "/style.css"}
# PostgreSQL's default max_connections and superuser_reserved_connections,
# and what is left for psql, backups, migrations and monitoring.
PG_MAX_CONNECTIONS = 100
PG_RESERVED = 3
PG_HEADROOM = 10


def load(directory: Path) -> dict[str, list[dict]]:
    """file name -> its documents (every *.yaml must parse)."""
    files = sorted(directory.glob("*.yaml")) + sorted(directory.glob("*.yml"))
    if not files:
        raise SystemExit(f"no YAML files in {directory}")
    out = {}
    for path in files:
        try:
            out[path.name] = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        except yaml.YAMLError as exc:
            raise SystemExit(f"{path}: not valid YAML: {exc}")
    return out


def load_trial(directory: Path) -> dict[str, list[dict]] | None:
    trial = directory / TRIAL_DIR
    return load(trial) if trial.is_dir() else None


def unlabelled(directory: Path) -> list[str]:
    """Files of a trial directory that do not say they are not for production."""
    return [f"{TRIAL_DIR}/{p.name}: does not say {TRIAL_LABEL!r}"
            for p in sorted((directory / TRIAL_DIR).glob("*.y*ml")) if TRIAL_LABEL not in p.read_text()]


def get(obj, *path, default=None):
    for key in path:
        if isinstance(obj, dict) and key in obj:
            obj = obj[key]
        elif isinstance(obj, list) and isinstance(key, int) and 0 <= key < len(obj):
            obj = obj[key]
        else:
            return default
    return obj


def matches(selector: dict, labels: dict) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def documents(files: dict[str, list[dict]], err, where: str = "") -> list[dict]:
    """The manifests (kustomization checked against the files, not returned)."""
    docs = []
    for name, file_docs in files.items():
        name = where + name
        for d in file_docs:
            if not isinstance(d, dict):
                err(f"{name}: a document that is not a mapping")
                continue
            if d.get("kind") == "Kustomization":
                listed = set(d.get("resources", []))
                others = {n for n, fd in files.items() if not any(x.get("kind") == "Kustomization" for x in fd)}
                if listed != others:
                    err(f"{name}: resources {sorted(listed)} != the manifests {sorted(others)}")
                continue
            for field in ("apiVersion", "kind"):
                if not d.get(field):
                    err(f"{name}: a document without {field}")
            if not get(d, "metadata", "name"):
                err(f"{name}: a {d.get('kind')} without metadata.name")
            docs.append(d)
    return docs


def env_var(container: dict, name: str) -> dict | None:
    return next((e for e in container.get("env", []) if e.get("name") == name), None)


def expanded_var(value: str) -> str | None:
    """VAR of an argument that is exactly $(VAR) (Kubernetes expands it)."""
    m = re.fullmatch(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", value)
    return m.group(1) if m else None


def secret_value(secret: dict, key: str) -> str | None:
    if key in (secret.get("stringData") or {}):
        return str(secret["stringData"][key])
    if key in (secret.get("data") or {}):
        return base64.b64decode(secret["data"][key]).decode()
    return None


def check(files: dict[str, list[dict]], trial: dict[str, list[dict]] | None = None) -> list[str]:
    problems: list[str] = []
    err = problems.append
    docs = documents(files, err)

    def of_kind(kind: str) -> list[dict]:
        return [d for d in docs if d.get("kind") == kind]

    # --- the config ------------------------------------------------------
    configmaps = [c for c in of_kind("ConfigMap") if CONFIG_KEY in (c.get("data") or {})]
    if len(configmaps) != 1:
        err(f"expected one ConfigMap with data.{CONFIG_KEY}, found {len(configmaps)}")
        return problems
    cm = configmaps[0]
    text = cm["data"][CONFIG_KEY]
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        err(f"ConfigMap {cm['metadata']['name']}: {CONFIG_KEY} is not valid TOML: {exc}")
        return problems
    unknown = (set(config) | set(commented_keys(text))) - known_keys()
    if unknown:
        err(f"{CONFIG_KEY}: keys that are no harnessd flag: {sorted(unknown)}")
    for key, value in config.items():
        allowed = choices(key) if key in known_keys() else None
        if allowed is not None and value not in allowed:
            err(f"{CONFIG_KEY}: {key} = {value!r} is not one of {sorted(allowed)}")
    try:
        listeners = listen_ports(config.get("listen", []))
    except AssertionError as exc:
        err(f"{CONFIG_KEY}: {exc}")
        listeners = {}
    http_scheme = "ws" if "ws" in listeners else "wss" if "wss" in listeners else None
    if http_scheme is None:
        err(f"{CONFIG_KEY}: no ws:// or wss:// listener, so no /healthz for the probes")
        return problems
    http_host, http_port = listeners[http_scheme]
    if http_host not in ("0.0.0.0", "[::]"):
        err(f"{CONFIG_KEY}: the {http_scheme} listener binds {http_host}; the kubelet and the Service "
            f"reach the pod IP, so bind 0.0.0.0 or [::]")
    drain_s = config.get("drain-timeout-ms", default("drain-timeout-ms")) / 1000
    settle_s = config.get("shutdown-grace-ms", default("shutdown-grace-ms")) / 1000
    idle_s = config.get("ws-idle-timeout-ms", default("ws-idle-timeout-ms")) / 1000

    # --- the workload ----------------------------------------------------
    workloads = of_kind("StatefulSet") + of_kind("Deployment")
    if len(workloads) != 1:
        err(f"expected one StatefulSet or Deployment, found {len(workloads)}")
        return problems
    wl = workloads[0]
    kind = wl["kind"]
    pod = get(wl, "spec", "template", "spec", default={})
    pod_labels = get(wl, "spec", "template", "metadata", "labels", default={})
    if not matches(get(wl, "spec", "selector", "matchLabels", default={}), pod_labels):
        err(f"{kind}: spec.selector does not match the pod template's labels")
    containers = [c for c in pod.get("containers", []) if c.get("name") == "harnessd"]
    if len(containers) != 1:
        err(f"{kind}: no container named harnessd")
        return problems
    c = containers[0]
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
    port_numbers = set(ports.values())

    def resolve(port) -> int | None:
        return ports.get(port) if isinstance(port, str) else port

    # the command line: the image's entrypoint is harnessd, so args are its flags
    command = [str(a) for a in c.get("command") or []]
    args = command[1:] + [str(a) for a in c.get("args") or []]
    for problem in command_line_problems(args):
        err(f"container args: {problem}")

    def setting(flag: str, fallback=None):
        """The command line wins over the file, as in harnessd."""
        given = option_values(args, flag)
        return given[-1] if given else config.get(flag, fallback)

    store = setting("store", "jsonl")

    scheme = "HTTPS" if http_scheme == "wss" else "HTTP"
    for probe_name in ("readinessProbe", "livenessProbe"):
        probe = c.get(probe_name)
        if not probe:
            err(f"container harnessd has no {probe_name}")
            continue
        http = probe.get("httpGet") or {}
        path = http.get("path")
        if probe_name == "livenessProbe" and store == "postgres":
            # /healthz fails while the database is unreachable: as liveness it
            # would restart every pod at once during a database outage.
            if path not in DB_FREE_PATHS:
                err(f"{probe_name}: path {path!r}; with --store postgres liveness must not depend on the "
                    f"database (/healthz does): use one of {sorted(DB_FREE_PATHS)}")
        elif path != "/healthz":
            err(f"{probe_name}: path {path!r}, expected /healthz")
        port = resolve(http.get("port"))
        if port != http_port:
            err(f"{probe_name}: port {http.get('port')!r} (= {port}) is not the {http_scheme} listener's "
                f"port {http_port} in {CONFIG_KEY}")
        if http.get("scheme", "HTTP") != scheme:
            err(f"{probe_name}: scheme {http.get('scheme', 'HTTP')}, the listener is {http_scheme}://")
    if http_port not in port_numbers:
        err(f"container ports {sorted(port_numbers)} lack the {http_scheme} port {http_port}")
    for scheme_name, (_, port) in listeners.items():
        if port not in port_numbers:
            err(f"{CONFIG_KEY} listens on {scheme_name}:{port}, which is no containerPort")

    # stopping: preStop, then SIGTERM and the drain, all inside the grace period
    pre_stop = get(c, "lifecycle", "preStop", "exec", "command", default=[])
    pre_stop_s = 0.0
    if pre_stop:
        m = re.fullmatch(r"(?:.*\s)?sleep\s+(\d+(?:\.\d+)?)", " ".join(map(str, pre_stop)))
        if m:
            pre_stop_s = float(m.group(1))
        else:
            err(f"preStop {pre_stop}: only a sleep is accounted for")
    grace = pod.get("terminationGracePeriodSeconds", 30)
    needed = pre_stop_s + drain_s + settle_s
    if not grace > needed:
        err(f"terminationGracePeriodSeconds {grace} <= preStop {pre_stop_s:g} s + drain-timeout-ms "
            f"{drain_s:g} s + shutdown-grace-ms {settle_s:g} s")
    if not grace * 1000 > drain_s * 1000:
        err(f"terminationGracePeriodSeconds {grace} does not exceed drain-timeout-ms")
    live = c.get("livenessProbe") or {}
    live_window = live.get("periodSeconds", 10) * live.get("failureThreshold", 3)
    if live and not live_window > drain_s + settle_s:
        err(f"livenessProbe gives up after {live_window} s, within a drain ({drain_s + settle_s:g} s): "
            f"/healthz answers 503 then and the kubelet would kill the pod mid-drain")

    # the config file where --config reads it
    config_paths = option_values(args, "config")
    if not config_paths:
        err(f"container args {args} do not pass --config")
    else:
        volumes = {v.get("name"): v for v in pod.get("volumes", [])}
        mounted = False
        for mount in c.get("volumeMounts", []):
            vol = volumes.get(mount.get("name"), {})
            if get(vol, "configMap", "name") == cm["metadata"]["name"]:
                mounted |= config_paths[-1] == f"{mount['mountPath'].rstrip('/')}/{CONFIG_KEY}"
        if not mounted:
            err(f"--config {config_paths[-1]} is not the ConfigMap {cm['metadata']['name']} mounted")
    # --- authentication ----------------------------------------------------
    # The Service and the Ingress reach every listener that is not loopback:
    # clients must authenticate there, with a token file from a Secret.
    problems += auth_problems(config, args, c, pod, docs + [d for fd in (trial or {}).values() for d in fd])

    scrape_port = get(wl, "spec", "template", "metadata", "annotations", "prometheus.io/port")
    if scrape_port is not None and int(scrape_port) != http_port:
        err(f"prometheus.io/port {scrape_port} is not the {http_scheme} port {http_port}")

    services = {s["metadata"]["name"]: s for s in of_kind("Service")}
    replicas = get(wl, "spec", "replicas", default=1)
    secret_refs: list[tuple[str, str, str]] = []   # (what, Secret name, key)
    url_var = None
    if kind == "StatefulSet":
        # the session root on the pod's volume claim
        root = config.get("session-root")
        claims = {get(t, "metadata", "name") for t in get(wl, "spec", "volumeClaimTemplates", default=[])}
        on_claim = [m for m in c.get("volumeMounts", []) if m.get("name") in claims]
        if store != "jsonl":
            err(f"StatefulSet with --store {store}: its volume claim is for jsonl session logs")
        if not root:
            err(f"{CONFIG_KEY}: no session-root")
        elif not any(m.get("mountPath", "").rstrip("/") == root.rstrip("/") for m in on_claim):
            err(f"session-root {root} is not a volumeClaimTemplates mount ({[m.get('mountPath') for m in on_claim]})")
        governing = services.get(get(wl, "spec", "serviceName"))
        if governing is None or get(governing, "spec", "clusterIP") != "None":
            err(f"StatefulSet serviceName {get(wl, 'spec', 'serviceName')!r} is not a headless Service")
    else:
        # several interchangeable pods: the sessions must be in the database
        if store != "postgres":
            err(f"Deployment with --store {store}: its pods keep no volume and share nothing; use postgres")
        if replicas < 2:
            err(f"Deployment replicas {replicas}: the point of the shared store is more than one pod")
        # one node id per pod, from its name
        if "node-id" in config:
            err(f"{CONFIG_KEY} sets node-id: every pod would have the same one")
        node_ids = option_values(args, "node-id")
        var = expanded_var(node_ids[-1]) if node_ids else None
        if var is None:
            err(f"--node-id {node_ids[-1] if node_ids else '(missing)'}: expected $(VAR) with VAR the pod's name")
        elif get(env_var(c, var) or {}, "valueFrom", "fieldRef", "fieldPath") != "metadata.name":
            err(f"--node-id $({var}): {var} is not the downward API's metadata.name")
        # the database URL holds a password: from a Secret, never the ConfigMap
        if "postgres-url" in config:
            err(f"{CONFIG_KEY} sets postgres-url: a password in a ConfigMap; take it from a Secret")
        urls = option_values(args, "postgres-url")
        if urls:
            url_var = expanded_var(urls[-1])
            ref = get(env_var(c, url_var) or {}, "valueFrom", "secretKeyRef") if url_var else None
            if not ref:
                err(f"--postgres-url {urls[-1]}: expected $(VAR) with VAR from a secretKeyRef")
            else:
                secret_refs.append(("--postgres-url", ref.get("name"), ref.get("key")))
        else:
            # libpq's PG* variables instead
            ref = get(env_var(c, "PGPASSWORD") or {}, "valueFrom", "secretKeyRef")
            from_secret = [get(e, "secretRef", "name") for e in c.get("envFrom", [])
                           if get(e, "secretRef") and not get(e, "secretRef", "optional", default=False)]
            if not ref and not from_secret:
                err("no --postgres-url and no PGPASSWORD from a Secret: how does harnessd reach the database?")
            elif ref:
                secret_refs.append(("PGPASSWORD", ref.get("name"), ref.get("key")))
        if get(wl, "spec", "volumeClaimTemplates") or any(v.get("persistentVolumeClaim") for v in pod.get("volumes", [])):
            err("Deployment with a volume claim: the pods are meant to keep no state")

    # --- Services ----------------------------------------------------------
    for name, svc in services.items():
        if not matches(get(svc, "spec", "selector", default={}), pod_labels):
            err(f"Service {name}: selector does not match the pods")
        for p in get(svc, "spec", "ports", default=[]):
            if resolve(p.get("targetPort", p.get("port"))) not in port_numbers:
                err(f"Service {name}: targetPort {p.get('targetPort')} is no container port")

    def service_port(backend: dict) -> int | None:
        svc = services.get(get(backend, "service", "name"))
        if svc is None:
            return None
        want = get(backend, "service", "port", default={})
        for p in get(svc, "spec", "ports", default=[]):
            if p.get("name") == want.get("name") or p.get("port") == want.get("number"):
                return resolve(p.get("targetPort", p.get("port")))
        return None

    # --- Ingress -----------------------------------------------------------
    ingresses = of_kind("Ingress")
    if not ingresses:
        err("no Ingress")
    for ing in ingresses:
        name = ing["metadata"]["name"]
        notes = get(ing, "metadata", "annotations", default={})
        paths = [p for rule in get(ing, "spec", "rules", default=[]) for p in get(rule, "http", "paths", default=[])]
        for p in paths:
            if service_port(p.get("backend", {})) != http_port:
                err(f"Ingress {name}: path {p.get('path')} does not reach the {http_scheme} port {http_port}")
        if not get(ing, "spec", "tls"):
            err(f"Ingress {name}: no tls section")
        if any(p.get("path") == "/metrics" for p in paths):
            if not notes.get("nginx.ingress.kubernetes.io/whitelist-source-range"):
                err(f"Ingress {name}: /metrics without whitelist-source-range")
        elif any(p.get("path") == "/" for p in paths):
            for key in ("proxy-read-timeout", "proxy-send-timeout"):
                value = notes.get(f"nginx.ingress.kubernetes.io/{key}")
                if value is None or not int(value) > idle_s:
                    err(f"Ingress {name}: {key} {value!r} must exceed ws-idle-timeout-ms ({idle_s:g} s)")
    # ingress-nginx passes the client's Host header on: harnessd answers
    # 421 to a Host that is not its own address, a loopback name or an
    # allow-host, and 403 to a page whose Origin is not allowed.
    allow_hosts = set(list_setting(config, args, "allow-host"))
    allow_origins = set(list_setting(config, args, "allow-origin"))
    for ing in ingresses:
        for rule in get(ing, "spec", "rules", default=[]):
            host = rule.get("host")
            if not host:
                err(f"Ingress {ing['metadata']['name']}: a rule without host: any Host would reach harnessd, "
                    f"which answers 421 to names that are not in allow-host")
                continue
            if host not in allow_hosts:
                err(f"Ingress {ing['metadata']['name']}: host {host} is not in allow-host "
                    f"{sorted(allow_hosts)}: harnessd would answer its requests with 421")
            if f"https://{host}" not in allow_origins:
                err(f"Ingress {ing['metadata']['name']}: https://{host} is not in allow-origin "
                    f"{sorted(allow_origins)}: the page's WebSocket would get 403")
    # behind the controller every client has the controller's address
    per_ip = int(setting("max-connections-per-ip", default("max-connections-per-ip")))
    if ingresses and per_ip != 0:
        err(f"max-connections-per-ip {per_ip} behind an Ingress: every browser arrives from the controller's "
            f"addresses, so this would cap all users together; set 0 and limit per client at the Ingress")
    public = [p for ing in ingresses for rule in get(ing, "spec", "rules", default=[])
              for p in get(rule, "http", "paths", default=[])]
    if not any(p.get("path") == "/metrics" and p.get("pathType") == "Exact" for p in public):
        err("no Exact /metrics path: the Prefix / would publish /metrics to everyone")

    # --- PodDisruptionBudget -----------------------------------------------
    pdbs = of_kind("PodDisruptionBudget")
    if len(pdbs) != 1:
        err(f"expected one PodDisruptionBudget, found {len(pdbs)}")
    for pdb in pdbs:
        if not matches(get(pdb, "spec", "selector", "matchLabels", default={}), pod_labels):
            err("PodDisruptionBudget: selector does not match the pods")
        if get(pdb, "spec", "minAvailable") is not None and int(pdb["spec"]["minAvailable"]) >= replicas:
            err(f"PodDisruptionBudget minAvailable {pdb['spec']['minAvailable']} >= replicas {replicas}: "
                f"no node could ever be drained")

    if kind == "Deployment" and trial is not None:
        surge = get(wl, "spec", "strategy", "rollingUpdate", "maxSurge", default="25%")
        if isinstance(surge, str) and surge.endswith("%"):
            surge = math.ceil(replicas * int(surge[:-1]) / 100)
        pool = int(setting("postgres-pool", default("postgres-pool")))
        problems += check_trial(trial, harnessd_selectors=[get(s, "spec", "selector", default={})
                                                           for s in services.values()]
                                + [get(p, "spec", "selector", "matchLabels", default={}) for p in pdbs],
                                secret_refs=secret_refs, connections=(replicas + int(surge)) * pool,
                                pool_note=f"(replicas {replicas} + maxSurge {surge}) x postgres-pool {pool}")
    return problems


def list_setting(config: dict, args: list[str], flag: str) -> list[str]:
    """A repeatable setting: the file's list and the command line's values."""
    value = config.get(flag, [])
    return ([value] if isinstance(value, str) else list(value)) + option_values(args, flag)


def auth_problems(config: dict, args: list[str], container: dict, pod: dict, all_docs: list[dict]) -> list[str]:
    """A harnessd that listens beyond loopback has auth-token-file or
    auth-file set (not insecure-no-auth), and that file is in a Secret,
    mounted read-only and not optional; the Secret itself is created by
    the operator, never shipped with the manifests."""
    problems: list[str] = []
    err = problems.append
    listens = list_setting(config, args, "listen")
    try:
        exposed = non_loopback(listens)
    except AttributeError:
        return problems   # a bad listen URL, reported above
    if config.get(INSECURE_KEY) is True or flag_given(args, INSECURE_KEY):
        err(f"{INSECURE_KEY} is set: harnessd would serve {exposed or listens} to anyone who reaches it")
    given = {key: str(v) for key in AUTH_KEYS if (v := (option_values(args, key) or [config.get(key)])[-1])}
    if exposed and not given:
        err(f"{CONFIG_KEY} listens on {exposed} without {' or '.join(AUTH_KEYS)}: the Service and Ingress reach "
            f"these, and harnessd refuses to start on them without authentication")
    volumes = {v.get("name"): v for v in pod.get("volumes", [])}
    mounts = sorted(container.get("volumeMounts", []), key=lambda m: -len(m.get("mountPath", "")))
    for key, path in given.items():
        mount = next((m for m in mounts if path == m.get("mountPath", "").rstrip("/")
                      or path.startswith(m.get("mountPath", "").rstrip("/") + "/")), None)
        if mount is None:
            err(f"{key} {path}: on no volume mount of the container: the file would not exist")
            continue
        vol = volumes.get(mount.get("name"), {})
        secret = vol.get("secret")
        if secret is None:
            kind = next((k for k in vol if k != "name"), "nothing")
            err(f"{key} {path}: mounted from {kind} (volume {mount.get('name')!r}), not a Secret")
            continue
        if not mount.get("readOnly"):
            err(f"{key} {path}: the mount {mount.get('mountPath')} of Secret {secret.get('secretName')} "
                f"is not read-only")
        if secret.get("optional"):
            err(f"{key} {path}: Secret {secret.get('secretName')} is optional: without it the pod would start "
                f"and harnessd fail to read the file (or, with the key removed, serve without a token)")
        mode = secret.get("defaultMode")
        if mode is not None and int(mode) & 0o007:
            err(f"{key} {path}: Secret {secret.get('secretName')} defaultMode {int(mode):o} is readable by others")
        relative = path[len(mount["mountPath"].rstrip("/")) + 1:]
        if mount.get("subPath"):
            secret_key = mount["subPath"] if not relative else None
        elif secret.get("items"):
            secret_key = next((i.get("key") for i in secret["items"] if i.get("path") == relative), None)
        else:
            secret_key = relative if relative and "/" not in relative else None
        if secret_key is None:
            err(f"{key} {path}: no key of Secret {secret.get('secretName')} is mounted at that path")
        shipped = [d for d in all_docs if d.get("kind") == "Secret"
                   and get(d, "metadata", "name") == secret.get("secretName")]
        if shipped:
            err(f"{key}: Secret {secret.get('secretName')} is in the manifests: every copy of them would share "
                f"one known token; the operator creates it (kubectl create secret)")
    return problems


def check_trial(files: dict[str, list[dict]], *, harnessd_selectors: list[dict],
                secret_refs: list[tuple[str, str, str]], connections: int, pool_note: str) -> list[str]:
    """postgres-trial/: a single PostgreSQL the Deployment can reach with
    the Secret it reads."""
    problems: list[str] = []
    err = problems.append
    docs = documents(files, err, where=f"{TRIAL_DIR}/")
    secrets = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "Secret"}
    services = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "Service"}
    sets = [d for d in docs if d.get("kind") == "StatefulSet"]
    if len(sets) != 1:
        err(f"{TRIAL_DIR}: expected one StatefulSet, found {len(sets)}")
        return problems
    sts = sets[0]
    labels = get(sts, "spec", "template", "metadata", "labels", default={})
    if not matches(get(sts, "spec", "selector", "matchLabels", default={}), labels):
        err(f"{TRIAL_DIR}: the StatefulSet's selector does not match its pods")
    for selector in harnessd_selectors:
        if matches(selector, labels):
            err(f"{TRIAL_DIR}: the harnessd selector {selector} also selects the PostgreSQL pod")
    governing = services.get(get(sts, "spec", "serviceName"))
    if governing is None or get(governing, "spec", "clusterIP") != "None":
        err(f"{TRIAL_DIR}: serviceName {get(sts, 'spec', 'serviceName')!r} is not a headless Service")
    for name, svc in services.items():
        if not matches(get(svc, "spec", "selector", default={}), labels):
            err(f"{TRIAL_DIR}: Service {name} does not select the PostgreSQL pod")
    pg = next(iter(get(sts, "spec", "template", "spec", "containers", default=[])), {})
    ready = " ".join(map(str, get(pg, "readinessProbe", "exec", "command", default=[])))
    if "pg_isready" not in ready:
        err(f"{TRIAL_DIR}: the readiness probe {ready!r} does not ask pg_isready")

    def env_value(name: str) -> str | None:
        e = env_var(pg, name)
        if e is None:
            return None
        if "value" in e:
            return str(e["value"])
        ref = get(e, "valueFrom", "secretKeyRef", default={})
        secret = secrets.get(ref.get("name"))
        return secret_value(secret, ref.get("key")) if secret else None

    user = env_value("POSTGRES_USER") or "postgres"
    database = env_value("POSTGRES_DB") or user
    password = env_value("POSTGRES_PASSWORD")
    if password is None:
        err(f"{TRIAL_DIR}: POSTGRES_PASSWORD is not set from a Secret of this directory")

    for what, name, key in secret_refs:
        secret = secrets.get(name)
        value = secret_value(secret, key) if secret else None
        if value is None:
            err(f"{what} reads Secret {name!r} key {key!r}, which {TRIAL_DIR} does not provide")
            continue
        if what != "--postgres-url":
            continue
        url = urlsplit(value)
        if url.scheme not in ("postgresql", "postgres"):
            err(f"{TRIAL_DIR}: {name}.{key} is not a postgresql:// URL")
            continue
        host = (url.hostname or "").split(".")[0]
        svc = services.get(host)
        if svc is None:
            err(f"{TRIAL_DIR}: the URL's host {url.hostname!r} is none of the Services {sorted(services)}")
        elif (url.port or 5432) not in [p.get("port") for p in get(svc, "spec", "ports", default=[])]:
            err(f"{TRIAL_DIR}: the URL's port {url.port or 5432} is not a port of Service {host}")
        if unquote(url.username or "") != user:
            err(f"{TRIAL_DIR}: the URL's user {url.username!r} is not POSTGRES_USER {user!r}")
        if url.path.lstrip("/") != database:
            err(f"{TRIAL_DIR}: the URL's database {url.path.lstrip('/')!r} is not POSTGRES_DB {database!r}")
        if password is not None and unquote(url.password or "") != password:
            err(f"{TRIAL_DIR}: the URL's password is not the database's POSTGRES_PASSWORD")

    args = " ".join(map(str, (pg.get("command") or []) + (pg.get("args") or [])))
    m = re.search(r"max_connections=(\d+)", args)
    max_connections = int(m.group(1)) if m else PG_MAX_CONNECTIONS
    room = max_connections - PG_RESERVED - PG_HEADROOM
    if connections > room:
        err(f"{TRIAL_DIR}: {pool_note} = {connections} connections, more than max_connections "
            f"{max_connections} - {PG_RESERVED} reserved - {PG_HEADROOM} headroom = {room}")
    return problems


def self_test_single(directory: Path) -> int:
    files = load(directory)
    assert not check(files), check(files)

    def broken(mutate) -> list[str]:
        f = copy.deepcopy(files)
        mutate({d["kind"]: d for docs in f.values() for d in docs if d.get("kind") not in ("Ingress", "Service")},
               f)
        return check(f)

    def container(kinds):
        return kinds["StatefulSet"]["spec"]["template"]["spec"]["containers"][0]

    def set_config(kinds, old, new):
        data = kinds["ConfigMap"]["data"]
        assert old in data[CONFIG_KEY], old
        data[CONFIG_KEY] = data[CONFIG_KEY].replace(old, new)

    cases = {
        "probe port": lambda k, f: container(k)["readinessProbe"]["httpGet"].update(port="tcp"),
        "probe path": lambda k, f: container(k)["livenessProbe"]["httpGet"].update(path="/"),
        "grace period": lambda k, f: k["StatefulSet"]["spec"]["template"]["spec"].update(
            terminationGracePeriodSeconds=30),
        "drain longer than grace": lambda k, f: set_config(k, "drain-timeout-ms = 30000", "drain-timeout-ms = 90000"),
        "listener moved": lambda k, f: set_config(k, "ws://0.0.0.0:7878", "ws://0.0.0.0:8080"),
        "loopback listener": lambda k, f: set_config(k, "ws://0.0.0.0:7878", "ws://127.0.0.1:7878"),
        "unknown key": lambda k, f: set_config(k, "log-level", "log-levels"),
        "session root": lambda k, f: set_config(k, '"/var/lib/harnessd"', '"/data"'),
        "pdb selector": lambda k, f: k["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].update(app="x"),
        "short liveness": lambda k, f: container(k)["livenessProbe"].update(failureThreshold=1),
        "unknown argument": lambda k, f: container(k)["args"].extend(["--listen-on", "ws://0.0.0.0:7878"]),
    }
    failed = run_cases(cases, broken)
    failed += run_cases(auth_cases("StatefulSet", container, set_config) | {
        "token Secret shipped": (lambda k, f: f.update({"secret.yaml": [{
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "harnessd-auth"},
            "stringData": {"token": "known-to-everyone"}}]}), "is in the manifests"),
    }, broken, prefix="auth: ")
    failed += auth_file_accepted(broken, set_config)
    return failed


def auth_cases(kind: str, container, set_config) -> dict:
    """Broken authentication: each must be refused (mutate, phrase)."""
    def volume(kinds, name):
        return next(v for v in kinds[kind]["spec"]["template"]["spec"]["volumes"] if v["name"] == name)

    def mount(kinds, name):
        return next(m for m in container(kinds)["volumeMounts"] if m["name"] == name)

    def replace_source(vol, **source):
        for key in [k for k in vol if k != "name"]:
            del vol[key]
        vol.update(source)

    return {
        "no auth": (lambda k, x: set_config(k, "\nauth-token-file =", "\n#auth-token-file ="),
                    "without auth-token-file or auth-file"),
        "insecure-no-auth in the config": (lambda k, x: set_config(k, "threads = 0", "threads = 0\ninsecure-no-auth = true"),
                                           "insecure-no-auth is set"),
        "--insecure-no-auth": (lambda k, x: container(k)["args"].append("--insecure-no-auth"), "insecure-no-auth is set"),
        "token on the ConfigMap's mount": (lambda k, x: set_config(k, '"/etc/harnessd-auth/token"',
                                                                   '"/etc/harnessd/token"'), "not a Secret"),
        "token on no mount": (lambda k, x: set_config(k, '"/etc/harnessd-auth/token"', '"/srv/token"'),
                              "on no volume mount"),
        "token from an emptyDir": (lambda k, x: replace_source(volume(k, "auth"), emptyDir={}),
                                   "mounted from emptyDir"),
        "optional Secret": (lambda k, x: volume(k, "auth")["secret"].update(optional=True), "is optional"),
        "writable mount": (lambda k, x: mount(k, "auth").update(readOnly=False), "is not read-only"),
        "world-readable": (lambda k, x: volume(k, "auth")["secret"].update(defaultMode=0o444), "readable by others"),
        "file not a key": (lambda k, x: volume(k, "auth")["secret"].update(
            items=[{"key": "token", "path": "bearer"}]), "no key of Secret"),
        "Ingress host not allowed": (lambda k, x: set_config(k, 'allow-host = ["harnessd.example.com"]',
                                                             'allow-host = ["other.example.com"]'),
                                     "is not in allow-host"),
        "per-address limit behind the Ingress": (lambda k, x: set_config(k, "max-connections-per-ip = 0",
                                                                       "max-connections-per-ip = 256"),
                                                 "cap all users together"),
        "Ingress origin not allowed": (lambda k, x: set_config(k, 'allow-origin = ["https://harnessd.example.com"]',
                                                               'allow-origin = ["https://other.example.com"]'),
                                       "is not in allow-origin"),
    }


def auth_file_accepted(broken, set_config) -> int:
    """auth-file from the same Secret is as good as auth-token-file."""
    problems = broken(lambda k, x: set_config(k, 'auth-token-file = "/etc/harnessd-auth/token"',
                                              'auth-file = "/etc/harnessd-auth/principals.toml"'))
    print(f"{'ok  ' if not problems else 'FAIL'} auth-file from the Secret accepted: {problems[:1]}")
    return 1 if problems else 0


def self_test_cluster(directory: Path) -> int:
    files, trial = load(directory), load_trial(directory)
    assert trial is not None, f"{directory} has no {TRIAL_DIR}/"
    assert not check(files, trial), check(files, trial)

    def broken(mutate) -> list[str]:
        f, t = copy.deepcopy(files), copy.deepcopy(trial)
        docs = [d for fd in f.values() for d in fd]
        trial_docs = [d for fd in t.values() for d in fd]
        mutate({d["kind"]: d for d in docs if d.get("kind") not in ("Ingress", "Service")},
               {d["kind"]: d for d in trial_docs})
        return check(f, t)

    def container(kinds):
        return kinds["Deployment"]["spec"]["template"]["spec"]["containers"][0]

    def set_config(kinds, old, new):
        data = kinds["ConfigMap"]["data"]
        assert old in data[CONFIG_KEY], old
        data[CONFIG_KEY] = data[CONFIG_KEY].replace(old, new)

    def set_arg(kinds, flag, value):
        args = container(kinds)["args"]
        args[args.index(flag) + 1] = value

    def set_env_ref(kinds, var, **ref):
        env = next(e for e in container(kinds)["env"] if e["name"] == var)
        next(iter(env["valueFrom"].values())).update(ref)

    def rename_arg(kinds, old, new):
        args = container(kinds)["args"]
        args[args.index(old)] = new

    def set_url(trial_kinds, old, new):
        data = trial_kinds["Secret"]["stringData"]
        assert old in data["url"], old
        data["url"] = data["url"].replace(old, new)

    # what each broken copy must be refused for
    cases = {
        "liveness on /healthz": (lambda k, t: container(k)["livenessProbe"]["httpGet"].update(path="/healthz"),
                                 "liveness must not depend on the database"),
        "readiness path": (lambda k, t: container(k)["readinessProbe"]["httpGet"].update(path="/"),
                           "readinessProbe: path '/'"),
        "probe port": (lambda k, t: container(k)["livenessProbe"]["httpGet"].update(port="tcp"),
                       "is not the ws listener's port"),
        "grace period": (lambda k, t: k["Deployment"]["spec"]["template"]["spec"].update(
            terminationGracePeriodSeconds=40), "terminationGracePeriodSeconds 40"),
        "store jsonl": (lambda k, t: set_config(k, 'store = "postgres"', 'store = "jsonl"'),
                        "Deployment with --store jsonl"),
        "store misspelt": (lambda k, t: set_config(k, 'store = "postgres"', 'store = "postgress"'),
                           "'postgress' is not one of"),
        "store overridden": (lambda k, t: container(k)["args"].extend(["--store", "memory"]),
                             "Deployment with --store memory"),
        "unknown argument": (lambda k, t: rename_arg(k, "--postgres-url", "--postgres-uri"),
                             "--postgres-uri is no harnessd flag"),
        "fixed node id": (lambda k, t: set_arg(k, "--node-id", "a"), "--node-id a: expected $(VAR)"),
        "node id not the pod name": (lambda k, t: set_env_ref(k, "POD_NAME", fieldPath="spec.nodeName"),
                                     "is not the downward API's metadata.name"),
        "node id in the ConfigMap": (lambda k, t: set_config(k, "threads = 0", 'threads = 0\nnode-id = "x"'),
                                     "sets node-id"),
        "URL in the ConfigMap": (lambda k, t: set_config(
            k, "threads = 0", 'threads = 0\npostgres-url = "postgresql://harnessd:pw@db/harnessd"'),
            "sets postgres-url"),
        "URL literal in args": (lambda k, t: set_arg(k, "--postgres-url", "postgresql://harnessd:pw@db/harnessd"),
                                "from a secretKeyRef"),
        "one replica": (lambda k, t: k["Deployment"]["spec"].update(replicas=1), "replicas 1"),
        "pdb blocks drains": (lambda k, t: k["PodDisruptionBudget"]["spec"].update(minAvailable=2),
                              "no node could ever be drained"),
        "secret name": (lambda k, t: set_env_ref(k, "HARNESSD_POSTGRES_URL", name="harnessd-db"),
                        "reads Secret 'harnessd-db'"),
        "trial host": (lambda k, t: set_url(t, "@harnessd-postgres:", "@postgres:"), "the URL's host"),
        "trial password": (lambda k, t: set_url(t, ":harnessd-trial-change-me@", ":other@"),
                           "the URL's password"),
        "trial database": (lambda k, t: set_url(t, "5432/harnessd", "5432/postgres"), "the URL's database"),
        "pools exceed max_connections": (lambda k, t: set_config(k, "postgres-pool = 4", "postgres-pool = 40"),
                                         "more than max_connections"),
        "trial selects harnessd": (lambda k, t: t["StatefulSet"]["spec"]["template"]["metadata"]["labels"].update(
            {"app.kubernetes.io/name": "harnessd"}), "also selects the PostgreSQL pod"),
    }
    failed = run_cases(cases, broken, prefix="cluster: ")
    failed += run_cases(auth_cases("Deployment", container, set_config), broken, prefix="cluster auth: ")
    failed += auth_file_accepted(broken, set_config)
    # a trial manifest that does not say it is not for production
    with tempfile.TemporaryDirectory() as tmp:
        copy_dir = Path(tmp) / "cluster"
        shutil.copytree(directory, copy_dir)
        victim = copy_dir / TRIAL_DIR / "statefulset.yaml"
        victim.write_text(victim.read_text().replace(TRIAL_LABEL, "for trials"))
        found = unlabelled(copy_dir)
        print(f"{'ok  ' if found else 'MISS'} cluster: trial not labelled: {found[:1]}")
        failed += not found
    return failed


def run_cases(cases, broken, prefix: str = "") -> int:
    """cases: name -> mutate, or (mutate, a phrase one of the problems must contain)."""
    failed = 0
    for what, case in cases.items():
        mutate, expect = case if isinstance(case, tuple) else (case, "")
        problems = broken(mutate)
        hits = [p for p in problems if expect in p]
        print(f"{'ok  ' if hits else 'MISS'} {prefix}{what}: {(hits or problems)[:1]}")
        failed += not hits
    print(f"{len(cases) - failed} passed, {failed} failed")
    return failed


def check_directory(directory: Path) -> int:
    files = load(directory)
    trial = load_trial(directory)
    problems = check(files, trial)
    if trial is not None:
        problems += unlabelled(directory)
    count = sum(len(d) for d in files.values()) + sum(len(d) for d in (trial or {}).values())
    for p in problems:
        print(f"FAIL {p}")
    print(f"{directory}: {len(files) + len(trial or {})} files, {count} documents: "
          f"{'ok' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--self-test"]:
        failed = self_test_single(DEPLOY / "k8s") + self_test_cluster(DEPLOY / "k8s" / "cluster")
        return 1 if failed else 0
    directories = [Path(a) for a in argv] or [DEPLOY / "k8s", DEPLOY / "k8s" / "cluster"]
    return max(check_directory(d) for d in directories)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
