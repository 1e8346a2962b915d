#include "mcp/tool_name.hpp"

namespace harnessd::mcp {

namespace {

bool allowed(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

}  // namespace

std::string sanitize_name_part(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    // A UTF-8 continuation byte belongs to the character already replaced.
    if ((c & 0xC0) == 0x80) continue;
    out.push_back(allowed(c) ? ch : '_');
  }
  return out;
}

std::string tool_name(std::string_view server, std::string_view tool) {
  std::string name = "mcp__" + sanitize_name_part(server) + "__" + sanitize_name_part(tool);
  // Only ASCII is left, so any cut is a whole character.
  if (name.size() > max_tool_name_bytes) name.resize(max_tool_name_bytes);
  return name;
}

}  // namespace harnessd::mcp
