"""Shared facts for the deploy/ checks: where things are, and what the
harnessd binary under test says about its own flags (`--help`), so the
manifests are checked against the daemon, not against copied numbers."""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DEPLOY = REPO_ROOT / "deploy"
INTEGRATION = REPO_ROOT / "tests" / "integration"

# Every key of a config file and every argument of a manifest must be a
# flag of `harnessd --help` (and a choice flag's value one it lists): the
# examples are checked against the daemon, not against a copied list.
SCHEMES = ("ws", "wss", "tcp", "tls")


def harnessd_bin() -> str:
    path = os.path.abspath(os.environ.get("HARNESSD_BIN") or str(REPO_ROOT / "build" / "harnessd"))
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise SystemExit(f"harnessd binary not found or not executable: {path!r} "
                         f"(build it first, or point HARNESSD_BIN at it)")
    return path


@lru_cache(maxsize=None)
def help_text() -> str:
    out = subprocess.run([harnessd_bin(), "--help"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise SystemExit(f"harnessd --help exited {out.returncode}: {out.stderr}")
    return out.stdout


@lru_cache(maxsize=None)
def flags() -> dict[str, str]:
    """Long flag name -> the rest of its help entry (type, default, description)."""
    entries: dict[str, str] = {}
    current = None
    for line in help_text().splitlines():
        m = re.match(r"^\s+(?:-\w,)?--([a-z0-9-]+)(.*)$", line)
        if m:
            current = m.group(1)
            entries[current] = m.group(2)
        elif current is not None and line.startswith(" " * 8):
            entries[current] += " " + line.strip()
    return entries


def known_keys() -> set[str]:
    return set(flags())


def default(flag: str) -> int:
    """The numeric default `--help` shows for a flag (`=60000`)."""
    entry = flags().get(flag)
    if entry is not None:
        m = re.search(r"=(\d+)\b", entry)
        if m:
            return int(m.group(1))
    raise AssertionError(f"no default for --{flag} in `harnessd --help`")


def choices(flag: str) -> set[str] | None:
    """The values a choice flag accepts (`TEXT:{jsonl,memory}`), or None when any value goes."""
    m = re.match(r"^\s*[A-Z]+:\{([^}]*)\}", flags().get(flag, ""))
    if m is None:
        return None
    return {v.strip() for v in m.group(1).split(",")}


def command_line_problems(args: list[str]) -> list[str]:
    """What is wrong with a harnessd command line (arguments after the
    program): options that are no flag of the binary (nor pending), values
    outside a choice flag's set, words that belong to no option."""
    problems = []
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--"):
            problems.append(f"{arg!r} follows no option")
            i += 1
            continue
        name, eq, value = arg[2:].partition("=")
        if not eq and i + 1 < len(args) and not args[i + 1].startswith("--"):
            value = args[i + 1]
            i += 1
        i += 1
        if name not in known_keys():
            problems.append(f"--{name} is no harnessd flag")
            continue
        allowed = choices(name)
        if allowed is not None and value not in allowed:
            problems.append(f"--{name} {value}: not one of {sorted(allowed)}")
    return problems


def option_values(args: list[str], flag: str) -> list[str]:
    """Every value given to --flag (as `--flag VALUE` or `--flag=VALUE`)."""
    out = []
    for i, arg in enumerate(args):
        if arg == f"--{flag}" and i + 1 < len(args):
            out.append(args[i + 1])
        elif arg.startswith(f"--{flag}="):
            out.append(arg.split("=", 1)[1])
    return out



def listen_ports(urls: list[str]) -> dict[str, tuple[str, int]]:
    """{'ws': ('127.0.0.1', 7878), ...} from listen URLs (one per scheme)."""
    out: dict[str, tuple[str, int]] = {}
    for url in urls:
        m = re.fullmatch(r"([a-z]+)://(\[[^\]]+\]|[^:/]+):(\d+)/?", url)
        if not m or m.group(1) not in SCHEMES:
            raise AssertionError(f"bad listen URL {url!r}")
        out[m.group(1)] = (m.group(2), int(m.group(3)))
    return out


# Authentication: harnessd refuses to serve a non-loopback address unless
# one of AUTH_KEYS names a file (or INSECURE_KEY is given). Every example
# that listens beyond loopback must set one, never INSECURE_KEY.
AUTH_KEYS = ("auth-token-file", "auth-file")
INSECURE_KEY = "insecure-no-auth"


def is_loopback(host: str) -> bool:
    """A listen host that only this machine (this container, this pod) reaches."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def non_loopback(urls: list[str]) -> list[str]:
    """The listen URLs that other machines reach."""
    return [u for u in urls if not is_loopback(re.fullmatch(r"[a-z]+://(\[[^\]]+\]|[^:/]+):\d+/?", u).group(1))]


def flag_given(args: list[str], flag: str) -> bool:
    """A boolean flag on a command line (`--flag`, `--flag=true`)."""
    return any(a == f"--{flag}" or (a.startswith(f"--{flag}=") and a.split("=", 1)[1].lower() not in ("false", "0"))
               for a in args)


def commented_keys(toml_text: str) -> list[str]:
    """Keys of `#key = value` lines: documented settings left at their default."""
    return re.findall(r"^#\s?([a-z][a-z0-9-]*)\s*=", toml_text, re.M)


def import_integration_helpers() -> None:
    if str(INTEGRATION) not in sys.path:
        sys.path.insert(0, str(INTEGRATION))


def _openssl(*args: str, cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        import pytest
        pytest.fail("openssl is not installed (scripts/install-deps.sh installs it)", pytrace=False)
    out = subprocess.run([openssl, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"openssl {' '.join(args)} exited {out.returncode}:\n{out.stderr}"


def make_certificates(d: Path, servers: tuple[str, ...] = ("server",)) -> None:
    """A throwaway CA (ca.pem, ca.key) in d, and for each NAME in servers a
    NAME.pem/NAME.key for localhost and 127.0.0.1 signed by it (each with its
    own key and serial, so a test can tell them apart)."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=harnessd deploy test CA",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             cwd=d)
    (d / "server.ext").write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid,issuer\n")
    for name in servers:
        _openssl("req", "-new", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", "/CN=localhost",
                 cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.pem", "-days", "2", "-extfile", "server.ext", cwd=d)
