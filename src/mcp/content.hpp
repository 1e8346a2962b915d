// A tools/call result of an MCP server as the model and clients see it:
// content blocks become text (images, audio and links as short
// placeholders), isError becomes a tool error. Pure: JSON in, ToolResult out.
#pragma once

#include "tools/tool.hpp"

#include <boost/json/object.hpp>

#include <cstddef>
#include <string_view>

namespace harnessd::mcp {

/// The error code of a result the server marked `isError`.
inline constexpr std::string_view tool_error_code = "MCP_TOOL_ERROR";

/// Bytes `base64` decodes to (whitespace ignored, padding counted off).
std::size_t base64_decoded_size(std::string_view base64) noexcept;

/// The text of `result` (a CallToolResult), cut to `max_text_bytes` with a
/// note saying how much was left out; valid UTF-8 whatever the input.
tools::ToolResult to_tool_result(const boost::json::object& result, std::size_t max_text_bytes);

}  // namespace harnessd::mcp
