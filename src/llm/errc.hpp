// Why a model call failed, as a std::error_code enum of the "harnessd.llm"
// category. Providers branch on these; the turn ends with the matching
// wire code (wire_code(): "RATE_LIMIT", ...) in its TurnEndReason.
#pragma once

#include <string_view>
#include <system_error>

namespace harnessd::llm {

enum class errc {
  connect = 1,       ///< no connection to the endpoint (DNS, TCP, TLS)
  connection,        ///< sending the request failed
  timeout,           ///< the stream went silent past the idle timeout
  stream_closed,     ///< the stream ended before [DONE]
  bad_stream,        ///< a chunk that is not a chunk
  stream_too_large,  ///< a line, event or HTTP framing over its bound
  auth,              ///< HTTP 401/403
  rate_limit,        ///< HTTP 429
  server,            ///< HTTP 5xx
  http_status,       ///< any other non-200 (wire code HTTP_<status>)
  finish_reason,     ///< an unknown finish_reason (wire code FINISH_<REASON>)
  provider,          ///< a provider threw
  invalid_directive, ///< scripted: a directive it does not know
  scripted,          ///< scripted: the @error directive
  context_window_exceeded,  ///< the request does not fit the model's context window
};

const std::error_category& llm_category() noexcept;

inline std::error_code make_error_code(errc code) noexcept { return {static_cast<int>(code), llm_category()}; }

/// The code a TurnEndReason carries on the wire. http_status and
/// finish_reason get their detail appended by the provider.
std::string_view wire_code(errc code) noexcept;

}  // namespace harnessd::llm

template <>
struct std::is_error_code_enum<harnessd::llm::errc> : std::true_type {};
