// --listen values: tcp://HOST:PORT and ws://HOST:PORT, as util::Url.
#pragma once

#include "harnessd/util/url.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace harnessd::util {

/// A --listen address: scheme "tcp" or "ws", a port 0..65535 (0 picks a free
/// one), no path; "localhost" becomes 127.0.0.1.
using ListenUrl = Url;

/// Throws std::invalid_argument with a message meant for the operator.
ListenUrl parse_listen_url(std::string_view url);

/// "scheme://host:port", with brackets around IPv6 hosts.
std::string format_listen_url(std::string_view scheme, std::string_view host, std::uint16_t port);

}  // namespace harnessd::util
