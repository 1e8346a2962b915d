// TurnEndReason (protocol §4): how a turn ended, and the prompt status each
// reason maps to. The one place that mapping lives.
#pragma once

#include <boost/json/object.hpp>

#include <string>
#include <string_view>

namespace harnessd::harness {

namespace turn_end {
boost::json::object completed();
boost::json::object aborted(std::string_view why);
boost::json::object max_tokens();
boost::json::object error(std::string_view message, std::string_view code = {});
boost::json::object interrupted();
}  // namespace turn_end

/// "ok", "error" or "aborted" for a TurnEndReason object. Unknown kinds are
/// "error": a client must never read success into something unrecognised.
std::string_view status_for(const boost::json::object& reason, bool max_tokens_as_success);

}  // namespace harnessd::harness
