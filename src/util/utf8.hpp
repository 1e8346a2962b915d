// UTF-8 validity at the edges: bytes from a model endpoint (an HTML error
// page, a body cut mid-character) must never reach a session log or a
// client as invalid UTF-8, or the log no longer parses as JSON and the
// session cannot be read or loaded again. Providers' texts pass through
// these functions before they become events.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace harnessd::util {

/// True when `text` is well-formed UTF-8 (Unicode 15 table 3-7): no
/// overlongs, no surrogates, nothing past U+10FFFF, no truncated sequence.
bool is_valid_utf8(std::string_view text) noexcept;

/// `text` with each ill-formed sequence replaced by U+FFFD, one per maximal
/// subpart (the WHATWG decoder's and Unicode's recommended practice): a
/// truncated sequence becomes one U+FFFD, a byte that can start nothing
/// becomes one each. Valid input comes back unchanged.
std::string valid_utf8(std::string_view text);

/// The same, in place; does not touch (or reallocate) a valid string.
void make_valid_utf8(std::string& text);

/// The longest prefix of `text` of at most `max_bytes` bytes that does not
/// end inside a character. For valid input the prefix is valid; for
/// invalid input it is only a prefix (run valid_utf8 first).
std::string_view cut_utf8(std::string_view text, std::size_t max_bytes) noexcept;

}  // namespace harnessd::util
