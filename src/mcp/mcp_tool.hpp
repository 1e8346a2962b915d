// An MCP server's tool as a tools::Tool: what tools/list said about it
// (schema, description, readOnlyHint), run by a tools/call through its
// server's client.
#pragma once

#include "tools/tool.hpp"

#include <boost/json/object.hpp>

#include <memory>

namespace harnessd::mcp {

class Client;

/// The tool one entry of a tools/list answer describes, offered as
/// mcp__SERVER__TOOL; nullptr when the entry has no usable name.
std::shared_ptr<tools::Tool> make_mcp_tool(std::shared_ptr<Client> client, const boost::json::object& entry);

}  // namespace harnessd::mcp
