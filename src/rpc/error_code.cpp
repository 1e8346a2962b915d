#include "harnessd/rpc/error_code.hpp"

#include "harnessd/util/enum_error_category.hpp"

namespace harnessd::rpc {

namespace {

std::string_view describe(ErrorCode value) noexcept {
  switch (value) {
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
  return {};
}

}  // namespace

const std::error_category& rpc_category() noexcept {
  static const util::EnumErrorCategory<ErrorCode> category("harnessd.rpc", describe);
  return category;
}

}  // namespace harnessd::rpc
