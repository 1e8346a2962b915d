// Whether a line read on an NDJSON listener is really part of an HTTP
// request: a browser page can make any site's fetch() reach a local TCP
// port, and its request line and headers arrive as "frames". Such a
// connection gets no answer at all, so no page can read anything back.
#pragma once

#include <array>
#include <string_view>

namespace harnessd::transport {

inline bool looks_like_http(std::string_view line) {
  static constexpr std::array<std::string_view, 9> methods = {"GET ",    "POST ",  "PUT ",   "OPTIONS ", "HEAD ",
                                                              "CONNECT ", "DELETE ", "PATCH ", "TRACE "};
  for (std::string_view method : methods) {
    if (line.starts_with(method)) return true;
  }
  // A header line; "Host:" in any case, as HTTP allows.
  constexpr std::string_view host = "host:";
  if (line.size() < host.size()) return false;
  for (std::size_t i = 0; i < host.size(); ++i) {
    const char c = line[i] >= 'A' && line[i] <= 'Z' ? static_cast<char>(line[i] - 'A' + 'a') : line[i];
    if (c != host[i]) return false;
  }
  return true;
}

}  // namespace harnessd::transport
