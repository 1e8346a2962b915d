// Statement parameters and result cells travel as text: numbers to and from
// that text, and the text a failed statement or connection leaves in the
// errors the store throws. Shared by the store and its parts in this
// directory (one home, so that unity builds see each helper once).
#pragma once

#include "store/errc.hpp"
#include "store/pg/connection.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace harnessd::store::pg {

inline std::string num(std::int64_t v) { return std::to_string(v); }

inline std::int64_t to_int(const std::optional<std::string>& cell) {
  if (!cell) return 0;
  return std::stoll(*cell);
}

/// A system_error's own text, without the category's message what() appends.
inline std::string reason_of(const std::system_error& e) {
  std::string text = e.what();
  const std::string suffix = ": " + e.code().message();
  if (text.size() > suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0) {
    text.resize(text.size() - suffix.size());
  }
  return text;
}

[[noreturn]] inline void throw_failed(const Result& r, std::string_view what) {
  throw std::system_error(errc::unavailable, fmt::format("{}: {}", what, r.error));
}

inline const Result& checked(const Result& r, std::string_view what) {
  if (!r.ok) throw_failed(r, what);
  return r;
}

}  // namespace harnessd::store::pg
