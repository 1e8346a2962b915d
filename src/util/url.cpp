// URLs through Boost.URL; what it refuses is explained in the words the old
// hand-written parsers used ("missing :PORT", "bad IPv6 form", ...).
#include "harnessd/util/url.hpp"

#include <boost/url/authority_view.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace harnessd::util {
namespace urls = boost::urls;

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<std::uint16_t> default_port(std::string_view scheme) {
  if (scheme == "http" || scheme == "ws") return 80;
  if (scheme == "https" || scheme == "wss") return 443;
  return std::nullopt;
}

std::string port_range(const UrlRules& rules) { return "port must be " + std::to_string(rules.min_port) + "..65535"; }

std::optional<std::uint16_t> parse_port(std::string_view digits, const UrlRules& rules) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size() || value > 65535 ||
      value < rules.min_port) {
    return std::nullopt;
  }
  return static_cast<std::uint16_t>(value);
}

/// Why Boost.URL refused `rest`, what follows "SCHEME://" (`authority` up
/// to the first '/', '?' or '#').
std::string diagnose(std::string_view authority, std::string_view rest, const UrlRules& rules) {
  if (authority.starts_with('[')) return "bad IPv6 form, use [ADDR]:PORT";
  if (urls::parse_authority(authority)) return rest.size() > authority.size() ? "bad character in the path or query" : "bad host";
  const std::size_t colon = authority.rfind(':');
  if (colon == std::string_view::npos) return "bad host";
  const std::string_view port = authority.substr(colon + 1);
  if (!std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) return port_range(rules);
  return "bad host";
}

ParsedUrl refuse(UrlError::Kind kind, std::string reason) {
  return ParsedUrl{std::nullopt, UrlError{kind, std::move(reason)}};
}

}  // namespace

std::string Url::host_port() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string Url::target() const {
  std::string out = path.empty() ? "/" : path;
  if (!query.empty()) out += "?" + query;
  return out;
}

std::string Url::to_string() const {
  std::string out = scheme + "://" + host_port() + path;
  if (!query.empty()) out += "?" + query;
  return out;
}

std::string url_forms(const UrlRules& rules) {
  std::string out;
  for (std::string_view scheme : rules.schemes) {
    if (!out.empty()) out += " or ";
    out += std::string(scheme) + "://HOST:PORT";
  }
  return out;
}

ParsedUrl parse_url(std::string_view text, const UrlRules& rules) {
  const std::size_t sep = text.find("://");
  if (sep == std::string_view::npos) return refuse(UrlError::Kind::not_url, "use " + url_forms(rules));
  Url out;
  out.scheme = lower(text.substr(0, sep));
  if (std::find(rules.schemes.begin(), rules.schemes.end(), out.scheme) == rules.schemes.end()) {
    std::string listed;
    for (std::string_view scheme : rules.schemes) listed += (listed.empty() ? "" : " or ") + std::string(scheme);
    return refuse(UrlError::Kind::scheme, "scheme must be " + listed);
  }
  const std::string_view rest = text.substr(sep + 3);
  const std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  const auto parsed = urls::parse_uri(text);
  // Boost.URL 1.81 lets a path follow the authority without a '/': it reads
  // "h:1:2" as "h:1" and a path ":2", "[::1]80" as "[::1]" and "80".
  if (!parsed || parsed->encoded_authority() != authority) {
    return refuse(UrlError::Kind::malformed, diagnose(authority, rest, rules));
  }
  const urls::url_view& url = *parsed;

  if (url.has_userinfo()) return refuse(UrlError::Kind::malformed, "a user name or password has no place here");
  if (url.host_type() == urls::host_type::ipvfuture) {
    return refuse(UrlError::Kind::malformed, "bad IPv6 form, use [ADDR]:PORT");
  }
  if (!url.has_port() && !rules.default_port) return refuse(UrlError::Kind::malformed, "missing :PORT");
  out.host = std::string(url.encoded_host_address());
  if (out.host.empty()) return refuse(UrlError::Kind::no_host, "missing host");
  if (url.has_port() && !(url.port().empty() && rules.default_port)) {
    const std::optional<std::uint16_t> port = parse_port(url.port(), rules);
    if (!port) return refuse(UrlError::Kind::malformed, port_range(rules));
    out.port = *port;
  } else {
    const std::optional<std::uint16_t> port = default_port(out.scheme);
    if (!port) return refuse(UrlError::Kind::malformed, "missing :PORT");
    out.port = *port;
  }

  out.path = std::string(url.encoded_path());
  if (!rules.path && !out.path.empty() && out.path != "/") {
    return refuse(UrlError::Kind::malformed, "a " + out.scheme + ":// URL has no path");
  }
  if (url.has_query()) {
    if (!rules.query) return refuse(UrlError::Kind::malformed, "a " + out.scheme + ":// URL has no query");
    out.query = std::string(url.encoded_query());
  }
  if (url.has_fragment()) return refuse(UrlError::Kind::malformed, "a #fragment has no place here");
  return ParsedUrl{std::move(out), {}};
}

}  // namespace harnessd::util
