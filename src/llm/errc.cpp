#include "llm/errc.hpp"

#include "harnessd/util/enum_error_category.hpp"

#include "llm/chat.hpp"
#include "util/utf8.hpp"

#include <string>

namespace harnessd::llm {

namespace {

std::string_view describe(errc value) noexcept {
  switch (value) {
    case errc::connect:
      return "cannot connect to the model endpoint";
    case errc::connection:
      return "sending the request failed";
    case errc::timeout:
      return "the model stream went silent";
    case errc::stream_closed:
      return "the model stream closed early";
    case errc::bad_stream:
      return "the model stream sent a malformed chunk";
    case errc::stream_too_large:
      return "the model stream exceeded a size bound";
    case errc::auth:
      return "the model endpoint refused the credentials";
    case errc::rate_limit:
      return "the model endpoint is rate limiting";
    case errc::server:
      return "the model endpoint failed";
    case errc::http_status:
      return "the model endpoint answered an HTTP error";
    case errc::finish_reason:
      return "the model stopped for an unknown reason";
    case errc::provider:
      return "the provider failed";
    case errc::invalid_directive:
      return "unknown scripted directive";
    case errc::scripted:
      return "scripted error";
    case errc::context_window_exceeded:
      return "the request exceeds the model's context window";
  }
  return {};
}

}  // namespace

const std::error_category& llm_category() noexcept {
  static const util::EnumErrorCategory<errc> category("harnessd.llm", describe);
  return category;
}

std::string_view wire_code(errc code) noexcept {
  switch (code) {
    case errc::connect:
      return "CONNECT";
    case errc::connection:
      return "CONNECTION";
    case errc::timeout:
      return "TIMEOUT";
    case errc::stream_closed:
      return "STREAM_CLOSED";
    case errc::bad_stream:
      return "BAD_STREAM";
    case errc::stream_too_large:
      return "STREAM_TOO_LARGE";
    case errc::auth:
      return "AUTH";
    case errc::rate_limit:
      return "RATE_LIMIT";
    case errc::server:
      return "SERVER";
    case errc::http_status:
      return "HTTP";
    case errc::finish_reason:
      return "FINISH";
    case errc::provider:
      return "PROVIDER";
    case errc::invalid_directive:
      return "INVALID_DIRECTIVE";
    case errc::scripted:
      return "SCRIPTED";
    case errc::context_window_exceeded:
      return "CONTEXT_WINDOW_EXCEEDED";
  }
  return "PROVIDER";
}

ModelResult error_result(std::string message, errc code, std::string wire) {
  if (wire.empty()) wire = std::string(wire_code(code));
  // Messages quote exceptions and endpoint bytes: they end up in turn/end.
  util::make_valid_utf8(message);
  util::make_valid_utf8(wire);
  return ModelResult{FinishReason::error, std::move(message), std::move(wire), make_error_code(code)};
}

}  // namespace harnessd::llm
