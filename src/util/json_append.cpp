#include "util/json_append.hpp"

#include <array>
#include <charconv>

namespace harnessd::util {

namespace {

/// For each byte below 0x20, and for '"' and '\\': the letter after the
/// backslash ('u' for \u00XX); 0 for a byte written as it is.
constexpr std::array<char, 128> escape_table = [] {
  std::array<char, 128> table{};
  for (int c = 0; c < 0x20; ++c) table[c] = 'u';
  table['\b'] = 'b';
  table['\t'] = 't';
  table['\n'] = 'n';
  table['\f'] = 'f';
  table['\r'] = 'r';
  table['"'] = '"';
  table['\\'] = '\\';
  return table;
}();

char escape_for(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return byte < escape_table.size() ? escape_table[byte] : 0;
}

}  // namespace

void append_json_string(std::string& out, std::string_view text) {
  out.reserve(out.size() + text.size() + 2);
  out += '"';
  std::size_t run = 0;  // start of the bytes not yet copied
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char escape = escape_for(text[i]);
    if (escape == 0) continue;
    out.append(text.data() + run, i - run);
    run = i + 1;
    out += '\\';
    out += escape;
    if (escape == 'u') {
      constexpr std::string_view hex = "0123456789abcdef";
      const auto byte = static_cast<unsigned char>(text[i]);
      out += "00";
      out += hex[byte >> 4];
      out += hex[byte & 0xF];
    }
  }
  out.append(text.data() + run, text.size() - run);
  out += '"';
}

void append_json_int(std::string& out, std::int64_t value) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, result.ptr);
}

}  // namespace harnessd::util
