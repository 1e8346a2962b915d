#include "util/listen_url.hpp"

#include <array>
#include <stdexcept>

namespace harnessd::util {

namespace {
constexpr std::array<std::string_view, 4> listen_schemes{"tcp", "ws", "tls", "wss"};
constexpr UrlRules listen_rules{.schemes = listen_schemes, .min_port = 0};
}  // namespace

ListenUrl parse_listen_url(std::string_view url) {
  ParsedUrl parsed = parse_url(url, listen_rules);
  const std::string quoted = "listen address \"" + std::string(url) + "\"";
  if (!parsed.url) {
    if (parsed.error.kind == UrlError::Kind::not_url) {
      throw std::invalid_argument(quoted + " must look like " + url_forms(listen_rules));
    }
    throw std::invalid_argument(quoted + ": " + parsed.error.reason);
  }
  if (parsed.url->host == "localhost") parsed.url->host = "127.0.0.1";
  return std::move(*parsed.url);
}

std::string format_listen_url(std::string_view scheme, std::string_view host, std::uint16_t port) {
  return Url{.scheme = std::string(scheme), .host = std::string(host), .port = port}.to_string();
}

}  // namespace harnessd::util
