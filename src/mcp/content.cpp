#include "mcp/content.hpp"

#include "util/utf8.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <string>

namespace harnessd::mcp {

namespace json = boost::json;

namespace {

std::string_view string_field(const json::object& object, std::string_view key) {
  if (const json::value* value = object.if_contains(key); value != nullptr && value->is_string()) {
    return value->get_string();
  }
  return {};
}

/// One content block as text; `had_text` tells whether it was a text block.
std::string block_text(const json::object& block, bool& had_text) {
  const std::string_view type = string_field(block, "type");
  if (type == "text") {
    had_text = true;
    return std::string(string_field(block, "text"));
  }
  if (type == "image" || type == "audio") {
    const std::string_view mime = string_field(block, "mimeType");
    return "[" + std::string(type) + ": " + std::string(mime.empty() ? "unknown type" : mime) + ", " +
           std::to_string(base64_decoded_size(string_field(block, "data"))) + " bytes]";
  }
  if (type == "resource") {
    const json::value* resource = block.if_contains("resource");
    if (resource != nullptr && resource->is_object()) {
      const json::object& r = resource->get_object();
      if (const json::value* text = r.if_contains("text"); text != nullptr && text->is_string()) {
        had_text = true;
        return std::string(text->get_string());
      }
      return "[resource: " + std::string(string_field(r, "uri")) + "]";
    }
    return "[resource]";
  }
  if (type == "resource_link") return "[resource: " + std::string(string_field(block, "uri")) + "]";
  return "[" + std::string(type.empty() ? "unknown" : type) + " content]";
}

}  // namespace

std::size_t base64_decoded_size(std::string_view base64) noexcept {
  // '=' only fills the last group: the data characters alone decide.
  std::size_t chars = 0;
  for (const char c : base64) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '=') continue;
    ++chars;
  }
  // Every 4 characters carry 3 bytes; a final group of 2 or 3 carries 1 or 2.
  const std::size_t whole = chars / 4 * 3;
  const std::size_t rest = chars % 4;
  return whole + (rest >= 2 ? rest - 1 : 0);
}

tools::ToolResult to_tool_result(const json::object& result, std::size_t max_text_bytes) {
  std::string text;
  bool had_text = false;
  if (const json::value* content = result.if_contains("content"); content != nullptr && content->is_array()) {
    for (const json::value& block : content->get_array()) {
      if (!block.is_object()) continue;
      std::string part = block_text(block.get_object(), had_text);
      if (!text.empty()) text.push_back('\n');
      text += part;
    }
  }
  if (!had_text) {
    if (const json::value* structured = result.if_contains("structuredContent");
        structured != nullptr && !structured->is_null()) {
      if (!text.empty()) text.push_back('\n');
      text += json::serialize(*structured);
    }
  }
  util::make_valid_utf8(text);
  if (text.size() > max_text_bytes) {
    const std::size_t kept = util::cut_utf8(text, max_text_bytes).size();
    const std::size_t left = text.size() - kept;
    text.resize(kept);
    text += "\n[cut: " + std::to_string(left) + " more bytes of the MCP tool's result]";
  }
  const json::value* is_error = result.if_contains("isError");
  if (is_error != nullptr && is_error->is_bool() && is_error->get_bool()) {
    tools::ToolResult failed = tools::ToolResult::failure(std::string(tool_error_code),
                                                          text.empty() ? "the MCP tool failed" : text);
    return failed;
  }
  tools::ToolResult ok;
  ok.text = std::move(text);
  return ok;
}

}  // namespace harnessd::mcp
