// JSON-RPC error codes of the harnessd protocol (docs/protocol.md §10) as a
// std::error_code enum of the "harnessd.rpc" category, and the exception a
// method handler throws to answer a request with one of them.
#pragma once

#include <boost/json/value.hpp>

#include <stdexcept>
#include <string>
#include <system_error>

namespace harnessd::rpc {

enum class ErrorCode : int {
  parse_error = -32700,
  invalid_request = -32600,
  method_not_found = -32601,
  invalid_params = -32602,
  internal_error = -32603,
  session_busy = -32001,
  not_initialized = -32002,
  shutting_down = -32003,
  unauthorized = -32004,
  overloaded = -32005,
};

/// "harnessd.rpc": values are the wire's codes.
const std::error_category& rpc_category() noexcept;

inline std::error_code make_error_code(ErrorCode code) noexcept {
  return {static_cast<int>(code), rpc_category()};
}

/// Thrown by method handlers; the dispatcher turns it into an error response.
/// This is the only way a handler reports a protocol-level failure. what()
/// is the response's message, as sent.
class RpcError : public std::runtime_error {
 public:
  RpcError(ErrorCode code, std::string message, boost::json::value data = nullptr)
      : std::runtime_error(std::move(message)), code_(code), data_(std::move(data)) {}

  ErrorCode code() const noexcept { return code_; }
  std::error_code error_code() const noexcept { return make_error_code(code_); }
  const boost::json::value& data() const noexcept { return data_; }

 private:
  ErrorCode code_;
  boost::json::value data_;
};

}  // namespace harnessd::rpc

template <>
struct std::is_error_code_enum<harnessd::rpc::ErrorCode> : std::true_type {};
