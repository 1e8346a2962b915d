// TLS for the client's tls:// and wss:// connections: a context that verifies
// the daemon's certificate against the system trust store or a CA file
// (TLS 1.2 at least), the per-connection name or address check, and the
// words for a failed handshake. Shared by the NDJSON and WebSocket transports.
#pragma once

#include "harnessd/client/client_transport.hpp"

#include <boost/asio/ssl/context.hpp>
#include <boost/system/error_code.hpp>

#include <openssl/ssl.h>

#include <chrono>
#include <string>

namespace harnessd::client::detail {

/// Deadline of connect + TLS handshake (+ WebSocket upgrade).
inline constexpr std::chrono::seconds connect_timeout{10};

/// Verification on (system trust store, or only options.ca_file), TLS 1.2+;
/// options.insecure turns verification off. Throws std::invalid_argument
/// when the CA file cannot be read or holds no certificate.
boost::asio::ssl::context make_tls_context(const ConnectOptions& options);

/// Before the handshake of one connection to `host` (a DNS name, or an IPv4
/// or IPv6 address without brackets): SNI for names, and the name or the
/// address the certificate must carry. `alpn` ("" for none) is offered.
/// Throws std::invalid_argument for a host OpenSSL cannot check.
void prepare_tls_connection(SSL* ssl, const std::string& host, const ConnectOptions& options,
                            std::string_view alpn);

/// The exception for a failed client handshake with `where` ("HOST:PORT"):
/// CertificateError when the certificate failed verification, else a
/// ClientError naming the handshake and the error.
[[noreturn]] void throw_handshake_error(SSL* ssl, const boost::system::error_code& ec, const std::string& where);

}  // namespace harnessd::client::detail
