#include "mcp/servers.hpp"

#include "mcp/client.hpp"

namespace harnessd::mcp {

Servers::Servers(boost::asio::any_io_executor executor, tools::ToolRegistry& registry,
                 std::vector<ServerConfig> configs, Options options) {
  for (ServerConfig& config : configs) {
    clients_.push_back(Client::create(executor, std::move(config), options, registry));
  }
}

Servers::~Servers() = default;

void Servers::start() {
  for (const std::shared_ptr<Client>& client : clients_) client->start();
}

void Servers::stop() {
  for (const std::shared_ptr<Client>& client : clients_) client->stop();
}

}  // namespace harnessd::mcp
