#include "harnessd/util/listen_url.hpp"

#include <charconv>
#include <stdexcept>

namespace harnessd::util {

ListenUrl parse_listen_url(std::string_view url) {
  const std::string text(url);
  const std::size_t sep = url.find("://");
  if (sep == std::string_view::npos) {
    throw std::invalid_argument("listen address \"" + text + "\" must look like tcp://HOST:PORT or ws://HOST:PORT");
  }
  ListenUrl out;
  out.scheme = std::string(url.substr(0, sep));
  if (out.scheme != "tcp" && out.scheme != "ws") {
    throw std::invalid_argument("listen address \"" + text + "\": scheme must be tcp or ws");
  }
  std::string_view rest = url.substr(sep + 3);
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  std::string_view host, port;
  if (!rest.empty() && rest.front() == '[') {
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos || close + 1 >= rest.size() || rest[close + 1] != ':') {
      throw std::invalid_argument("listen address \"" + text + "\": bad IPv6 form, use [ADDR]:PORT");
    }
    host = rest.substr(1, close - 1);
    port = rest.substr(close + 2);
  } else {
    const std::size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) {
      throw std::invalid_argument("listen address \"" + text + "\": missing :PORT");
    }
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty()) throw std::invalid_argument("listen address \"" + text + "\": missing host");
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc{} || end != port.data() + port.size() || value > 65535 || port.empty()) {
    throw std::invalid_argument("listen address \"" + text + "\": port must be 0..65535");
  }
  out.host = std::string(host == "localhost" ? "127.0.0.1" : host);
  out.port = static_cast<std::uint16_t>(value);
  return out;
}

std::string format_listen_url(std::string_view scheme, std::string_view host, std::uint16_t port) {
  const bool v6 = host.find(':') != std::string_view::npos;
  return std::string(scheme) + "://" + (v6 ? "[" : "") + std::string(host) + (v6 ? "]" : "") + ":" +
         std::to_string(port);
}

}  // namespace harnessd::util
