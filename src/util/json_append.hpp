// Appending JSON text to a string without building a json::value: what the
// hot path uses to serialize typed events once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace harnessd::util {

/// Appends `text` as a JSON string literal, escaped byte for byte as
/// Boost.JSON's serializer escapes it (", \, and control characters; other
/// bytes, UTF-8 included, as they are).
void append_json_string(std::string& out, std::string_view text);

void append_json_int(std::string& out, std::int64_t value);

}  // namespace harnessd::util
