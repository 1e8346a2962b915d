// The daemon's MCP servers: one client per `[mcp.NAME]` table, started
// together at start-up (without waiting for any of them) and stopped
// together when the daemon stops.
#pragma once

#include "mcp/config.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <vector>

namespace harnessd::tools {
class ToolRegistry;
}

namespace harnessd::mcp {

class Client;

class Servers {
 public:
  /// `registry` receives the servers' tools; it must outlive the io_context's run.
  Servers(boost::asio::any_io_executor executor, tools::ToolRegistry& registry, std::vector<ServerConfig> configs,
          Options options = {});
  ~Servers();
  Servers(const Servers&) = delete;
  Servers& operator=(const Servers&) = delete;

  /// Connects every server in the background; returns at once.
  void start();
  /// Kills the children and ends the restarts; the clients' work then
  /// drains from the io_context. Thread-safe; later calls do nothing.
  void stop();

  std::size_t size() const noexcept { return clients_.size(); }

 private:
  std::vector<std::shared_ptr<Client>> clients_;
};

}  // namespace harnessd::mcp
