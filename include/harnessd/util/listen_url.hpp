// Parsing of --listen values: tcp://HOST:PORT and ws://HOST:PORT.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace harnessd::util {

struct ListenUrl {
  std::string scheme;  ///< "tcp" or "ws"
  std::string host;    ///< without brackets for IPv6
  std::uint16_t port = 0;
};

/// Throws std::invalid_argument with a message meant for the operator.
ListenUrl parse_listen_url(std::string_view url);

/// "scheme://host:port", with brackets around IPv6 hosts.
std::string format_listen_url(std::string_view scheme, std::string_view host, std::uint16_t port);

}  // namespace harnessd::util
