#!/usr/bin/env python3
"""Checks deploy/k8s/ against itself and against harnessd: every YAML file
parses; the probes ask /healthz on the port of the ws:// listener the
ConfigMap's harnessd.toml configures (on all interfaces, where the kubelet
reaches it); the grace period covers preStop + drain-timeout-ms +
shutdown-grace-ms, and liveness cannot restart a draining pod; the config is
mounted where --config reads it and the session root is the volume claim;
selectors, Services, the Ingress backend, its WebSocket timeouts and the
PodDisruptionBudget fit together; every config key is a harnessd flag.

Usage: check_k8s.py [DIR]        (default deploy/k8s; exit 1 listing problems)
       check_k8s.py --self-test  (broken copies of the manifests must fail)
Needs python3-yaml and the harnessd binary (HARNESSD_BIN) for its flags."""

from __future__ import annotations

import copy
import re
import sys
import tomllib
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from deploy_common import DEPLOY, commented_keys, default, known_keys, listen_ports  # noqa: E402

CONFIG_KEY = "harnessd.toml"


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


def check(files: dict[str, list[dict]]) -> list[str]:
    problems: list[str] = []
    err = problems.append
    docs = []
    for name, file_docs in files.items():
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
            docs.append((name, d))

    def of_kind(kind: str) -> list[dict]:
        return [d for _, d in docs if d.get("kind") == kind]

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

    # --- the StatefulSet -------------------------------------------------
    sets = of_kind("StatefulSet")
    if len(sets) != 1:
        err(f"expected one StatefulSet, found {len(sets)}")
        return problems
    sts = sets[0]
    pod = get(sts, "spec", "template", "spec", default={})
    pod_labels = get(sts, "spec", "template", "metadata", "labels", default={})
    if not matches(get(sts, "spec", "selector", "matchLabels", default={}), pod_labels):
        err("StatefulSet: spec.selector does not match the pod template's labels")
    containers = [c for c in pod.get("containers", []) if c.get("name") == "harnessd"]
    if len(containers) != 1:
        err("StatefulSet: no container named harnessd")
        return problems
    c = containers[0]
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
    port_numbers = set(ports.values())

    def resolve(port) -> int | None:
        return ports.get(port) if isinstance(port, str) else port

    scheme = "HTTPS" if http_scheme == "wss" else "HTTP"
    for probe_name in ("readinessProbe", "livenessProbe"):
        probe = c.get(probe_name)
        if not probe:
            err(f"container harnessd has no {probe_name}")
            continue
        http = probe.get("httpGet") or {}
        if http.get("path") != "/healthz":
            err(f"{probe_name}: path {http.get('path')!r}, expected /healthz")
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
    args = [str(a) for a in (c.get("command") or []) + (c.get("args") or [])]
    if "--config" not in args or args.index("--config") + 1 >= len(args):
        err(f"container args {args} do not pass --config")
    else:
        config_path = args[args.index("--config") + 1]
        volumes = {v.get("name"): v for v in pod.get("volumes", [])}
        mounted = False
        for mount in c.get("volumeMounts", []):
            vol = volumes.get(mount.get("name"), {})
            if get(vol, "configMap", "name") == cm["metadata"]["name"]:
                mounted |= config_path == f"{mount['mountPath'].rstrip('/')}/{CONFIG_KEY}"
        if not mounted:
            err(f"--config {config_path} is not the ConfigMap {cm['metadata']['name']} mounted")
    # the session root on the pod's volume claim
    root = config.get("session-root")
    claims = {get(t, "metadata", "name") for t in get(sts, "spec", "volumeClaimTemplates", default=[])}
    on_claim = [m for m in c.get("volumeMounts", []) if m.get("name") in claims]
    if not root:
        err(f"{CONFIG_KEY}: no session-root")
    elif not any(m.get("mountPath", "").rstrip("/") == root.rstrip("/") for m in on_claim):
        err(f"session-root {root} is not a volumeClaimTemplates mount ({[m.get('mountPath') for m in on_claim]})")
    scrape_port = get(sts, "spec", "template", "metadata", "annotations", "prometheus.io/port")
    if scrape_port is not None and int(scrape_port) != http_port:
        err(f"prometheus.io/port {scrape_port} is not the {http_scheme} port {http_port}")

    # --- Services ----------------------------------------------------------
    services = {s["metadata"]["name"]: s for s in of_kind("Service")}
    governing = services.get(get(sts, "spec", "serviceName"))
    if governing is None or get(governing, "spec", "clusterIP") != "None":
        err(f"StatefulSet serviceName {get(sts, 'spec', 'serviceName')!r} is not a headless Service")
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
        replicas = get(sts, "spec", "replicas", default=1)
        if get(pdb, "spec", "minAvailable") is not None and int(pdb["spec"]["minAvailable"]) >= replicas:
            err(f"PodDisruptionBudget minAvailable {pdb['spec']['minAvailable']} >= replicas {replicas}: "
                f"no node could ever be drained")
    return problems


def self_test(directory: Path) -> int:
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
    }
    failed = 0
    for what, mutate in cases.items():
        problems = broken(mutate)
        print(f"{'ok  ' if problems else 'MISS'} {what}: {problems[:1]}")
        failed += not problems
    print(f"{len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--self-test"]:
        return self_test(DEPLOY / "k8s")
    directory = Path(argv[0]) if argv else DEPLOY / "k8s"
    files = load(directory)
    problems = check(files)
    count = sum(len(d) for d in files.values())
    for p in problems:
        print(f"FAIL {p}")
    print(f"{directory}: {len(files)} files, {count} documents: "
          f"{'ok' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
