#include "harnessd/rpc/error_code.hpp"

namespace harnessd::rpc {

namespace {

class RpcCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "harnessd.rpc"; }
  std::string message(int value) const override {
    switch (static_cast<ErrorCode>(value)) {
      case ErrorCode::parse_error:
        return "parse error";
      case ErrorCode::invalid_request:
        return "invalid request";
      case ErrorCode::method_not_found:
        return "method not found";
      case ErrorCode::invalid_params:
        return "invalid params";
      case ErrorCode::internal_error:
        return "internal error";
      case ErrorCode::session_busy:
        return "session already has an active prompt";
      case ErrorCode::not_initialized:
        return "not initialized";
      case ErrorCode::shutting_down:
        return "shutting down";
      case ErrorCode::unauthorized:
        return "unauthorized";
      case ErrorCode::overloaded:
        return "server overloaded";
    }
    return "unknown JSON-RPC error " + std::to_string(value);
  }
};

}  // namespace

const std::error_category& rpc_category() noexcept {
  static const RpcCategory category;
  return category;
}

}  // namespace harnessd::rpc
