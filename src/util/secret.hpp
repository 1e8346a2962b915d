// Comparison of secrets (bearer tokens) that takes the same time wherever
// the inputs differ, so a refused client learns nothing about the token.
#pragma once

#include <string_view>

namespace harnessd::util {

inline bool same_secret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::size_t n = a.size() < b.size() ? a.size() : b.size();
  for (std::size_t i = 0; i < n; ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace harnessd::util
