// UTF-8 validation and repair, byte by byte after an ASCII fast path: the
// texts checked are mostly model output (ASCII or valid UTF-8), so the
// common case is one scan and no copy.
#include "util/utf8.hpp"

#include <cstdint>
#include <cstring>

namespace harnessd::util {

namespace {

constexpr std::string_view replacement = "\xEF\xBF\xBD";  // U+FFFD

/// What one position of the text holds: a well-formed character of `size`
/// bytes, or (valid == false) an ill-formed maximal subpart of `size` bytes
/// (at least 1) that becomes one U+FFFD.
struct Sequence {
  std::size_t size;
  bool valid;
};

/// Unicode 15 table 3-7: the lead byte fixes the length and the range of the
/// first continuation byte; the others are 80..BF.
Sequence sequence_at(const unsigned char* p, std::size_t left) noexcept {
  const unsigned char lead = p[0];
  if (lead < 0x80) return {1, true};
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead == 0xE0) {
    length = 3, low = 0xA0;  // below: overlong
  } else if (lead == 0xED) {
    length = 3, high = 0x9F;  // above: surrogates
  } else if (lead >= 0xE1 && lead <= 0xEF) {
    length = 3;
  } else if (lead == 0xF0) {
    length = 4, low = 0x90;  // below: overlong
  } else if (lead == 0xF4) {
    length = 4, high = 0x8F;  // above: past U+10FFFF
  } else if (lead >= 0xF1 && lead <= 0xF3) {
    length = 4;
  } else {
    return {1, false};  // 80..C1 (continuation, overlong lead), F5..FF
  }
  for (std::size_t i = 1; i < length; ++i) {
    // The maximal subpart ends before the first byte that cannot continue
    // it; that byte starts the next sequence.
    if (i >= left || p[i] < low || p[i] > high) return {i, false};
    low = 0x80, high = 0xBF;
  }
  return {length, true};
}

/// Bytes from `from` on that are plain ASCII, eight at a time.
std::size_t ascii_run(const unsigned char* p, std::size_t size, std::size_t from) noexcept {
  std::size_t i = from;
  while (i + 8 <= size) {
    std::uint64_t word;
    std::memcpy(&word, p + i, 8);
    if ((word & 0x8080808080808080ULL) != 0) break;
    i += 8;
  }
  while (i < size && p[i] < 0x80) ++i;
  return i;
}

/// Length of the longest well-formed prefix.
std::size_t valid_prefix(std::string_view text) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  std::size_t i = 0;
  while (true) {
    i = ascii_run(p, text.size(), i);
    if (i == text.size()) return i;
    const Sequence s = sequence_at(p + i, text.size() - i);
    if (!s.valid) return i;
    i += s.size;
  }
}

/// Appends the repaired form of `text`, which starts with an ill-formed
/// sequence or anything else.
void append_repaired(std::string& out, std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t run_end = ascii_run(p, text.size(), i);
    std::size_t j = run_end;
    Sequence s{0, true};
    while (j < text.size()) {
      s = sequence_at(p + j, text.size() - j);
      if (!s.valid) break;
      j += s.size;
    }
    out.append(text.data() + i, j - i);
    if (j == text.size()) break;
    out += replacement;
    i = j + s.size;
  }
}

}  // namespace

bool is_valid_utf8(std::string_view text) noexcept { return valid_prefix(text) == text.size(); }

std::string valid_utf8(std::string_view text) {
  const std::size_t good = valid_prefix(text);
  if (good == text.size()) return std::string(text);
  std::string out;
  // Each bad byte grows to at most three.
  out.reserve(text.size() + 16);
  out.append(text.data(), good);
  append_repaired(out, text.substr(good));
  return out;
}

void make_valid_utf8(std::string& text) {
  const std::size_t good = valid_prefix(text);
  if (good == text.size()) return;
  std::string out;
  out.reserve(text.size() + 16);
  out.append(text.data(), good);
  append_repaired(out, std::string_view(text).substr(good));
  text = std::move(out);
}

std::string_view cut_utf8(std::string_view text, std::size_t max_bytes) noexcept {
  if (text.size() <= max_bytes) return text;
  // A character is at most four bytes: at most three continuation bytes
  // before the cut belong to the character it would split.
  std::size_t cut = max_bytes;
  for (int back = 0; back < 3 && cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80; ++back) {
    --cut;
  }
  if ((static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) cut = max_bytes;  // not UTF-8 here anyway
  return text.substr(0, cut);
}

}  // namespace harnessd::util
