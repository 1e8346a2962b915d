// The three ways a client call fails: the daemon answered with a JSON-RPC
// error (RpcError), it answered something the protocol does not allow
// (ProtocolError), or the connection is gone (TransportClosed). Connecting
// to a TLS daemon whose certificate is not trusted is a CertificateError. Each also
// carries a std::error_code: the daemon's code in the harnessd.rpc category,
// or a client::errc of the harnessd.client category.
#pragma once

#include "harnessd/rpc/error_code.hpp"

#include <boost/json/value.hpp>

#include <stdexcept>
#include <string>
#include <system_error>

namespace harnessd::client {

enum class errc {
  protocol_error = 1,  ///< the daemon's answer breaks the protocol
  transport_closed,    ///< the connection ended before the answer
  certificate_untrusted,  ///< the daemon's TLS certificate failed verification
};

const std::error_category& client_category() noexcept;

inline std::error_code make_error_code(errc code) noexcept { return {static_cast<int>(code), client_category()}; }

/// Base of every failure the client library reports.
class ClientError : public std::runtime_error {
 public:
  ClientError(std::string message, std::error_code code) : std::runtime_error(std::move(message)), code_(code) {}

  const std::error_code& error_code() const noexcept { return code_; }

 private:
  std::error_code code_;
};

/// The daemon answered the request with `{"error": {code, message, data?}}`.
/// `code` is kept as an int: a client must cope with codes it does not know.
class RpcError : public ClientError {
 public:
  RpcError(int code, std::string message, boost::json::value data = nullptr, std::string raw_response = {})
      : ClientError(std::move(message), std::error_code(code, rpc::rpc_category())),
        code_(code),
        data_(std::move(data)),
        raw_(std::move(raw_response)) {}

  int code() const noexcept { return code_; }
  const boost::json::value& data() const noexcept { return data_; }
  /// The error response frame as received ("" when not from the wire).
  const std::string& raw_response() const noexcept { return raw_; }

 private:
  int code_;
  boost::json::value data_;
  std::string raw_;
};

/// A response that breaks the protocol (wrong shape, unknown status). The
/// client never guesses what such an answer meant.
class ProtocolError : public ClientError {
 public:
  explicit ProtocolError(std::string message) : ClientError(std::move(message), make_error_code(errc::protocol_error)) {}
};

/// The connection ended (or was closed by us) before the answer arrived.
/// The message says why; for a spawned daemon it includes its exit status.
class TransportClosed : public ClientError {
 public:
  explicit TransportClosed(std::string message) : ClientError(std::move(message), make_error_code(errc::transport_closed)) {}
};

/// A tls:// or wss:// daemon presented a certificate that failed
/// verification (unknown CA, expired, issued for another host...): the
/// message says so with OpenSSL's reason.
class CertificateError : public ClientError {
 public:
  CertificateError(std::string message, long verify_result)
      : ClientError(std::move(message), make_error_code(errc::certificate_untrusted)), verify_result_(verify_result) {}

  /// OpenSSL's X509_V_ERR_* code.
  long verify_result() const noexcept { return verify_result_; }

 private:
  long verify_result_;
};

}  // namespace harnessd::client

template <>
struct std::is_error_code_enum<harnessd::client::errc> : std::true_type {};
