// The pure parts of web_fetch, apart so they are unit tested: which
// addresses a fetch may reach, and a page's text.
#pragma once

#include <boost/asio/ip/address.hpp>

#include <string>
#include <string_view>

namespace harnessd::tools {

/// False for loopback, private (RFC 1918, unique local), carrier-grade NAT,
/// link-local (cloud metadata lives there), unspecified, multicast and
/// reserved addresses, IPv4 inside IPv6 included.
bool is_public_address(const boost::asio::ip::address& address);

/// The text of an HTML page: scripts, styles and tags dropped, common
/// entities decoded, block ends as newlines, runs of blank lines squeezed.
/// Valid UTF-8 whatever the input.
std::string html_to_text(std::string_view html);

}  // namespace harnessd::tools
