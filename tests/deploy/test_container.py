"""deploy/container/Containerfile, checked without building the image (this
machine reaches no container registry, so the image itself is not built
here): both stages are debian:12; every package it installs exists in
Debian 12 (apt-cache); the build stage installs what scripts/install-deps.sh
builds with; the runtime stage provides every shared library the harnessd
under test links (ldd + dpkg -S; a library may come with a dependency of an
installed package, as apt installs those too); the build context has what CMake
configures; user, volume, ports, health check and entrypoint agree with the
daemon's flags.

Authentication, for the image and every compose file of deploy/ that runs
it: a command that listens beyond loopback (as the image's CMD must, for
published ports to reach it) names a token file (--auth-token-file or
--auth-file) and never --insecure-no-auth; the image's file is under
/run/secrets/ (where `podman run --secret` and compose's secrets put it)
and no instruction puts one into the image; a compose service gets its
file from a compose secret (or a read-only bind mount) whose source is
kept out of git."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

import yaml

from deploy_common import (AUTH_KEYS, DEPLOY, INSECURE_KEY, REPO_ROOT, command_line_problems, flag_given,
                           harnessd_bin, listen_ports, non_loopback, option_values)

CONTAINERFILE = DEPLOY / "container" / "Containerfile"
IGNOREFILE = DEPLOY / "container" / "Containerfile.dockerignore"
# Packages every debian:12 image has (apt itself needs them).
BASE_IMAGE = {"libc6", "libgcc-s1", "libstdc++6"}
# Runtimes of sanitized builds (the asan/tsan presets run this test too).
SANITIZER_RUNTIMES = re.compile(r"^lib(asan|ubsan|tsan|lsan)\d*$")


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out, pending = [], ""
    for raw in CONTAINERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def stages() -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for ins in instructions():
        if ins[0] == "FROM":
            result.append([])
        assert result, "an instruction before the first FROM"
        result[-1].append(ins)
    return result


def apt_packages(stage: list[tuple[str, str]]) -> list[str]:
    pkgs = []
    for word, rest in stage:
        if word != "RUN":
            continue
        for m in re.finditer(r"apt-get install ((?:[^&;|])*)", rest):
            pkgs += [t for t in shlex.split(m.group(1)) if not t.startswith("-")]
    return pkgs


def install_deps_packages() -> set[str]:
    text = (REPO_ROOT / "scripts" / "install-deps.sh").read_text()
    body = re.search(r"^packages=\((.*?)^\S", text, re.S | re.M)
    assert body, "no packages=( ... ) in scripts/install-deps.sh"
    words = []
    for line in body.group(1).splitlines():
        words += line.split("#", 1)[0].replace(")", " ").split()
    return set(words)


def exec_form(rest: str) -> list[str]:
    import json
    value = json.loads(rest)
    assert isinstance(value, list), f"not the exec (JSON) form: {rest}"
    return value


def test_two_debian_12_stages():
    s = stages()
    assert len(s) == 2, f"expected a build and a runtime stage, got {len(s)}"
    assert s[0][0][1].split()[0] == "debian:12" and s[0][0][1].split()[-1] == "build", s[0][0]
    assert s[1][0][1] == "debian:12", s[1][0]
    # the runtime stage has no compiler or -dev package
    runtime = apt_packages(s[1])
    assert not [p for p in runtime if p.endswith("-dev") or p in ("build-essential", "cmake", "g++")], runtime
    # the build uses the release preset and builds the daemon
    run = " ".join(rest for word, rest in s[0] if word == "RUN")
    assert "cmake --preset release" in run and "--target harnessd" in run, run


def test_build_stage_installs_what_install_deps_builds_with():
    build = set(apt_packages(stages()[0]))
    needed = {"build-essential", "cmake", "ninja-build", "pkg-config", "libboost1.81-dev", "libboost-json1.81-dev",
              "libssl-dev", "doctest-dev", "libcli11-dev", "libspdlog-dev", "libfmt-dev", "libtomlplusplus-dev",
              "libpq-dev"}
    assert needed <= install_deps_packages(), "scripts/install-deps.sh changed: update this list and the Containerfile"
    assert needed <= build, f"build stage lacks {sorted(needed - build)}"
    assert build <= install_deps_packages(), f"not in install-deps.sh: {sorted(build - install_deps_packages())}"


def test_every_package_exists_in_debian_12():
    if shutil.which("apt-cache") is None:
        pytest.fail("apt-cache is missing: this check needs a Debian machine", pytrace=False)
    wanted = sorted(set(apt_packages(stages()[0]) + apt_packages(stages()[1])))
    # one call: apt-cache prints a stanza per package it knows (a virtual one has none)
    out = subprocess.run(["apt-cache", "show", "--no-all-versions", *wanted], capture_output=True, text=True,
                         timeout=120)
    known = set(re.findall(r"^Package: (\S+)$", out.stdout, re.M))
    missing = [p for p in wanted if p not in known]
    assert not missing, f"no such Debian package (or no apt lists: run apt-get update): {missing}"


def installed_with(packages: list[str]) -> set[str]:
    """The packages and everything apt installs with them (their Depends and
    Pre-Depends, recursively): libpq5 brings Kerberos, LDAP and GnuTLS, which
    ldd lists too."""
    if shutil.which("apt-cache") is None:
        pytest.fail("apt-cache is missing: this check needs a Debian machine", pytrace=False)
    out = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                          "--no-breaks", "--no-replaces", "--no-enhances", *packages],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    closure = {line.split(":")[0] for line in out.stdout.splitlines() if line and not line.startswith((" ", "<"))}
    return closure | set(packages)


def test_runtime_stage_provides_every_linked_library():
    if shutil.which("ldd") is None or shutil.which("dpkg") is None:
        pytest.fail("ldd and dpkg are needed (Debian)", pytrace=False)
    out = subprocess.run(["ldd", harnessd_bin()], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    libs = [m.group(1) for m in re.finditer(r"=>\s+(/\S+)", out.stdout)]
    assert libs, out.stdout
    runtime = installed_with(apt_packages(stages()[1]))
    unprovided = []
    for lib in libs:
        owner = None
        for path in (lib, str(Path(lib).resolve())):
            for candidate in {path, path.replace("/usr/lib/", "/lib/", 1), path.replace("/lib/", "/usr/lib/", 1)}:
                res = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True, timeout=30)
                if res.returncode == 0:
                    owner = res.stdout.split(":", 1)[0].strip()
                    break
            if owner:
                break
        assert owner, f"no package owns {lib}"
        if owner not in runtime and owner not in BASE_IMAGE and not SANITIZER_RUNTIMES.match(owner):
            unprovided.append(f"{lib} ({owner})")
    assert not unprovided, f"the runtime stage does not install: {unprovided}"


def test_build_context_has_what_cmake_configures():
    copied = []
    for word, rest in stages()[0]:
        if word == "COPY" and not rest.startswith("--from"):
            *sources, _dest = rest.split()
            copied += sources
    for src in copied:
        assert (REPO_ROOT / src).exists(), f"COPY {src}: not in the repository"
    top = (REPO_ROOT / "CMakeLists.txt").read_text()
    # subdirectories configured with BUILD_TESTING=OFF and no fuzzing
    always = re.sub(r"if\((BUILD_TESTING|HARNESSD_FUZZ)\).*?endif\(\)", "", top, flags=re.S)
    for sub in re.findall(r"add_subdirectory\((\S+?)\)", always):
        assert sub in copied, f"CMakeLists.txt adds {sub}/, which the build stage does not copy"
    for include in re.findall(r"include\((cmake/\S+?)\)", top):
        assert include.split("/")[0] in copied, include
    assert "web" in copied, "the web UI is embedded at build time"
    assert "-DBUILD_TESTING=OFF" in " ".join(r for w, r in stages()[0] if w == "RUN")
    # the ignore file lets every copied path into the context
    rules = [line.strip() for line in IGNOREFILE.read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert rules[0] == "*", "the ignore file should allow-list the context"
    for src in copied:
        assert f"!{src}" in rules, f"{IGNOREFILE.name} keeps {src} out of the context"


def test_runtime_settings_agree_with_the_daemon():
    runtime = stages()[1]
    by_word: dict[str, list[str]] = {}
    for word, rest in runtime:
        by_word.setdefault(word, []).append(rest)
    user = by_word["USER"][-1]
    assert user.split(":")[0] not in ("root", "0"), user
    entry = exec_form(by_word["ENTRYPOINT"][-1])
    assert entry == ["/usr/local/bin/harnessd"], entry
    cmd = exec_form(by_word["CMD"][-1])
    assert not command_line_problems(cmd), command_line_problems(cmd)
    listens = option_values(cmd, "listen")
    ports = listen_ports(listens)
    # all interfaces of the container: what a published port (-p) reaches
    assert ports["ws"][0] == "0.0.0.0" and ports["tcp"][0] == "0.0.0.0", ports
    exposed = {int(p.split("/")[0]) for e in by_word["EXPOSE"] for p in e.split()}
    assert exposed == {port for _, port in ports.values()}, (exposed, ports)
    volume = " ".join(by_word["VOLUME"])
    session_root = next(e.split("=", 1)[1] for e in by_word["ENV"] if e.startswith("DSH_SESSION_ROOT="))
    assert session_root in volume, (session_root, volume)
    health = by_word["HEALTHCHECK"][-1]
    assert f"http://127.0.0.1:{ports['ws'][1]}/healthz" in health, health
    assert "curl" in health and "curl" in apt_packages(runtime), "the health check needs curl in the image"
    assert by_word.get("STOPSIGNAL") == ["SIGTERM"]


# --- authentication ----------------------------------------------------------

SECRETS_DIR = "/run/secrets/"   # podman run --secret NAME, compose secrets: /run/secrets/NAME


def auth_files(args: list[str]) -> list[tuple[str, str]]:
    return [(key, value) for key in AUTH_KEYS for value in option_values(args, key)]


def image_cmd() -> list[str]:
    return exec_form([rest for word, rest in stages()[1] if word == "CMD"][-1])


def test_default_command_requires_a_token():
    """The image listens on 0.0.0.0, so its default command authenticates
    with a token that is mounted at run time, never built in."""
    cmd = image_cmd()
    assert not flag_given(cmd, INSECURE_KEY), f"CMD {cmd} serves the network without authentication"
    exposed = non_loopback(option_values(cmd, "listen"))
    given = auth_files(cmd)
    assert not exposed or given, f"CMD listens on {exposed} without {' or '.join(AUTH_KEYS)}: harnessd refuses that"
    assert len(given) == 1, f"CMD names {given}: one of {AUTH_KEYS}"
    key, path = given[0]
    assert path.startswith(SECRETS_DIR) and "/" not in path[len(SECRETS_DIR):], \
        f"--{key} {path}: expected {SECRETS_DIR}NAME, where podman --secret and compose secrets mount a secret"
    # nothing in either stage writes that file (or its directory) into the image
    for stage in stages():
        for word, rest in stage:
            if word in ("COPY", "ADD", "RUN"):
                assert SECRETS_DIR.rstrip("/") not in rest and path not in rest, \
                    f"{word} {rest}: the token must not be part of the image"
    # the file the top of the Containerfile tells operators to create is this one
    text = CONTAINERFILE.read_text()
    name = path[len(SECRETS_DIR):]
    assert f"--secret {name}" in text and f"podman secret create {name}" in text, \
        f"the Containerfile's comment does not show how to provide {path}"


def compose_files() -> list[Path]:
    files = sorted({*DEPLOY.rglob("compose*.y*ml"), *DEPLOY.rglob("docker-compose*.y*ml")})
    assert files, "no compose file under deploy/"
    return files


def image_services(path: Path) -> dict[str, dict]:
    """The services of a compose file that run the image of the Containerfile."""
    doc = yaml.safe_load(path.read_text())
    services = doc.get("services") or {}
    built = {name: svc for name, svc in services.items() if isinstance(svc.get("build"), dict)
             and (path.parent / svc["build"].get("context", ".") / svc["build"].get("dockerfile", "Dockerfile"))
             .resolve() == CONTAINERFILE}
    images = {svc.get("image") for svc in built.values()} - {None}
    return built | {name: svc for name, svc in services.items() if svc.get("image") in images}


def ignored_by_git(path: Path) -> bool:
    out = subprocess.run(["git", "-C", str(REPO_ROOT), "check-ignore", "-q", "--no-index", str(path)],
                         capture_output=True, timeout=30)
    return out.returncode == 0


@pytest.mark.parametrize("compose", compose_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_compose_services_authenticate(compose):
    doc = yaml.safe_load(compose.read_text())
    top_secrets = doc.get("secrets") or {}
    services = image_services(compose)
    assert services, f"{compose}: no service runs the harnessd image"
    for name, svc in services.items():
        command = svc.get("command")
        args = [str(a) for a in command] if command is not None else image_cmd()
        assert isinstance(command, (list, type(None))), f"{name}: command in the list form, please"
        assert not flag_given(args, INSECURE_KEY), f"{name}: --{INSECURE_KEY}"
        listens = option_values(args, "listen")
        assert listens or option_values(args, "config"), f"{name}: {args} gives no --listen"
        exposed = non_loopback(listens)
        given = auth_files(args)
        if not exposed:
            continue
        assert given, f"{compose.name} {name}: listens on {exposed} without {' or '.join(AUTH_KEYS)}"
        for key, path in given:
            # a compose secret mounted at that path ...
            source = None
            for entry in svc.get("secrets") or []:
                src, target = (entry, entry) if isinstance(entry, str) else (entry["source"], entry.get("target", entry["source"]))
                if (target if target.startswith("/") else SECRETS_DIR + target) == path:
                    source = top_secrets.get(src, {}).get("file")
                    assert source, f"{name}: secret {src} is no top-level secret with a file"
            # ... or a read-only bind mount of a file
            for volume in svc.get("volumes") or []:
                parts = str(volume).split(":")
                if len(parts) >= 2 and parts[1] == path:
                    assert len(parts) == 3 and "ro" in parts[2].split(","), f"{name}: {volume} is not read-only"
                    source = parts[0]
            assert source, f"{compose.name} {name}: --{key} {path} is neither a compose secret nor a mounted file"
            host_file = (compose.parent / source).resolve()
            assert host_file.is_relative_to(compose.parent), f"{name}: {source} lies outside {compose.parent}"
            assert ignored_by_git(host_file), \
                f"{name}: {host_file.relative_to(REPO_ROOT)} is not in .gitignore: a token must not be committed"
            # the compose file's instructions say how to create it
            assert re.search(rf"openssl rand .*> *{re.escape(source.removeprefix('./'))}", compose.read_text()), \
                f"{compose.name}: no `openssl rand ... > {source}` among its instructions"
