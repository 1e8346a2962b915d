// The name a model sees for an MCP server's tool: `mcp__SERVER__TOOL`,
// restricted to the characters every model API accepts in a function name.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace harnessd::mcp {

/// Model APIs (OpenAI's among them) refuse longer function names.
inline constexpr std::size_t max_tool_name_bytes = 64;

/// `text` with each character outside [A-Za-z0-9_-] as '_' (one per
/// character: a multi-byte UTF-8 sequence becomes a single '_').
std::string sanitize_name_part(std::string_view text);

/// "mcp__" + SERVER + "__" + TOOL, both parts sanitized, cut to 64 bytes.
std::string tool_name(std::string_view server, std::string_view tool);

}  // namespace harnessd::mcp
