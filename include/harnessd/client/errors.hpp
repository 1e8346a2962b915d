// The three ways a client call fails: the daemon answered with a JSON-RPC
// error (RpcError), it answered something the protocol does not allow
// (ProtocolError), or the connection is gone (TransportClosed).
#pragma once

#include <boost/json/value.hpp>

#include <stdexcept>
#include <string>

namespace harnessd::client {

/// Base of every failure the client library reports.
class ClientError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The daemon answered the request with `{"error": {code, message, data?}}`.
/// `code` is kept as an int: a client must cope with codes it does not know.
class RpcError : public ClientError {
 public:
  RpcError(int code, std::string message, boost::json::value data = nullptr, std::string raw_response = {})
      : ClientError(std::move(message)), code_(code), data_(std::move(data)), raw_(std::move(raw_response)) {}

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
  using ClientError::ClientError;
};

/// The connection ended (or was closed by us) before the answer arrived.
/// The message says why; for a spawned daemon it includes its exit status.
class TransportClosed : public ClientError {
 public:
  using ClientError::ClientError;
};

}  // namespace harnessd::client
