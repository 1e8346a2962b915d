#include "tools/web_fetch.hpp"

#include "util/utf8.hpp"

#include <array>
#include <cctype>
#include <cstdint>

namespace harnessd::tools {

namespace {

bool v4_public(const boost::asio::ip::address_v4& v4) {
  const std::uint32_t a = v4.to_uint();
  const auto in = [a](std::uint32_t net, int bits) {
    const std::uint32_t mask = bits == 0 ? 0 : ~std::uint32_t{0} << (32 - bits);
    return (a & mask) == net;
  };
  return !(in(0x00000000, 8)       // "this" network, 0.0.0.0
           || in(0x0A000000, 8)    // 10/8
           || in(0x64400000, 10)   // 100.64/10 carrier-grade NAT
           || in(0x7F000000, 8)    // loopback
           || in(0xA9FE0000, 16)   // 169.254/16 link-local, cloud metadata
           || in(0xAC100000, 12)   // 172.16/12
           || in(0xC0000000, 24)   // 192.0.0/24 protocol assignments
           || in(0xC0A80000, 16)   // 192.168/16
           || in(0xC6120000, 15)   // 198.18/15 benchmarking
           || in(0xE0000000, 4)    // multicast
           || in(0xF0000000, 4));  // reserved, broadcast
}

}  // namespace

bool is_public_address(const boost::asio::ip::address& address) {
  if (address.is_v4()) return v4_public(address.to_v4());
  const boost::asio::ip::address_v6 v6 = address.to_v6();
  if (v6.is_v4_mapped()) return v4_public(boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, v6));
  const auto bytes = v6.to_bytes();
  if (v6.is_loopback() || v6.is_unspecified() || v6.is_multicast() || v6.is_link_local()) return false;
  if ((bytes[0] & 0xFE) == 0xFC) return false;                                  // fc00::/7 unique local
  if (bytes[0] == 0xFE && (bytes[1] & 0xC0) == 0xC0) return false;              // fec0::/10 site-local
  if (bytes[0] == 0x00 && bytes[1] == 0x64 && bytes[2] == 0xFF && bytes[3] == 0x9B) return false;  // NAT64
  if (bytes[0] == 0x20 && bytes[1] == 0x01 && bytes[2] == 0x0D && bytes[3] == 0xB8) return false;  // docs
  // IPv4-compatible ::a.b.c.d (deprecated, but still routed to v4 by some stacks).
  bool v4_compatible = true;
  for (int i = 0; i < 12; ++i) v4_compatible = v4_compatible && bytes[static_cast<std::size_t>(i)] == 0;
  if (v4_compatible) return false;
  return true;
}

std::string html_to_text(std::string_view html) {
  std::string out;
  out.reserve(html.size() / 2);
  const auto lower_starts = [&html](std::size_t at, std::string_view word) {
    if (html.size() - at < word.size()) return false;
    for (std::size_t i = 0; i < word.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(html[at + i])) != word[i]) return false;
    }
    return true;
  };
  std::size_t i = 0;
  while (i < html.size()) {
    const char c = html[i];
    if (c == '<') {
      // Whole elements whose content is not text.
      bool skipped = false;
      for (const std::string_view element : {std::string_view("script"), std::string_view("style"),
                                             std::string_view("noscript")}) {
        if (lower_starts(i + 1, element)) {
          const std::string close = "</" + std::string(element);
          std::size_t end = i + 1;
          while (end < html.size() && !lower_starts(end, close)) ++end;
          const std::size_t gt = html.find('>', end);
          i = gt == std::string_view::npos ? html.size() : gt + 1;
          skipped = true;
          break;
        }
      }
      if (skipped) continue;
      const bool block = lower_starts(i + 1, "p") || lower_starts(i + 1, "/p") || lower_starts(i + 1, "br") ||
                         lower_starts(i + 1, "div") || lower_starts(i + 1, "/div") || lower_starts(i + 1, "li") ||
                         lower_starts(i + 1, "h") || lower_starts(i + 1, "/h") || lower_starts(i + 1, "tr") ||
                         lower_starts(i + 1, "pre") || lower_starts(i + 1, "/pre");
      const std::size_t gt = html.find('>', i);
      i = gt == std::string_view::npos ? html.size() : gt + 1;
      if (block && !out.empty() && out.back() != '\n') out += '\n';
      continue;
    }
    if (c == '&') {
      static constexpr std::array<std::pair<std::string_view, std::string_view>, 7> entities{{
          {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&nbsp;", " "},
          {"&apos;", "'"}}};
      bool decoded = false;
      for (const auto& [entity, text] : entities) {
        if (html.substr(i, entity.size()) == entity) {
          out += text;
          i += entity.size();
          decoded = true;
          break;
        }
      }
      if (decoded) continue;
    }
    if (c == '\r') {
      ++i;
      continue;
    }
    // Runs of spaces collapse; at most one blank line in a row.
    if ((c == ' ' || c == '\t') && (out.empty() || out.back() == ' ' || out.back() == '\n')) {
      ++i;
      continue;
    }
    if (c == '\n' && out.size() >= 2 && out[out.size() - 1] == '\n' && out[out.size() - 2] == '\n') {
      ++i;
      continue;
    }
    out += c == '\t' ? ' ' : c;
    ++i;
  }
  return util::valid_utf8(out);
}

}  // namespace harnessd::tools
