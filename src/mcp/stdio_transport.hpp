// An MCP server as a child process: newline-delimited JSON on its stdin and
// stdout, its stderr copied to the daemon's log (never to the daemon's
// stdout, which is the protocol in --stdio mode). The child leads its own
// process group, so stopping it also ends whatever it started (npx, node).
#pragma once

#include "mcp/config.hpp"
#include "mcp/transport.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/strand.hpp>

#include <memory>

namespace harnessd::mcp {

using Strand = boost::asio::strand<boost::asio::any_io_executor>;

/// Created and used on `strand` (see Transport).
std::shared_ptr<Transport> make_stdio_transport(Strand strand, const ServerConfig& config, const Options& options);

}  // namespace harnessd::mcp
