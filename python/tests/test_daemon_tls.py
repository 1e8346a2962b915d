"""TLS to harnessd's own ``tls://`` (NDJSON) and ``wss://`` (WebSocket)
listeners: a throwaway CA and server certificate made with the openssl tool,
``ca_file=`` to trust that CA, and the refusals of an unknown CA, of the
system's CA store (which does not know the throwaway CA) and of a name the
certificate does not cover."""

from __future__ import annotations

import os
import shutil
import ssl
import threading
from pathlib import Path

import pytest

from deepseek_harness import DeepSeekHarness, HarnessClient, HarnessConfig, Notification
from deepseek_harness._transport import client_ssl_context
from deepseek_harness.errors import CertificateVerifyError, TransportClosedError

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl tool")


def chunks_text(n: int, size: int) -> str:
    """The scripted provider's ``@chunks N SIZE`` answer."""

    return "".join(chr(ord("a") + i % 26) * size for i in range(n))


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    from servers import make_ca, make_server_cert

    directory = tmp_path / "pki"
    directory.mkdir()
    make_ca(directory, "ca")
    make_ca(directory, "other-ca")
    # Only the IP address: "localhost" is a name this certificate does not cover.
    make_server_cert(directory, "ca", "server", san="IP:127.0.0.1")
    return directory


@pytest.fixture
def tls_daemon(listening_daemon, pki):
    """harnessd with wss:// and tls:// listeners (besides its plain ones)."""

    return listening_daemon("--listen", "wss://127.0.0.1:0", "--listen", "tls://127.0.0.1:0",
                            "--tls-cert", str(pki / "server.pem"), "--tls-key", str(pki / "server.key"))


def tls_addresses(daemon) -> list[str]:
    return [daemon.url("tls"), daemon.url("wss") + "/"]


def negotiated_version(harness: DeepSeekHarness) -> str:
    return harness.client._link.channel.stream._tls.version()


# ----------------------------------------------------------------- turns


@needs_openssl
@pytest.mark.parametrize("scheme", ["tls", "wss"])
def test_daemon_tls_turn_with_ca_file(tls_daemon, pki, tmp_path, scheme):
    address = tls_daemon.url(scheme) + ("/" if scheme == "wss" else "")
    with DeepSeekHarness(provider="scripted", address=address, ca_file=str(pki / "ca.pem"),
                         cwd=str(tmp_path), request_timeout_seconds=60) as harness:
        assert harness.server_info.name == "deepseek-harness-sdk-runtime"
        assert negotiated_version(harness) in ("TLSv1.2", "TLSv1.3")
        seen: list[Notification] = []
        result = harness.run("@chunks 20 8", session_id=f"tls-{scheme}", on_notification=seen.append)
        assert (result.status, result.reason) == ("ok", {"kind": "completed"})
        assert result.final_response == chunks_text(20, 8)
        assert seen == result.notifications
        deltas = [e["data"]["chunk"]["text"] for e in result.events
                  if e["type"] == "assistant/chunk" and e["data"]["chunk"]["type"] == "text-delta"]
        assert "".join(deltas) == chunks_text(20, 8)
        assert [e["seq"] for e in result.events] == list(range(len(result.events)))
        # Frames past 64 KiB cross many TLS records.
        assert len(harness.run("@chunks 3 100000", session_id=f"tls-{scheme}-big").final_response) == 300000
        # A turn cancelled over TLS.
        session = harness.start_session(f"tls-{scheme}-cancel")
        started = threading.Event()
        outcome = {}
        thread = threading.Thread(target=lambda: outcome.setdefault(
            "r", session.run("@delay 100\n@chunks 50 4", on_notification=lambda n: started.set())))
        thread.start()
        assert started.wait(10)
        assert session.cancel() is True
        thread.join(30)
        assert outcome["r"].status == "aborted"


@needs_openssl
def test_daemon_tls_low_level_client_and_path_ca_file(tls_daemon, pki, tmp_path):
    # HarnessConfig takes the same options; ca_file may be a Path.
    config = HarnessConfig(address=tls_daemon.url("tls"), ca_file=pki / "ca.pem", request_timeout_seconds=30)
    with HarnessClient(config) as client:
        init = client.initialize(cwd=str(tmp_path), provider="scripted", model="m")
        assert init.serverInfo.name == "deepseek-harness-sdk-runtime"
        with client.subscribe_session_notifications("low") as sub:
            response = client.session_prompt("low", [{"type": "text", "text": "hi"}], notification_subscription=sub)
        assert response.status == "ok"
    # A context of the caller's own is used as given.
    context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    with DeepSeekHarness(provider="scripted", address=tls_daemon.url("wss"), ssl_context=context,
                         cwd=str(tmp_path)) as harness:
        assert harness.run("own context").final_response == "echo: own context"


# ----------------------------------------------------------------- refusals


@needs_openssl
def test_daemon_tls_wrong_ca_is_refused(tls_daemon, pki, tmp_path):
    other = str(pki / "other-ca.pem")
    for address in tls_addresses(tls_daemon):
        harness = DeepSeekHarness(provider="scripted", address=address, ca_file=other, cwd=str(tmp_path))
        with pytest.raises(CertificateVerifyError) as info:
            harness.start()
        err = info.value
        assert isinstance(err, TransportClosedError)
        assert isinstance(err.__cause__, ssl.SSLCertVerificationError)
        assert err.verify_message == "unable to get local issuer certificate"
        text = str(err)
        assert text.startswith(f"TLS certificate verification failed for harnessd at {address}: "
                               "unable to get local issuer certificate\n")
        assert f"trusted: the CA certificates in {other};" in text
        assert "ca_file=" in text
        assert harness.client._proc is None and harness.client._link is None
        harness.close()
    # The refused handshakes left the daemon serving.
    with DeepSeekHarness(provider="scripted", address=tls_daemon.url("tls"), ca_file=str(pki / "ca.pem"),
                         cwd=str(tmp_path)) as harness:
        assert harness.run("still here").final_response == "echo: still here"


@needs_openssl
def test_daemon_tls_default_verification_refuses_the_throwaway_ca(tls_daemon, tmp_path, monkeypatch):
    # Only the system's CA store: make sure no variable points OpenSSL elsewhere.
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    for address in tls_addresses(tls_daemon):
        with pytest.raises(CertificateVerifyError, match="certificate verification failed") as info:
            DeepSeekHarness(provider="scripted", address=address, cwd=str(tmp_path)).start()
        assert info.value.verify_message == "unable to get local issuer certificate"
        assert "trusted: the system's CA store;" in str(info.value)


@needs_openssl
def test_daemon_tls_host_name_is_checked(tls_daemon, pki, tmp_path):
    # The certificate names 127.0.0.1 only; the same daemon reached as localhost is refused.
    port = tls_daemon.port("tls")
    with pytest.raises(CertificateVerifyError) as info:
        DeepSeekHarness(provider="scripted", address=f"tls://localhost:{port}", ca_file=str(pki / "ca.pem"),
                        cwd=str(tmp_path)).start()
    assert "mismatch" in info.value.verify_message and "localhost" in info.value.verify_message
    assert str(info.value).startswith(f"TLS certificate verification failed for harnessd at tls://localhost:{port}: ")
    assert "subjectAltName" in str(info.value)


@needs_openssl
def test_daemon_plain_client_on_a_tls_port_fails_cleanly(tls_daemon, tmp_path):
    # NDJSON without TLS to the tls:// port: the daemon drops the connection.
    port = tls_daemon.port("tls")
    harness = DeepSeekHarness(provider="scripted", address=f"tcp://127.0.0.1:{port}", cwd=str(tmp_path),
                              request_timeout_seconds=10)
    with pytest.raises((TransportClosedError, TimeoutError)):
        harness.start()
    harness.close()


# ----------------------------------------------------------------- options (no daemon)


def test_fake_default_tls_context_verifies():
    context = client_ssl_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2


@needs_openssl
def test_fake_ca_file_context_trusts_only_that_ca(pki):
    context = client_ssl_context(pki / "ca.pem")
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "throwaway ca"),),)]


def test_fake_bad_ca_file(tmp_path):
    missing = tmp_path / "missing.pem"
    with pytest.raises(FileNotFoundError) as info:
        DeepSeekHarness(provider="scripted", address="tls://127.0.0.1:1", ca_file=str(missing)).start()
    assert str(missing) in str(info.value)
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(ValueError, match="no usable PEM CA certificate"):
        DeepSeekHarness(provider="scripted", address="tls://127.0.0.1:1", ca_file=str(junk)).start()


def test_fake_tls_options_need_a_tls_address(tmp_path):
    ca = os.fspath(tmp_path / "ca.pem")
    for address in ("tcp://127.0.0.1:1", "ws://127.0.0.1:1/"):
        with pytest.raises(ValueError, match="ca_file applies to tls:// and wss://"):
            DeepSeekHarness(provider="scripted", address=address, ca_file=ca).start()
        with pytest.raises(ValueError, match="ssl_context applies to tls:// and wss://"):
            DeepSeekHarness(provider="scripted", address=address, ssl_context=ssl.create_default_context()).start()
    with pytest.raises(ValueError, match="either ca_file or ssl_context"):
        DeepSeekHarness(provider="scripted", address="tls://127.0.0.1:1", ca_file=ca,
                        ssl_context=ssl.create_default_context()).start()
