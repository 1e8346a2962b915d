"""The `harness` CLI against a TLS daemon: wss:// (WebSocket) and tls://
(NDJSON) with --ca-file, verification on by default (an unknown CA, a wrong
CA and a certificate for another address are refused with exit 3), the
session readers over TLS, --token and --insecure.

The throwaway CAs and certificates come from test_tls (the openssl CLI).
"""

from __future__ import annotations

import json

from test_harness_cli import cli_bin, describe, run_cli  # noqa: F401  (cli_bin fails clearly without a CLI)
from harnessd_helpers import openssl  # noqa: F401
from test_tls import pki, tls_daemon  # noqa: F401  (pytest fixtures)

HOST = "127.0.0.1"


def wss(d) -> str:
    return f"wss://{HOST}:{d.wss_port}"


def tls(d) -> str:
    return f"tls://{HOST}:{d.tls_port}"


def ca_args(d, ca: str = "ca") -> list[str]:
    return ["--ca-file", str(d.pki / f"{ca}.pem")]


def assert_untrusted(proc, url: str) -> None:
    assert proc.returncode == 3, describe(proc)
    assert proc.stdout == "", describe(proc)
    assert f"cannot connect to {url}" in proc.stderr, describe(proc)
    assert "certificate" in proc.stderr and "not trusted" in proc.stderr, describe(proc)


def test_prompt_over_wss_with_ca_file_streams_the_turn(tls_daemon, tmp_path):
    proc = run_cli(["prompt", "--connect", wss(tls_daemon), *ca_args(tls_daemon), "@chunks 4 3"], tmp_path)
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout == "aaabbbcccddd\n", describe(proc)
    assert proc.stderr.strip().endswith("[ok]"), describe(proc)


def test_prompt_over_tls_with_ca_file_streams_the_turn(tls_daemon, tmp_path):
    proc = run_cli(["prompt", "--connect", tls(tls_daemon), *ca_args(tls_daemon), "--json", "@chunks 50 8"],
                   tmp_path)
    assert proc.returncode == 0, describe(proc)
    frames = [json.loads(line) for line in proc.stdout.splitlines()]
    assert frames[-1]["result"]["status"] == "ok", describe(proc)
    deltas = [f["params"]["event"]["data"]["chunk"]["text"] for f in frames
              if f.get("method") == "session.event" and f["params"]["event"]["type"] == "assistant/chunk"
              and f["params"]["event"]["data"]["chunk"]["type"] == "text-delta"]
    assert "".join(deltas) == "".join(chr(ord("a") + i % 26) * 8 for i in range(50)), describe(proc)


def test_wss_by_host_name(tls_daemon, tmp_path):
    # The certificate names DNS:localhost too: SNI and the name check.
    proc = run_cli(["prompt", "--connect", f"wss://localhost:{tls_daemon.wss_port}", *ca_args(tls_daemon), "hi"],
                   tmp_path)
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout == "echo: hi\n", describe(proc)


def test_verification_is_on_by_default(tls_daemon, tmp_path):
    # The throwaway CA is in no system trust store.
    for url in (wss(tls_daemon), tls(tls_daemon)):
        proc = run_cli(["prompt", "--connect", url, "hi"], tmp_path)
        assert_untrusted(proc, url)
        assert "--ca-file" in proc.stderr, describe(proc)  # the hint


def test_a_wrong_ca_is_refused(tls_daemon, tmp_path):
    for url in (wss(tls_daemon), tls(tls_daemon)):
        proc = run_cli(["prompt", "--connect", url, *ca_args(tls_daemon, "other-ca"), "hi"], tmp_path)
        assert_untrusted(proc, url)
        assert "unable to get local issuer certificate" in proc.stderr, describe(proc)
    # The daemon is unharmed.
    ok = run_cli(["prompt", "--connect", tls(tls_daemon), *ca_args(tls_daemon), "hi"], tmp_path)
    assert ok.returncode == 0, describe(ok)


def test_a_certificate_for_another_address_is_refused(spawn, pki, tmp_path):
    # Signed by the trusted CA, but for 127.0.0.2 and other.example only.
    (pki / "san.ext").write_text("subjectAltName=IP:127.0.0.2,DNS:other.example\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=127.0.0.1",
            "-keyout", "elsewhere.key", "-out", "elsewhere.csr", cwd=pki)
    openssl("x509", "-req", "-in", "elsewhere.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", "san.ext", "-out", "elsewhere.pem", cwd=pki)
    d = spawn(args=["--listen", "wss://127.0.0.1:0", "--listen", "tls://127.0.0.1:0",
                    "--tls-cert", str(pki / "elsewhere.pem"), "--tls-key", str(pki / "elsewhere.key")])
    for url in (u for u in d.listen if u.startswith(("wss://", "tls://"))):
        proc = run_cli(["prompt", "--connect", url, "--ca-file", str(pki / "ca.pem"), "hi"], tmp_path)
        assert_untrusted(proc, url)
        assert "IP address mismatch" in proc.stderr, describe(proc)


def test_sessions_and_log_over_tls(tls_daemon, tmp_path):
    for text in ("hello", "@chunks 3 4"):
        proc = run_cli(["prompt", "--connect", tls(tls_daemon), *ca_args(tls_daemon), "--session", "t1", text],
                       tmp_path)
        assert proc.returncode == 0, describe(proc)

    listed = run_cli(["sessions", "--connect", tls(tls_daemon), *ca_args(tls_daemon), "--json"], tmp_path)
    assert listed.returncode == 0, describe(listed)
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["sessionId"], r["turns"], r["running"]) for r in rows] == [("t1", 2, False)], describe(listed)

    for url in (tls(tls_daemon), wss(tls_daemon)):
        log = run_cli(["log", "--connect", url, *ca_args(tls_daemon), "t1"], tmp_path)
        assert log.returncode == 0, describe(log)
        assert "> hello" in log.stdout and "echo: hello" in log.stdout, describe(log)
        assert "> @chunks 3 4" in log.stdout and "aaaabbbbcccc" in log.stdout, describe(log)

    as_json = run_cli(["log", "--connect", wss(tls_daemon), *ca_args(tls_daemon), "t1", "--json"], tmp_path)
    assert as_json.returncode == 0, describe(as_json)
    seqs = [json.loads(line)["seq"] for line in as_json.stdout.splitlines()]
    assert seqs == list(range(len(seqs))) and seqs, describe(as_json)


def test_attach_over_wss_reports_the_last_turn(tls_daemon, tmp_path):
    proc = run_cli(["prompt", "--connect", wss(tls_daemon), *ca_args(tls_daemon), "--session", "a1", "@error boom"],
                   tmp_path)
    assert proc.returncode == 1, describe(proc)
    attach = run_cli(["attach", "--connect", wss(tls_daemon), *ca_args(tls_daemon), "a1"], tmp_path)
    assert attach.returncode == 1, describe(attach)


def test_token_over_tls_and_wss(spawn, pki, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    d = spawn(args=["--listen", "wss://127.0.0.1:0", "--listen", "tls://127.0.0.1:0",
                    "--tls-cert", str(pki / "server.pem"), "--tls-key", str(pki / "server.key"),
                    "--auth-token-file", str(token)])
    ca = ["--ca-file", str(pki / "ca.pem")]
    for url in (u for u in d.listen if u.startswith(("wss://", "tls://"))):
        ok = run_cli(["prompt", "--connect", url, *ca, "--token", "s3cret-token", "hi"], tmp_path)
        assert ok.returncode == 0, describe(ok)
        assert ok.stdout == "echo: hi\n", describe(ok)
        refused = run_cli(["prompt", "--connect", url, *ca, "--token", "wrong", "hi"], tmp_path)
        assert refused.returncode == 3, describe(refused)


def test_usage_errors(tls_daemon, tmp_path):
    missing = run_cli(["prompt", "--connect", tls(tls_daemon), "--ca-file", str(tmp_path / "nope.pem"), "hi"],
                      tmp_path)
    assert missing.returncode == 3, describe(missing)
    assert "nope.pem" in missing.stderr, describe(missing)

    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    garbage = run_cli(["prompt", "--connect", tls(tls_daemon), "--ca-file", str(not_pem), "hi"], tmp_path)
    assert garbage.returncode == 3, describe(garbage)
    assert "not.pem" in garbage.stderr and "certificate" in garbage.stderr, describe(garbage)

    path = run_cli(["prompt", "--connect", tls(tls_daemon) + "/x", *ca_args(tls_daemon), "hi"], tmp_path)
    assert path.returncode == 3, describe(path)
    assert "a tls:// URL has no path" in path.stderr, describe(path)

    both = run_cli(["prompt", "--connect", tls(tls_daemon), *ca_args(tls_daemon), "--insecure", "hi"], tmp_path)
    assert both.returncode == 3, describe(both)


def test_tls_url_against_a_plain_port_fails_cleanly(spawn, pki, tmp_path):
    # The NDJSON port speaks no TLS: the handshake fails, exit 3, no hang.
    d = spawn(args=["--handshake-timeout-ms", "500"])
    proc = run_cli(["prompt", "--connect", f"tls://{HOST}:{d.port}", "--ca-file", str(pki / "ca.pem"), "hi"],
                   tmp_path, timeout=25)
    assert proc.returncode == 3, describe(proc)
    assert "TLS handshake" in proc.stderr, describe(proc)


def test_insecure_skips_verification(tls_daemon, tmp_path):
    for url in (wss(tls_daemon), tls(tls_daemon)):
        proc = run_cli(["prompt", "--connect", url, "--insecure", "hi"], tmp_path)
        assert proc.returncode == 0, describe(proc)
        assert proc.stdout == "echo: hi\n", describe(proc)


def test_help_names_the_tls_options(tmp_path):
    for command in ("prompt", "chat", "sessions", "log", "attach"):
        proc = run_cli([command, "--help"], tmp_path)
        assert proc.returncode == 0, describe(proc)
        assert "--ca-file" in proc.stdout and "--insecure" in proc.stdout, describe(proc)
        assert "wss://" in proc.stdout and "tls://" in proc.stdout, describe(proc)

