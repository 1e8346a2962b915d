// The one URL type of the daemon, the client and harness-bench: --listen
// values, --connect targets, the model endpoint's base URL. Parsed with
// Boost.URL (RFC 3986); each caller states which schemes, ports and parts it
// accepts and words the refusal for its own user.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace harnessd::util {

struct Url {
  std::string scheme;      ///< lower case: "tcp", "ws", "http", "https"
  std::string host;        ///< as written; IPv6 without brackets
  std::uint16_t port = 0;  ///< the scheme's default port when the URL names none
  std::string path;        ///< "" or from the first '/', percent-encoded as written
  std::string query;       ///< after '?', percent-encoded; empty when none

  /// "HOST:PORT", IPv6 in brackets: a socket address for messages.
  std::string host_port() const;
  /// The path ("/" when empty) and "?query": an HTTP request target.
  std::string target() const;
  /// "scheme://HOST:PORT" followed by the path and "?query".
  std::string to_string() const;
};

/// What a caller accepts.
struct UrlRules {
  std::span<const std::string_view> schemes;  ///< lower case
  /// A URL without :PORT takes its scheme's (http 80, https 443); without
  /// this, "missing :PORT".
  bool default_port = false;
  std::uint16_t min_port = 1;
  bool path = false;   ///< a path other than "/" is allowed
  bool query = false;  ///< a ?query is allowed
};

/// Why a text is not a URL the rules accept.
struct UrlError {
  enum class Kind {
    not_url,     ///< no "SCHEME://"
    scheme,      ///< a scheme the rules do not list
    no_host,     ///< nothing between "://" and the port or path
    malformed,   ///< anything else
  };
  Kind kind = Kind::malformed;
  /// Without the text itself, for the caller's own message: "missing :PORT",
  /// "port must be 1..65535", "scheme must be tcp or ws", ...
  std::string reason;
};

struct ParsedUrl {
  std::optional<Url> url;
  UrlError error;  ///< when !url
};

ParsedUrl parse_url(std::string_view text, const UrlRules& rules);

/// "tcp://HOST:PORT or ws://HOST:PORT": the forms the rules accept, for messages.
std::string url_forms(const UrlRules& rules);

}  // namespace harnessd::util
