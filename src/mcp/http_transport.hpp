// An MCP server over streamable HTTP: each message is a POST whose answer is
// JSON or an SSE stream of messages; the server's session id and the agreed
// protocol revision go with every later request. A GET stream carries what
// the server sends on its own (list_changed), when it offers one.
#pragma once

#include "mcp/config.hpp"
#include "mcp/stdio_transport.hpp"
#include "mcp/transport.hpp"

#include <memory>
#include <string>

namespace harnessd::mcp {

/// "" when `url` is an http:// or https:// URL the transport can use, else
/// why not (for the config reader's message).
std::string check_http_url(const std::string& url);

/// Created and used on `strand` (see Transport).
std::shared_ptr<Transport> make_http_transport(Strand strand, const ServerConfig& config, const Options& options);

}  // namespace harnessd::mcp
